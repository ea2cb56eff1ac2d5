"""The decode kernels (inference/kernels/csrc/: ops.cpp and its parts) against stock PyTorch; skipped where they cannot be built."""

from pathlib import Path

import pytest
import torch
from tiny import build_decoder, make_hf_model, save_hf_model, with_linears

from inference import kernels
from inference.model.layers import KernelLinear, select_backend
from inference.store.loading import load_model
from inference.model.packing import fingerprint, pack
from inference.model.quant import INT8_GROUP, Int8Linear, dequantize, quantize_rows

ops = kernels.ops()
pytestmark = pytest.mark.kernels


@pytest.mark.parametrize("out_features, in_features", [(960, 576), (7, 37), (130, 100), (33, 16)])
def test_gemv_f32_matches_matmul(out_features, in_features):
    g = torch.Generator().manual_seed(out_features)
    w = torch.randn(out_features, in_features, generator=g)
    x = torch.randn(1, in_features, generator=g)
    bias, residual = torch.randn(out_features, generator=g), torch.randn(1, out_features, generator=g)
    expected = 0.7 * (x.double() @ w.double().t()) + bias.double() + residual.double()
    got = ops.gemv_f32(w, x, 0.7, bias, residual)
    assert got.shape == (1, out_features) and got.dtype == torch.float32
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5
    plain = ops.gemv_f32(w, x, 1.0, None, None)
    assert (plain.double() - x.double() @ w.double().t()).abs().max().item() <= 1e-4


@pytest.mark.parametrize("out_features, in_features, group", [(576, 1536, 64), (9, 70, 64), (40, 96, 32),
                                                               (17, 48, 48)])
