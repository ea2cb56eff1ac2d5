"""The float32 small-M products (csrc/f32.h gemv_f32_many, issue 38): a pass over 2 to 16 rows of x reads each weight
row once for all of them. Every M, shapes with and without tails of 16 / 64 floats; test_kernels_emulated runs this
file again on the other instruction set's build."""

import pytest
import torch
from tiny import build_decoder, make_hf_model, save_hf_model

from inference import kernels
from inference.model import layers
from inference.model.layers import KernelLinear

ops = kernels.ops()
pytestmark = pytest.mark.kernels
SIZES = list(range(1, 17))


def _rms_scaled(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x.double() / (x.double().pow(2).mean(-1, keepdim=True) + eps).sqrt()


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    return (got.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5


# in_features 1536: on a 48 KB L1 a group of weight rows goes over 4 rows of x at a time, at 576 over 8 (sweep_rows)
@pytest.mark.parametrize("out_features, in_features", [(960, 576), (130, 100), (33, 16), (7, 37), (41, 1536)])
@pytest.mark.parametrize("rows", SIZES)
def test_products_of_m_rows_match_float64(out_features, in_features, rows):
    g = torch.Generator().manual_seed(out_features * 17 + rows)
    w = torch.randn(out_features, in_features, generator=g)
    x = torch.randn(rows, in_features, generator=g) * torch.arange(1, rows + 1)[:, None]  # rows of different rms
    bias, residual = torch.randn(out_features, generator=g), torch.randn(rows, out_features, generator=g)
    expected = 0.7 * (x.double() @ w.double().t()) + bias.double() + residual.double()
    got = ops.gemv_f32(w, x, 0.7, bias, residual)
    assert got.shape == (rows, out_features) and got.dtype == torch.float32
    assert _close(got, expected)
    norm_weight = torch.rand(in_features, generator=g) + 0.5
    expected = (_rms_scaled(x, 1e-6) * norm_weight.double()) @ w.double().t()
    assert _close(ops.gemv_f32(w, x, 1.0, None, None, 1e-6, False, norm_weight), expected)


@pytest.fixture(params=[1, 4, -2])
def f32_rows(request):
    """The one-row products' rows per pass in force (the streamed small-M rows follow it: one or two weight rows at a
    time), put back after the test."""
    before = ops.get_shape()
    ops.set_shape(request.param, before[1], before[2], before[3])
    yield request.param
    ops.set_shape(*before)


@pytest.mark.parametrize("out_features, in_features", [(1536, 576), (130, 100), (7, 37), (6, 16), (41, 1536)])
def test_each_row_of_a_pass_has_the_bits_it_has_alone(out_features, in_features, f32_rows):
    """A verify pass's row gets exactly the products of a one-position step: the same sums in the same order, in every
    shape of the one-row products (which the streamed rows of a pass follow)."""
    g = torch.Generator().manual_seed(in_features)
    w = torch.randn(out_features, in_features, generator=g)
    x = torch.randn(16, in_features, generator=g)
    bias, residual = torch.randn(out_features, generator=g), torch.randn(16, out_features, generator=g)
    alone = torch.cat([ops.gemv_f32(w, x[t:t + 1], 0.9, bias, residual[t:t + 1], 1e-5) for t in range(16)])
    for rows in SIZES[1:]:
        together = ops.gemv_f32(w, x[:rows].contiguous(), 0.9, bias, residual[:rows].contiguous(), 1e-5)
        assert torch.equal(together, alone[:rows]), rows


def test_more_rows_than_a_small_m_pass_takes_or_a_gated_pass_are_refused():
    w = torch.randn(8, 32)
    with pytest.raises(RuntimeError, match="16 rows"):
        ops.gemv_f32(w, torch.randn(17, 32), 1.0, None, None)
    with pytest.raises(RuntimeError, match="glu"):
        ops.gemv_f32(w, torch.randn(2, 32), 1.0, None, None, -1.0, True)


@pytest.mark.parametrize("rows", [2, 5, 16, 17])
def test_kernel_linear_takes_m_rows_on_the_kernels_and_more_on_blas(rows, monkeypatch):
    backend = layers.select_backend("cpu", torch.float32)
    g = torch.Generator().manual_seed(rows)
    w, bias = torch.randn(96, 64, generator=g), torch.randn(96, generator=g)
    linear = backend.linear(w, bias)
    assert isinstance(linear, KernelLinear)
    x, residual = torch.randn(rows, 64, generator=g), torch.randn(rows, 96, generator=g)
    calls = []
    monkeypatch.setattr(linear, "_gemv", lambda *args: calls.append(args) or KernelLinear._gemv(linear, *args))
    expected = x.double() @ w.double().t() + bias.double()
    assert _close(linear(x), expected)
    assert _close(linear.add_to(residual, x), expected + residual.double())
    assert len(calls) == (2 if rows <= KernelLinear.most_rows else 0)


@pytest.mark.parametrize("positions", [2, 5, 9])
def test_a_pass_of_m_positions_on_the_kernels_matches_blas(tmp_path, positions, monkeypatch):
    """A tiny model's verify pass, its products on the small-M kernels against BLAS (most_rows 1)."""
    folder = save_hf_model(make_hf_model("llama"), tmp_path)
    decoder = build_decoder(folder, layers.select_backend("cpu", torch.float32))
    assert decoder.backend.kernels is not None

    def verify_pass(most_rows: int) -> torch.Tensor:
        monkeypatch.setattr(KernelLinear, "most_rows", most_rows)
        cache = decoder.new_cache(64)
        decoder.forward(torch.arange(3, 14), 0, cache)
        return decoder.forward(torch.arange(20, 20 + positions), 11, cache, all_logits=True)

    with torch.inference_mode():
        small_m, blas = verify_pass(16), verify_pass(1)
    assert small_m.shape == (positions, blas.shape[1])
    assert (small_m - blas).abs().max().item() <= 1e-5 * blas.abs().max().item() + 1e-5
