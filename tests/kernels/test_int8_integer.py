"""The integer int8 path (inference/kernels/csrc/int8_integer.h: activations quantised to int8, int32 products on
AVX-512 VNNI or AVX2) against a torch reference of the same quantisation math, and how the path is chosen
(quant.int8_path).

The kernel tests run on whichever integer code this CPU has (ops.integer_code(): "vnni" or "avx2") and are
skipped where the kernels cannot be built or there is none (an AVX-512 CPU without VNNI); the path choice is
tested everywhere the kernels build."""

import pytest
import torch
from tiny import close, fused_and_op_by_op, gain_and_row, make_hf_model, save_hf_model

from inference import kernels
from inference.model import quant
from inference.store.loading import load_model
from inference.model.quant import INT8_PATHS, KERNEL_ROWS, KernelInt8Linear, dequantize, quantize_rows

ops = kernels.ops()
pytestmark = pytest.mark.kernels
integer = pytest.mark.skipif(ops is not None and not ops.integer_code(),
                             reason="no integer int8 code on this CPU (AVX-512 without VNNI)")


def quantize_activations(h: torch.Tensor, group: int, act_group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """h (K,) float32 -> xq (K,) int values in [-127, 127] and each activation's scale (K,): the math
    csrc/int8_integer.h does, in float32 (127 / amax per run of `act_group` activations within a weight group,
    or per row when act_group <= 0; a product; round half to even)."""
    K = h.shape[0]
    A = K if act_group <= 0 else min(act_group, group)
    amax = torch.empty(K)
    for g0 in range(0, K, group):
        for k0 in range(g0, g0 + group, A):
            end = min(k0 + A, g0 + group) if A < K else K
            amax[k0:end] = h[k0:end].abs().max() if A < K else h.abs().max()
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    xq = torch.round(h * (torch.tensor(127.0) / safe)).clamp(-127, 127)
    return torch.where(amax > 0, xq, torch.zeros_like(xq)), torch.where(amax > 0, amax / 127.0, torch.zeros_like(amax))


def reference(q, scale, x, alpha=1.0, rms_eps=-1.0, norm_weight=None, act_group=4) -> torch.Tensor:
    """alpha (* 1 / rms(x)) * sum over activations' runs of (weight scale * activation scale) * exact
    integer sums (each run within one weight group)."""
    K = x.shape[1]
    group = K // scale.shape[1]
    gain, h = gain_and_row(x, alpha, rms_eps, norm_weight)
    xq, xs = quantize_activations(h, group, act_group)
    runs = torch.unique_consecutive(torch.stack([torch.arange(K) // group, xs.view(torch.int32)]), dim=1,
                                    return_counts=True)[1].tolist()  # lengths of runs of one scale
    out = torch.zeros(q.shape[0], dtype=torch.float64)
    for start, n in zip([0, *torch.tensor(runs).cumsum(0).tolist()], runs):
        sums = (q[:, start:start + n].long() * xq[start:start + n].long()).sum(1)  # exact
        out += sums.double() * scale[:, start // group].double() * xs[start].double()
    return gain * out[None]  # (1, out)


ACT_GROUPS = [4, 8, 16, 32, 64, -1]  # 4 (the default), 8, 16 (vectorised), 32, a weight group, the row


@integer
@pytest.mark.parametrize("K, group", [(576, 64), (1536, 64), (64, 64), (100, 100), (96, 32), (48, 16), (200, 200),
                                      (130, 130)])
@pytest.mark.parametrize("act_group", ACT_GROUPS)
def test_activation_quantisation_matches_torch(K, group, act_group):
    g = torch.Generator().manual_seed(K + group)
    x = torch.randn(K, generator=g) * torch.linspace(0.1, 4.0, K)  # groups of different ranges
    xq, lane_scales = ops.quantize_activations(x, group, act_group)
    want_q, want_s = quantize_activations(x, group, act_group)
    assert torch.equal(xq[:, :group].flatten().float(), want_q)
    assert not xq[:, group:].any()  # the padding of a group to whole 64-byte chunks is zero
    per_lane = want_s.view(-1, group)[:, ::4]  # each lane's four activations share one scale
    assert torch.equal(lane_scales[:, :per_lane.shape[1]], per_lane)


@integer
@pytest.mark.parametrize("out_features, K, group", [(960, 576, 64), (576, 1536, 64), (33, 576, 64), (7, 100, 100),
                                                    (40, 96, 32), (17, 48, 16), (5, 200, 200), (130, 64, 64)])
@pytest.mark.parametrize("act_group", ACT_GROUPS)
def test_integer_product_matches_the_exact_integer_math(out_features, K, group, act_group):
    """Odd row counts (threads' ranges, blocks of 64 rows), groups of one 64-byte chunk, several chunks with
    a masked last one, groups shorter than a chunk."""
    g = torch.Generator().manual_seed(out_features * K)
    q, scale = quantize_rows(torch.randn(out_features, K, generator=g), group)
    assert scale.shape[1] == K // group
    x = torch.randn(1, K, generator=g) * 2
    bias, residual = torch.randn(out_features, generator=g), torch.randn(1, out_features, generator=g)
    got = ops.gemv_int8_integer(q, scale, x, 1.3, bias, residual, -1.0, False, None, act_group)
    want = reference(q, scale, x, 1.3, act_group=act_group)
    assert got.shape == (1, out_features)
    assert close(got - bias - residual, want)
    assert close(got, want + bias.double() + residual.double())
    # and it is a product of the dequantised matrix within the activations' int8 step
    exact = 1.3 * (x.double() @ dequantize(q, scale).double().t())
    assert (got.double() - bias - residual - exact).abs().max().item() < 0.05 * exact.abs().max().item()


@integer
@pytest.mark.parametrize("act_group", ACT_GROUPS)
def test_integer_product_with_rms_norm_and_glu(act_group):
    g = torch.Generator().manual_seed(7)
    K, F = 576, 96
    q, scale = quantize_rows(torch.randn(2 * F, K, generator=g))
    x = torch.randn(1, K, generator=g) * 3
    norm_weight = torch.rand(K, generator=g) + 0.5
    got = ops.gemv_int8_integer(q, scale, x, 1.0, None, None, 1e-5, False, norm_weight, act_group)
    want = reference(q, scale, x, 1.0, 1e-5, norm_weight, act_group)
    assert close(got, want)
    bias = torch.randn(2 * F, generator=g)
    glu = ops.gemv_int8_integer(q, scale, x, 1.0, bias, None, 1e-5, True, norm_weight, act_group)
    gate, up = (want[0] + bias.double()).chunk(2)
    assert glu.shape == (1, F)
    assert close(glu, (torch.nn.functional.silu(gate) * up)[None], 1e-4)


@integer
@pytest.mark.parametrize("rows", [2, 5, 16])
def test_several_rows_are_each_the_product_of_that_row_alone(rows):
    """A short prefill: every row of x its own activation scales and rms, the numbers of that row alone (up
    to how the compiler fuses alpha * product + bias + residual in each loop: 1e-6)."""
    g = torch.Generator().manual_seed(rows)
    q, scale = quantize_rows(torch.randn(70, 192, generator=g))
    x = torch.randn(rows, 192, generator=g) * torch.arange(1, rows + 1)[:, None]  # rows of different ranges
    bias, residual = torch.randn(70, generator=g), torch.randn(rows, 70, generator=g)
    norm_weight = torch.rand(192, generator=g) + 0.5
    together = ops.gemv_int8_integer(q, scale, x, 0.9, bias, residual, 1e-5, False, norm_weight)
    alone = torch.cat([ops.gemv_int8_integer(q, scale, x[t:t + 1], 0.9, bias, residual[t:t + 1], 1e-5, False,
                                             norm_weight) for t in range(rows)])
    assert close(together, alone.double(), 1e-6)
    want = torch.cat([reference(q, scale, x[t:t + 1], 0.9, 1e-5, norm_weight) for t in range(rows)])
    assert close(together - bias - residual, want)


@integer
def test_a_lane_never_straddles_two_activation_scales():
    """vpdpbusd (and vpmaddubsw + vpmaddwd) sum four products per lane, so the activations per scale are a multiple of 4 (or the
    whole weight group, or the row)."""
    q, scale = quantize_rows(torch.randn(8, 64))
    with pytest.raises(RuntimeError, match="multiple of 4"):
        ops.gemv_int8_integer(q, scale, torch.randn(1, 64), 1.0, None, None, -1.0, False, None, 6)
    assert ops.gemv_int8_integer(q, scale, torch.randn(1, 64), 1.0, None, None, -1.0, False, None, 100).shape == (1, 8)


@integer
def test_zero_activations_give_the_bias():
    q, scale = quantize_rows(torch.randn(20, 128))
    bias = torch.randn(20)
    assert torch.equal(ops.gemv_int8_integer(q, scale, torch.zeros(1, 128), 1.0, bias, None), bias[None])


def test_the_path_follows_the_env_knob_and_the_cpu(monkeypatch):
    monkeypatch.delenv("TOKENSTEP_INT8_PATH", raising=False)
    assert quant.int8_path(ops) == "float"  # the default: the integer path is asked for
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "float")
    assert quant.int8_path(ops) == "float"
    for name, code in (("integer-row", -1), ("integer-32", 32), ("integer", quant.INT8_ACT_GROUP)):
        monkeypatch.setenv("TOKENSTEP_INT8_PATH", name)
        assert quant.int8_path(ops) == (name if ops.integer_code() else "float")
        assert quant.path_code(name) == code
    assert quant.path_code("float") == 0
    for wrong in ("fast", "integer-6", "integer-0"):
        monkeypatch.setenv("TOKENSTEP_INT8_PATH", wrong)
        with pytest.raises(ValueError, match="TOKENSTEP_INT8_PATH"):
            quant.int8_path(ops)

    class NoIntegerCode:  # an AVX-512 CPU without VNNI: only the float path exists there
        @staticmethod
        def integer_code():
            return ""

    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "integer")
    assert quant.int8_path(NoIntegerCode) == "float"


def _int8_decoder(tmp_path, monkeypatch, path: str):
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", path)
    monkeypatch.setenv("TOKENSTEP_INT8_HEAD", "int8")  # the head on the path too (by default it ranks in 4 bits)
    folder = save_hf_model(make_hf_model("llama", seed=3), tmp_path / path)
    return load_model(folder, device="cpu", dtype="int8").decoder


@integer
def test_decode_runs_on_the_path_chosen(tmp_path, monkeypatch):
    """The fused decode layer and the head take the integer path when chosen; their logits stay within the
    activations' int8 step of the float path's, and a prefill longer than KERNEL_ROWS (every row's logits,
    dequantised for BLAS on either path) is the float path's exactly."""
    steps = {}
    for path in ("float", "integer"):
        decoder = _int8_decoder(tmp_path, monkeypatch, path)
        linears = [lin for layer in decoder.weights.layers for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)]
        assert all(isinstance(lin, KernelInt8Linear) and lin.path == INT8_PATHS[path] for lin in linears)
        assert decoder.weights.lm_head.linear.path == INT8_PATHS[path] == quant.path_code(path)
        ids = torch.arange(3, 3 + KERNEL_ROWS + 4)
        with torch.inference_mode():
            cache = decoder.new_cache(len(ids) + 1)
            prefill = decoder.forward(ids, 0, cache, all_logits=True)
            steps[path] = (prefill, decoder.forward(torch.tensor([4]), len(ids), cache))
    assert torch.equal(steps["float"][0], steps["integer"][0])
    float_step, integer_step = steps["float"][1], steps["integer"][1]
    assert not torch.equal(float_step, integer_step)  # the integer path really ran
    assert (float_step - integer_step).abs().max().item() < 0.05 * float_step.abs().max().item()


@integer
@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen3"])
def test_fused_decode_layer_takes_the_integer_path_of_the_products(tmp_path, monkeypatch, arch):
    """Each layer as one decode_layer call gives the logits of the same layer run product by product on
    gemv_int8_integer (the same integer products; 1e-5, float rounding order of the norms and attention),
    step after step (mistral's past its sliding window). The head is int8 too: the default 4-bit head rescores
    its best 256 in float, and a last-bit change in the final norm can trade the 256th for the 257th (the
    emulated AVX-512 build did that for qwen3: one logit 1e-2 off)."""
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "integer")
    monkeypatch.setenv("TOKENSTEP_INT8_HEAD", "int8")
    decoder = load_model(save_hf_model(make_hf_model(arch, seed=1), tmp_path), device="cpu", dtype="int8").decoder
    fused, op_by_op = fused_and_op_by_op(decoder, torch.tensor([5, 77, 200, 31, 9, 140, 3, 66, 250, 18]))
    assert (fused - op_by_op).abs().max().item() <= 1e-5