@pytest.mark.parametrize("rows", [1, 5, 32])
def test_gemv_int8_matches_the_dequantised_matmul(out_features, in_features, group, rows):
    """One row (decode) and several (short prefill), group-wise scales, tails that are not 16 wide."""
    g = torch.Generator().manual_seed(in_features + rows)
    q, scale = quantize_rows(torch.randn(out_features, in_features, generator=g), group)
    assert scale.shape == (out_features, in_features // group if in_features % group == 0 else 1)
    x = torch.randn(rows, in_features, generator=g)
    residual = torch.randn(rows, out_features, generator=g)
    bias = torch.randn(out_features, generator=g)
    dequantised = dequantize(q, scale).double()
    repeated = scale.double().repeat_interleave(in_features // scale.shape[1], 1)  # (out, in)
    assert torch.equal(dequantised, q.double() * repeated)
    assert torch.equal(ops.dequantize_int8(q, scale), dequantize(q, scale))
    expected = 1.3 * (x.double() @ dequantised.t()) + bias.double() + residual.double()
    got = ops.gemv_int8(q, scale, x, 1.3, bias, residual)
    assert got.shape == (rows, out_features)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5


def _rms_scaled(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x.double() / (x.double().pow(2).mean(-1, keepdim=True) + eps).sqrt()


@pytest.mark.parametrize("in_features", [576, 37])
def test_gemv_applies_the_folded_rms_norm_of_each_row(in_features):
    """rms_eps >= 0: each row of x is divided by its rms first (the norm's weight lives in the matrix)."""
    g = torch.Generator().manual_seed(in_features)
    w = torch.randn(50, in_features, generator=g)
    x = torch.randn(1, in_features, generator=g) * 3
    bias, residual = torch.randn(50, generator=g), torch.randn(1, 50, generator=g)
    expected = 0.5 * (_rms_scaled(x, 1e-5) @ w.double().t()) + bias.double() + residual.double()
    got = ops.gemv_f32(w, x, 0.5, bias, residual, 1e-5)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5
    q, scale = quantize_rows(w, 32 if in_features % 32 == 0 else in_features)
    xs = torch.randn(5, in_features, generator=g) * torch.arange(1, 6)[:, None]  # rows of different rms
    expected = _rms_scaled(xs, 1e-6) @ dequantize(q, scale).double().t()
    for x_rows in (xs[:1], xs):
        got = ops.gemv_int8(q, scale, x_rows, 1.0, None, None, 1e-6)
        want = expected[: x_rows.shape[0]]
        assert (got.double() - want).abs().max().item() <= 1e-5 * want.abs().max().item() + 1e-5
    # a norm weight not folded into the matrix multiplies x after its rms is taken
    norm_weight = torch.rand(in_features, generator=g) + 0.5
    expected = (_rms_scaled(xs, 1e-6) * norm_weight.double()) @ dequantize(q, scale).double().t()
    got = ops.gemv_int8(q, scale, xs, 1.0, None, None, 1e-6, False, norm_weight)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5
    expected = (_rms_scaled(x, 1e-5) * norm_weight.double()) @ w.double().t()
    got = ops.gemv_f32(w, x, 1.0, None, None, 1e-5, False, norm_weight)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5


@pytest.mark.parametrize("ffn, in_features", [(1536, 576), (70, 33)])
def test_gated_product_is_silu_of_the_gate_rows_times_the_up_rows(ffn, in_features):
    g = torch.Generator().manual_seed(ffn)
    w = torch.randn(2 * ffn, in_features, generator=g) / in_features ** 0.5
    x = torch.randn(1, in_features, generator=g)
    bias = torch.randn(2 * ffn, generator=g)

    def gated(product: torch.Tensor) -> torch.Tensor:
        gate, up = product.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up

    expected = gated(0.8 * (_rms_scaled(x, 1e-5) @ w.double().t()) + bias.double())
    got = ops.gemv_f32(w, x, 0.8, bias, None, 1e-5, True)
    assert got.shape == (1, ffn)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5
    q, scale = quantize_rows(w, in_features if in_features % 64 else 64)
    expected = gated(x.double() @ dequantize(q, scale).double().t())
    got = ops.gemv_int8(q, scale, x, 1.0, None, None, -1.0, True)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5
    with pytest.raises(RuntimeError, match="glu"):
        ops.gemv_int8(q, scale, torch.randn(3, in_features), 1.0, None, None, -1.0, True)


@pytest.mark.parametrize("heads, kv_heads, head_dim, n", [(9, 3, 64, 1), (9, 3, 64, 300), (4, 4, 20, 17),
                                                          (8, 1, 128, 64), (9, 3, 64, 2049), (6, 2, 80, 333),
                                                          (16, 16, 8, 40), (9, 3, 64, 5000), (4, 4, 128, 3001)])
def test_attend_one_is_softmax_attention_over_the_cache_views(heads, kv_heads, head_dim, n):
    """One query per head over cache views (heads a capacity apart), grouped query heads sharing K/V."""
    g = torch.Generator().manual_seed(n + heads)
    capacity = n + 13
    stored = torch.randn(2, kv_heads, capacity, head_dim, generator=g) * 2  # as kv_cache.py keeps it
    keys, values = stored[:, :, :n].unbind(0)
    q = torch.randn(1, heads * head_dim, generator=g) * 2
    group = heads // kv_heads
    k, v = keys.double().repeat_interleave(group, 0), values.double().repeat_interleave(group, 0)
    scores = (q.double().view(heads, 1, head_dim) @ k.mT) / head_dim ** 0.5  # (H, 1, n)
    expected = (scores.softmax(-1) @ v).reshape(1, -1)
    got = ops.attend_one(q, keys, values, head_dim ** -0.5)
    assert got.shape == (1, heads * head_dim) and got.dtype == torch.float32
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-6


@pytest.mark.parametrize("heads, kv_heads, head_dim, n", [(9, 3, 64, 63), (8, 1, 128, 41), (6, 2, 80, 50),
                                                          (14, 2, 64, 60), (4, 2, 24, 37)])
def test_attend_one_gives_a_head_the_same_bits_whether_its_kv_head_is_shared_or_not(heads, kv_heads, head_dim, n):
    """The query heads of a group are computed together (each K/V vector loaded once for all of them), yet each
    head's output is what it would be alone: the same bits as with its KV head copied for it (n < 64 positions:
    one chunk either way)."""
    g = torch.Generator().manual_seed(n * heads)
    keys, values = (torch.randn(2, kv_heads, n, head_dim, generator=g) * 2).unbind(0)
    q = torch.randn(1, heads * head_dim, generator=g) * 2
    group = heads // kv_heads
    alone = ops.attend_one(q, keys.repeat_interleave(group, 0), values.repeat_interleave(group, 0), head_dim ** -0.5)
    assert torch.equal(ops.attend_one(q, keys, values, head_dim ** -0.5), alone)


def test_quantize_rows_groups_bound_each_weight_error_by_half_a_step():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(64, 256, generator=g) * torch.logspace(-2, 1, 256)  # columns of very different ranges
    q, scale = quantize_rows(w)
    assert scale.shape == (64, 256 // INT8_GROUP) and scale.dtype == torch.bfloat16 and q.dtype == torch.int8
    step = scale.float().repeat_interleave(INT8_GROUP, 1)
    assert ((dequantize(q, scale) - w).abs() <= step / 2 + 1e-7).all()
    per_row, row_scale = quantize_rows(w, group=256)
    assert row_scale.shape == (64, 1)
    small = slice(0, INT8_GROUP)  # the narrow-range columns: one scale per row rounds them to a few steps
    grouped_error = (dequantize(q, scale) - w)[:, small].norm()
    assert grouped_error < 0.1 * (dequantize(per_row, row_scale) - w)[:, small].norm()


def _stock_twin(kernel_decoder, folder, dtype):
    """The same weights on stock ops. float32: loaded again for the stock CPU backend (one-row products as
    bmm over row blocks). int8: the kernel model's own q and group scales in quant.Int8Linear, dequantised
    to float32 for each product (the class CUDA uses). Attention: baddbmm / softmax / bmm, op by op."""
    stock = select_backend("cpu", getattr(torch, dtype), allow_own_kernels=False)
    if dtype == "float32":
        return build_decoder(folder, stock)
    return with_linears(kernel_decoder, lambda lin: Int8Linear(lin.weight, lin.bias, lin.scale), stock)


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2", "gpt2"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_decoder_on_kernels_equals_the_same_weights_on_stock_float_ops(tmp_path, monkeypatch, dtype, arch):
    """Same decode logits on the kernels as on stock float32 ops over the same weights, step after step
    (mistral's steps go past its sliding window of 6; llama, mistral and qwen2 run each layer as one
    decode_layer call, gpt2 op by op).

    float32: the same products summed in another order (1e-5, as cached decode against recompute).
    int8: the same group-scaled weights dequantised, float32 throughout, so the same 1e-5. (The stock int8
    path, the same weights on torch's int4 kernel with bfloat16 activations, is tested in test_low_precision.py;
    the integer path, int8 activations on VNNI or AVX2, in test_int8_integer.py.)
    """
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "float")  # float32 activations: the 1e-5 holds
    monkeypatch.setenv("TOKENSTEP_INT8_HEAD", "int8")  # the 4-bit head's ranking: test_int4_head.py
    folder = save_hf_model(make_hf_model(arch), tmp_path)
    model = load_model(folder, device="cpu", dtype=dtype)
    ids = torch.tensor([5, 77, 200, 31, 9, 140, 3, 66, 250, 18])
    prompt = 4

    def decode(decoder):
        cache = decoder.new_cache(len(ids))
        with torch.inference_mode():
            decoder.forward(ids[:prompt], 0, cache)
            return torch.cat([decoder.forward(ids[i:i + 1], i, cache) for i in range(prompt, len(ids))])

    assert model.decoder.backend.name == "kernels"
    assert all(isinstance(lin, KernelLinear) for lin in model.decoder.weights.linears()[:-1])
    assert model.decoder.fused_decode == (arch != "gpt2")
    stock = _stock_twin(model.decoder, folder, dtype)
    assert stock.backend.name == "torch-cpu" and not stock.fused_decode
    assert not any(isinstance(lin, KernelLinear) for lin in stock.weights.linears()[:-1])
    assert (decode(model.decoder) - decode(stock)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_loaded_weights_are_aligned_copies_not_views_of_the_file(tmp_path, dtype):
    """Every weight starts on a 64-byte line (a kernel's vector loads never straddle two lines) and lives
    in memory of its own: overwriting the checkpoint under a loaded model changes none of its numbers."""
    folder = save_hf_model(make_hf_model("llama"), tmp_path)
    model = load_model(folder, device="cpu", dtype=dtype)
    tensors = model.decoder.weights.tensors()
    assert [t.shape for t in tensors if t.data_ptr() % 64] == []
    ids = torch.tensor([5, 77, 200, 31, 9])

    def logits():
        with torch.inference_mode():
            return model.decoder.forward(ids, 0, model.decoder.new_cache(8))

    before = logits()
    file = folder / "model.safetensors"
    header = 8 + int.from_bytes(file.read_bytes()[:8], "little")
    with open(file, "r+b") as f:  # the same file, every tensor's bytes now 0x7f (finite, large floats)
        f.seek(header)
        f.write(b"\x7f" * (file.stat().st_size - header))
    assert torch.equal(logits(), before)


def _smaps_entry(address: int) -> dict[str, str]:
    """The /proc/self/smaps fields of the mapping that holds `address`."""
    entry, inside = {}, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(part, 16) for part in head.split("-"))
            inside = lo <= address < hi
        elif inside:
            key, _, value = line.partition(":")
            entry[key] = value.strip()
    return entry


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_weights_are_one_block_in_decode_order(tmp_path, dtype, tied):
    """pack(): every tensor in one block, layer by layer and then the head, values and sharing unchanged."""
    hf = make_hf_model("llama", tie_word_embeddings=tied)
    model = load_model(save_hf_model(hf, tmp_path), device="cpu", dtype=dtype)
    assert model.config.tie_embeddings == tied
    w = model.decoder.weights
    starts = [lin.weight.data_ptr() for lin in w.linears()]
    assert starts == sorted(starts)  # qkv, o, mlp_in, mlp_out of layer 0, of layer 1, ..., the head
    tensors = w.tensors()
    extents = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors)
    assert extents[-1][1] - extents[0][0] <= sum(hi - lo for lo, hi in extents) + 64 * len(extents)
    assert all(t.untyped_storage().data_ptr() == tensors[0].untyped_storage().data_ptr() for t in tensors)
    head = w.lm_head.float_rows if dtype == "int8" else w.lm_head.weight
    assert (head is w.embed) == tied

    ids = torch.tensor([5, 77, 200, 31, 9])
    with torch.inference_mode():
        before = model.decoder.forward(ids, 0, model.decoder.new_cache(8))
    old_first = extents[0][0]
    pack(w)  # again: a fresh block, the same numbers
    assert w.tensors()[0].data_ptr() != old_first and fingerprint(w) == model.fingerprint
    with torch.inference_mode():
        assert torch.equal(model.decoder.forward(ids, 0, model.decoder.new_cache(8)), before)


@pytest.mark.skipif(not Path("/proc/self/smaps").exists() or
                    "[never]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text(),
                    reason="needs Linux with transparent huge pages")
def test_packed_weights_sit_on_huge_pages(tmp_path):
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path), device="cpu", dtype="float32")
    mapping = _smaps_entry(model.decoder.weights.lm_head.weight.data_ptr())
    assert mapping.get("THPeligible") == "1", mapping


