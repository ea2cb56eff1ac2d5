"""The decode kernels (inference/kernels.cpp) against stock PyTorch; skipped where they cannot be built."""

import pytest
import torch
from tiny import make_hf_model, save_hf_model

from inference import kernels
from inference.loading import load_model
from inference.model import dequantize
from inference.weights import INT8_GROUP, quantize_rows

ops = kernels.ops()
pytestmark = pytest.mark.skipif(ops is None, reason="decode kernels unavailable here (see stderr)")


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


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_decoder_with_kernels_equals_stock_ops(tmp_path, dtype):
    """Same decode logits with the kernels as with bmm row blocks / the stock int8 kernel.

    float32: the same products summed in another order (1e-5, as cached decode against recompute).
    int8: the same dequantised products, float32 throughout, so the same 1e-5.
    """
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path), device="cpu", dtype=dtype)
    ids = torch.tensor([5, 77, 200, 31, 9])

    def decode():
        cache = model.decoder.new_cache(8)
        with torch.inference_mode():
            model.decoder.forward(ids[:-1], 0, cache)
            return model.decoder.forward(ids[-1:], len(ids) - 1, cache)

    linears = model.decoder.weights.linears()
    assert all(lin.kernels is not None for lin in linears)
    with_kernels = decode()
    for lin in linears:
        lin.kernels = None
        lin.split_rows(torch.get_num_threads())
    stock = decode()
    assert (with_kernels - stock).abs().max().item() <= 1e-5
