"""The decode kernels (inference/kernels.cpp) against stock PyTorch; skipped where they cannot be built."""

import pytest
import torch

from inference import kernels
from inference.loading import load_model
from inference.weights import quantize_rows
from tiny import make_hf_model, save_hf_model

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


@pytest.mark.parametrize("out_features, in_features", [(576, 1536), (9, 70)])
def test_gemv_int8_matches_the_dequantised_matmul(out_features, in_features):
    g = torch.Generator().manual_seed(in_features)
    q, scale = quantize_rows(torch.randn(out_features, in_features, generator=g))
    x = torch.randn(1, in_features, generator=g)
    residual = torch.randn(1, out_features, generator=g)
    dequantised = q.double() * scale.double()[:, None]
    expected = 1.3 * (x.double() @ dequantised.t()) + residual.double()
    got = ops.gemv_int8(q, scale, x, 1.3, None, residual)
    assert (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_decoder_with_kernels_equals_stock_ops(tmp_path, dtype):
    """Same decode logits with the kernels as with bmm row blocks / the stock int8 kernel.

    float32: the same products summed in another order (1e-5, as cached decode against recompute).
    int8: the stock kernel takes bf16 activations, so only int8's own tolerance applies (2 %).
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
    if dtype == "float32":
        assert (with_kernels - stock).abs().max().item() <= 1e-5
    else:
        assert float((with_kernels - stock).norm() / stock.norm()) <= 0.02