@pytest.mark.parametrize("out_features, in_features", [(1536, 576), (11, 100), (6, 16)])
def test_gemv_f32_rows_in_blocks_are_bit_identical_to_one_row_at_a_time(out_features, in_features):
    """Rows read several at a time sum exactly as a single row does: same numbers, not just close ones."""
    g = torch.Generator().manual_seed(out_features)
    w, x = torch.randn(out_features, in_features, generator=g), torch.randn(1, in_features, generator=g)
    together = ops.gemv_f32(w, x, 1.0, None, None, -1.0, False, None)
    alone = torch.cat([ops.gemv_f32(w[r:r + 1], x, 1.0, None, None, -1.0, False, None)
                       for r in range(out_features)], dim=1)
    assert torch.equal(together, alone)


@pytest.mark.parametrize("batch_bytes", [1, 5000, 64 << 20])
def test_checkpoint_is_read_whole_in_any_batch_size(tmp_path, batch_bytes, monkeypatch):
    """The file is mapped again every READ_BATCH_BYTES; every tensor still comes out whole and exact."""
    from safetensors.torch import load_file

    from inference.model import checkpoint
    from inference.store.loading import read_config

    folder = save_hf_model(make_hf_model("llama"), tmp_path)
    config, _ = read_config(folder)
    monkeypatch.setattr(checkpoint, "READ_BATCH_BYTES", batch_bytes)
    tensors, _ = checkpoint.read_checkpoint(folder, config)
    reference = {checkpoint.canonical_name(k, config.family): v
                 for k, v in load_file(folder / "model.safetensors").items()}
    assert sorted(tensors) == sorted(reference)
    assert all(torch.equal(tensors[name], reference[name].float()) for name in reference)


