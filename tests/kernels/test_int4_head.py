"""The int8 mode's 4-bit head (inference/kernels/csrc/head.h, quant.KernelInt4Linear): the packing, the kernel's
integer math against a torch reference, head_rescored on it, and the model taking it (TOKENSTEP_INT8_HEAD)."""

import pytest
import torch
from tiny import close, make_hf_model, save_hf_model

from inference import kernels
from inference.model import quant
from inference.store.loading import load_model
from inference.model.quant import INT4_GROUP, KernelInt4Linear, KernelInt8Linear, dequantize_int4, quantize_int4

ops = kernels.ops()
pytestmark = pytest.mark.kernels


def quantize_activations(h: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """h (K,) -> xq (K,) in [-127, 127] and each group's scale: the kernel's math in float32 (127 / amax of the
    group, a product, round half to even; an all-zero group: zeros, scale 0)."""
    grouped = h.view(-1, group)
    amax = grouped.abs().amax(dim=1)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    xq = torch.round((grouped * (torch.tensor(127.0) / safe)[:, None]).clamp(-127, 127))
    xq = torch.where(amax[:, None] > 0, xq, torch.zeros_like(xq))
    return xq.flatten(), torch.where(amax > 0, amax / 127.0, torch.zeros_like(amax))


def reference(packed, scale, x, alpha=1.0) -> torch.Tensor:
    """alpha * sum over groups of (weight scale * activation scale) * exact integer sums, per row of x."""
    q = (dequantize_int4(packed, torch.ones_like(scale)).round().long())  # (out, in) in [-8, 7]
    group = q.shape[1] // scale.shape[1]
    rows = []
    for h in x:
        xq, xs = quantize_activations(h, group)
        sums = (q.view(q.shape[0], -1, group) * xq.long().view(1, -1, group)).sum(2)  # (out, groups), exact
        rows.append(alpha * (sums.double() * scale.double() * xs.double()).sum(1))
    return torch.stack(rows)  # (T, out)


@pytest.mark.parametrize("group", [32, 64, 128])
def test_packing_holds_each_weight_within_half_a_step(group):
    g = torch.Generator().manual_seed(group)
    w = torch.randn(37, 256, generator=g) * torch.linspace(0.01, 3.0, 256)
    packed, scale = quantize_int4(w, group)
    assert packed.dtype == torch.uint8 and packed.shape == (37, 128) and scale.shape == (37, 256 // group)
    step = scale.float().repeat_interleave(group, dim=1)
    assert ((dequantize_int4(packed, scale) - w).abs() <= step * 0.5 + 1e-6).all()
    # byte j of a block of 32: weight j in the low nibble, weight j + 16 in the high one, each q + 8
    q = torch.round(w / step).clamp(-8, 7).long() + 8
    assert torch.equal(packed[:, :16].long() & 0x0F, q[:, :16]) and torch.equal(packed[:, :16].long() >> 4, q[:, 16:32])
    with pytest.raises(ValueError, match="int4 groups"):
        quantize_int4(torch.randn(4, 48), 32)


@pytest.mark.parametrize("K, group", [(576, 32), (576, 64), (256, 256), (64, 32)])
def test_activation_quantisation_matches_torch(K, group):
    g = torch.Generator().manual_seed(K + group)
    x = torch.randn(K, generator=g) * torch.linspace(0.01, 40.0, K)
    if K > group:
        x[:group] = 0.0  # an all-zero group
    xq, scales, starts = ops.quantize_activations_int4(x, group)
    want_q, want_s = quantize_activations(x, group)
    assert torch.equal(xq.float(), want_q) and torch.equal(scales, want_s)
    # lane j of a group starts at -8 times the sum of its activations 4j..4j+3 of every block of 32
    lanes = want_q.view(K // group, group // 32, 8, 4).sum(dim=(1, 3)).long()
    assert torch.equal(starts.long(), -8 * lanes)


@pytest.mark.parametrize("out_features, K, group", [(1000, 576, 32), (33, 576, 64), (7, 256, 256), (130, 64, 32),
                                                    (5, 96, 32), (9, 160, 32), (3, 384, 128)])
def test_int4_product_matches_the_exact_integer_math(out_features, K, group):
    g = torch.Generator().manual_seed(out_features)
    packed, scale = quantize_int4(torch.randn(out_features, K, generator=g), group)
    x = torch.randn(3, K, generator=g) * torch.tensor([[0.1], [1.0], [30.0]])  # rows of different ranges
    got = ops.gemv_int4(packed, scale, x, 0.7)
    assert got.shape == (3, out_features)
    assert close(got, reference(packed, scale, x, 0.7))
    for t in range(3):  # each row as it is alone
        assert torch.equal(got[t:t + 1], ops.gemv_int4(packed, scale, x[t:t + 1], 0.7))
    # and it is the product of the dequantised matrix within the activations' int8 step
    exact = 0.7 * (x.double() @ dequantize_int4(packed, scale).double().t())
    assert (got.double() - exact).abs().max().item() < 0.05 * exact.abs().max().item()


def test_int4_head_in_one_call_rescores_the_top_tokens_from_the_float_rows():
    """head_rescored on 4-bit weights: the ranking is gemv_int4's of rmsnorm(x), its `rescored` highest
    replaced by the float rows' dot products; every other logit is the 4-bit one."""
    g = torch.Generator().manual_seed(5)
    V, C = 900, 64
    x, weight = torch.randn(1, C, generator=g) * 3, torch.rand(C, generator=g) + 0.5
    h = torch.nn.functional.rms_norm(x, (C,), weight, 1e-6)
    float_rows = torch.randn(V, C, generator=g)
    packed, scale = quantize_int4(float_rows)
    ranked = ops.gemv_int4(packed, scale, h, 1.0)[0]
    got = ops.head_rescored(packed, scale, x, weight, 1e-6, float_rows, 64)[0]
    exact = (float_rows.double() @ h[0].double()).float()
    top = ranked.topk(64).indices
    expected = ranked.clone()
    expected[top] = exact[top]
    assert (got - expected).abs().max().item() <= 1e-6 * expected.abs().max().item() + 1e-5
    assert not torch.allclose(ranked[top], exact[top], atol=1e-3)  # the 4-bit logits really were replaced


def _decoder(tmp_path, monkeypatch, head: str | None):
    if head is None:
        monkeypatch.delenv("TOKENSTEP_INT8_HEAD", raising=False)
    else:
        monkeypatch.setenv("TOKENSTEP_INT8_HEAD", head)
    folder = tmp_path / "tiny"
    if not folder.exists():
        save_hf_model(make_hf_model("llama", seed=3), folder)
    return load_model(folder, device="cpu", dtype="int8").decoder


def test_the_int8_mode_ranks_in_4_bits_and_shows_the_same_top_logits(tmp_path, monkeypatch):
    """On the kernels the int8 mode's head is 4-bit by default (TOKENSTEP_INT8_HEAD=int8 keeps int8), its
    weights half the int8 head's bytes; the layers are the same, so the tokens both heads rescore get the same
    logits, bit for bit, step after step; the rest stay within the 4-bit ranking's error."""
    heads = {name: _decoder(tmp_path, monkeypatch, name) for name in (None, "int8")}
    four, eight = heads[None].weights.lm_head, heads["int8"].weights.lm_head
    assert isinstance(four.linear, KernelInt4Linear) and isinstance(eight.linear, KernelInt8Linear)
    assert four.linear.weight.numel() * 2 == eight.linear.weight.numel()
    ids = torch.tensor([5, 77, 200, 31, 9, 140])
    steps = {}
    for name, decoder in heads.items():
        cache = decoder.new_cache(len(ids))
        with torch.inference_mode():
            decoder.forward(ids[:2], 0, cache)
            steps[name] = torch.cat([decoder.forward(ids[i:i + 1], i, cache) for i in range(2, len(ids))])
    for a, b in zip(steps[None], steps["int8"], strict=True):
        half = quant.RESCORED // 2  # tokens this high are among both heads' rescored ones (64 and 256)
        shared = sorted(set(a.topk(half).indices.tolist()) & set(b.topk(half).indices.tolist()))
        assert len(shared) >= half - 2 and torch.equal(a[shared], b[shared])
        assert a.argmax() == b.argmax()
        assert (a - b).abs().max().item() < 0.5 * a.abs().max().item()
    monkeypatch.delenv("TOKENSTEP_INT8_HEAD")
    assert quant.int4_head(ops) and not quant.int4_head(None)  # off the kernels: the int8 head (stock ops, CUDA)
    monkeypatch.setenv("TOKENSTEP_INT8_HEAD", "int2")
    with pytest.raises(ValueError, match="TOKENSTEP_INT8_HEAD"):
        quant.int4_head(ops)


def test_a_long_prefill_dequantises_the_4_bit_head(tmp_path, monkeypatch):
    """More than INT4_KERNEL_ROWS rows of logits go to BLAS on the dequantised matrix; fewer (the logit lens's)
    stay on the kernels, a row at a time."""
    decoder = _decoder(tmp_path, monkeypatch, None)
    head = decoder.weights.lm_head
    h = torch.randn(quant.INT4_KERNEL_ROWS + 3, 64)
    with torch.inference_mode():
        many = head.linear(h)
        few = torch.cat([head.linear(h[i:i + 64]) for i in range(0, h.shape[0], 64)])
    exact = h.double() @ dequantize_int4(head.linear.weight, head.linear.scale).double().t()
    assert (many.double() - exact).abs().max().item() < 1e-4 * exact.abs().max().item()
    assert (few.double() - exact).abs().max().item() < 0.02 * exact.abs().max().item()
    assert INT4_GROUP % 32 == 0


def test_the_model_info_says_what_the_int8_model_computes(tmp_path, monkeypatch):
    """ModelInfo.decode_notes (the status bar's tooltip, the trace's model line) names the head's ranking and a
    non-float path; float models have none."""
    folder = save_hf_model(make_hf_model("llama", seed=3), tmp_path / "tiny")

    def notes(path: str, head: str, dtype: str = "int8") -> str:
        monkeypatch.setenv("TOKENSTEP_INT8_PATH", path)
        monkeypatch.setenv("TOKENSTEP_INT8_HEAD", head)
        return load_model(folder, device="cpu", dtype=dtype).info().decode_notes

    assert notes("int16", "int4") == ("int8 products on int16 activations; "
                                      "head ranks in 4 bits, best 256 rescored in float")
    assert notes("float", "int8") == "head ranks in 8 bits, best 64 rescored in float"
    assert notes("float", "int4", "float32") == ""