@pytest.mark.parametrize("arch, dtype, path, prompt, threads", [
    ("llama", "float32", "float", 3, 2), ("qwen3", "float32", "float", 3, 2), ("qwen2", "int8", "float", 3, 2),
    ("qwen3", "int8", "integer", 3, 2), ("llama", "float32", "float", 100, 2), ("llama", "int8", "float", 100, 3),
    ("qwen2", "int8", "integer", 90, 2), ("mistral", "float32", "float", 20, 2), ("llama", "float32", "float", 70, 1),
    ("gemma3", "float32", "float", 20, 2), ("gemma3", "int8", "float", 70, 2)])
def test_all_layers_in_one_call_equal_one_call_per_layer_bit_for_bit(tmp_path, monkeypatch, arch, dtype, path,
                                                                     prompt, threads):
    """A fused decode step runs every layer in one parallel region (decode_layers, csrc/step.h); a step
    whose residual stream is captured (the logit lens) runs one decode_layer call per layer, each product its
    own parallel region. The logits and every layer's K/V written are the same bits either way, step
    after step: short contexts, contexts long enough for attention in several chunks per head (70-105
    positions), a sliding window (Mistral's 6), biases (Qwen2), q/k norms (Qwen3), one, two or three threads.
    Gemma 3's layers (beyond decode_layer) are captured one decode_layers call per layer."""
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", path)
    folder = save_hf_model(make_hf_model(arch), tmp_path)
    decoder = load_model(folder, device="cpu", dtype=dtype).decoder
    assert decoder.fused_decode
    ids = torch.cat([torch.randint(0, 300, (prompt,), generator=torch.Generator().manual_seed(prompt)),
                     torch.tensor([9, 140, 3, 66, 8])])
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _one_call_against_per_layer(decoder, ids, prompt)
    finally:
        torch.set_num_threads(before)


def _one_call_against_per_layer(decoder, ids, prompt):
    n_layers = len(decoder.weights.layers)

    class Rows:  # a ResidualCapture: each layer's output row
        def __init__(self):
            self.rows = []

        def record(self, layer, x):
            self.rows.append(x.clone())

    with torch.inference_mode():
        one, per = decoder.new_cache(len(ids)), decoder.new_cache(len(ids))
        decoder.forward(ids[:prompt], 0, one)
        decoder.forward(ids[:prompt], 0, per)
        for i in range(prompt, len(ids)):
            calls = decoder.forward_count
            fused = decoder.forward(ids[i:i + 1], i, one)
            rows = Rows()
            layered = decoder.forward(ids[i:i + 1], i, per, residuals=rows)
            assert decoder.forward_count == calls + 2 and len(rows.rows) == n_layers
            assert torch.equal(fused, layered)
        for layer in range(n_layers):
            assert torch.equal(one.layer(layer)[:, :, :len(ids)], per.layer(layer)[:, :, :len(ids)]), layer


def test_where_x_is_copied_changes_no_bit_of_a_float32_product():
    """The float32 one-row products read x from a copy placed some bytes past a 64-byte boundary (L1 bank
    conflicts with the weight rows, csrc/f32.h "Where x sits"): every offset gives the same bits."""
    g = torch.Generator().manual_seed(11)
    w, x, bias = torch.randn(300, 576, generator=g), torch.randn(1, 576, generator=g), torch.randn(300, generator=g)
    before = ops.set_x_offset(0)
    try:
        expected = ops.gemv_f32(w, x, 0.5, bias, None)
        assert (expected.double() - (0.5 * x.double() @ w.double().t() + bias.double())).abs().max() < 1e-4
        for offset in range(4, 64, 4):
            ops.set_x_offset(offset)
            assert torch.equal(ops.gemv_f32(w, x, 0.5, bias, None), expected)
        for bad in (-4, 2, 64):
            with pytest.raises(RuntimeError, match="x offset"):
                ops.set_x_offset(bad)
    finally:
        ops.set_x_offset(before)


def test_int8_head_in_one_call_rescores_the_top_tokens_from_the_float_rows():
    """head_rescored (quant.RescoredHead on the kernels): W_int8 rmsnorm(x), then the `rescored` highest
    logits, ties to the lower id, replaced by the float rows' dot products; within float rounding of the
    six torch ops it replaces."""
    g = torch.Generator().manual_seed(5)
    V, C = 400, 64
    x, weight = torch.randn(1, C, generator=g) * 3, torch.rand(C, generator=g) + 0.5
    h = torch.nn.functional.rms_norm(x, (C,), weight, 1e-6)
    float_rows = torch.randn(V, C, generator=g)
    float_rows[5:9] = h[0] / h.norm() * 40  # four tokens tie at the top of the int8 ranking...
    q, scale = quantize_rows(float_rows)
    float_rows[5:9] += torch.randn(4, C, generator=g) * 0.01  # ...and differ in float
    ranked = ops.gemv_int8(q, scale, h, 1.0, None, None)[0]
    assert ranked[5] == ranked[8] and ranked[5] == ranked.max()
    got = ops.head_rescored(q, scale, x, weight, 1e-6, float_rows, 3)[0]
    exact = (float_rows.double() @ h[0].double()).float()
    assert torch.allclose(got[5:8], exact[5:8], atol=1e-5) and not torch.allclose(got[5:8], ranked[5:8])
    assert torch.equal(got[8:], ranked[8:]) and torch.equal(got[:5], ranked[:5])  # the fourth tie kept its rank
    full = ops.head_rescored(q, scale, x, weight, 1e-6, float_rows, 64)[0]
    top = ranked.topk(64).indices
    expected = ranked.clone()
    expected[top] = exact[top]
    assert (full - expected).abs().max().item() <= 1e-6 * expected.abs().max().item() + 1e-5
