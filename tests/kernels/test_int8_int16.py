"""The int16 int8 path (inference/kernels/csrc/int16.h: int8 weights against activations quantised to int16 per
weight group, exact int32 sums by vpmaddwd) against a torch reference of the same math, in every kernel shape,
inside a decode step's parallel region, and through the model (TOKENSTEP_INT8_PATH=int16).

Every build of the kernels (AVX2 or AVX-512) has this path, so the tests run wherever the kernels build."""

import pytest
import torch
from tiny import close, fused_and_op_by_op, gain_and_row, make_hf_model, save_hf_model

from inference.model import kernel_shape, quant
from inference import kernels
from inference.model.kernel_shape import CANDIDATES
from inference.store.loading import load_model
from inference.model.quant import INT16, KERNEL_ROWS, KernelInt8Linear, dequantize, quantize_rows

ops = kernels.ops()
pytestmark = [pytest.mark.kernels,
              pytest.mark.usefixtures("shape_kept")]


def quantize_int16(h: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """h (K,) float32 -> xq (K,) in [-32767, 32767] and each group's scale (groups,): the kernel's math in
    float32 (32767 / amax of the group, a product, round half to even; an all-zero group: zeros, scale 0)."""
    grouped = h.view(-1, group)
    amax = grouped.abs().amax(dim=1)  # (groups,)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    xq = torch.round(grouped * (torch.tensor(32767.0) / safe)[:, None]).clamp(-32768, 32767)
    xq = torch.where(amax[:, None] > 0, xq, torch.zeros_like(xq))
    return xq.flatten(), torch.where(amax > 0, amax / 32767.0, torch.zeros_like(amax))


def reference(q, scale, x, alpha=1.0, rms_eps=-1.0, norm_weight=None) -> torch.Tensor:
    """alpha (* 1 / rms(x)) * sum over weight groups of (weight scale * activation scale) * exact integer sums."""
    K = x.shape[1]
    group = K // scale.shape[1]
    gain, h = gain_and_row(x, alpha, rms_eps, norm_weight)
    xq, xs = quantize_int16(h, group)
    sums = (q.long().view(q.shape[0], -1, group) * xq.long().view(1, -1, group)).sum(2)  # (out, groups), exact
    return gain * (sums.double() * scale.double() * xs.double()).sum(1)[None]  # (1, out)


def fits(group: int) -> bool:
    lanes, longest = ops.int16_groups()
    return group % lanes == 0 and group <= longest


@pytest.mark.parametrize("K, group", [(576, 64), (1536, 64), (64, 64), (96, 32), (48, 16), (4096, 4096)])
def test_activation_quantisation_matches_torch(K, group):
    g = torch.Generator().manual_seed(K + group)
    if not fits(group):  # this build's int16 lanes do not tile such groups: refused (their products: float path)
        with pytest.raises(RuntimeError, match="group"):
            ops.quantize_activations_int16(torch.randn(K, generator=g), group)
        return
    x = torch.randn(K, generator=g) * torch.linspace(0.01, 40.0, K)  # groups of very different ranges
    if K > group:
        x[:group] = 0.0  # an all-zero group
    xq, scales = ops.quantize_activations_int16(x, group)
    want_q, want_s = quantize_int16(x, group)
    assert xq.dtype == torch.int16 and torch.equal(xq.float(), want_q)
    assert torch.equal(scales, want_s)
    peaks = xq.view(-1, group).abs().amax(dim=1)
    assert all(p in (0, 32767) for p in peaks.tolist()) and peaks.max() == 32767  # each group's top of the range
    with pytest.raises(RuntimeError, match="group"):
        ops.quantize_activations_int16(torch.randn(100), 100)


@pytest.mark.parametrize("out_features, K, group", [(960, 576, 64), (576, 1536, 64), (33, 576, 64), (130, 64, 64),
                                                    (40, 96, 32), (17, 48, 16), (3, 256, 256)])
def test_int16_product_matches_the_exact_integer_math(out_features, K, group):
    """Odd row counts (threads' ranges, blocks of 64 rows), groups of one cache line, several, and shorter; groups
    this build's lanes do not tile take the float path."""
    g = torch.Generator().manual_seed(out_features * K)
    q, scale = quantize_rows(torch.randn(out_features, K, generator=g), group)
    assert scale.shape[1] == K // group
    x = torch.randn(1, K, generator=g) * 2
    bias, residual = torch.randn(out_features, generator=g), torch.randn(1, out_features, generator=g)
    got = ops.gemv_int8_int16(q, scale, x, 1.3, bias, residual)
    if not fits(group):
        assert torch.equal(got, ops.gemv_int8(q, scale, x, 1.3, bias, residual))
        return
    want = reference(q, scale, x, 1.3)
    assert got.shape == (1, out_features)
    assert close(got - bias - residual, want)
    # and it is the float path's product to about the activations' int16 step (1/65534 of each group's largest)
    exact = 1.3 * (x.double() @ dequantize(q, scale).double().t())
    assert (got.double() - bias - residual - exact).abs().max().item() < 1e-4 * exact.abs().max().item()
    assert not torch.equal(got, ops.gemv_int8(q, scale, x, 1.3, bias, residual))  # not the float path


def test_int16_product_with_rms_norm_and_glu():
    g = torch.Generator().manual_seed(7)
    K, F = 576, 96
    q, scale = quantize_rows(torch.randn(2 * F, K, generator=g))
    x = torch.randn(1, K, generator=g) * 3
    norm_weight = torch.rand(K, generator=g) + 0.5
    got = ops.gemv_int8_int16(q, scale, x, 1.0, None, None, 1e-5, False, norm_weight)
    want = reference(q, scale, x, 1.0, 1e-5, norm_weight)
    assert close(got, want)
    bias = torch.randn(2 * F, generator=g)
    glu = ops.gemv_int8_int16(q, scale, x, 1.0, bias, None, 1e-5, True, norm_weight)
    gate, up = (want[0] + bias.double()).chunk(2)
    assert glu.shape == (1, F)
    assert close(glu, (torch.nn.functional.silu(gate) * up)[None], 1e-4)


@pytest.mark.parametrize("rows", [2, 3, 8, 9, 16])
def test_a_few_rows_get_the_bits_of_each_row_alone(rows):
    """2 to 16 rows (a short prompt or a verify pass through torch: layers captured for the logit lens) on the int16
    path: each row of y is what the row gives alone (as a step and csrc/rows.h compute it), with the norm's gain and
    weight, a bias and a residual."""
    g = torch.Generator().manual_seed(rows)
    q, scale = quantize_rows(torch.randn(70, 192, generator=g))
    x, bias = torch.randn(rows, 192, generator=g), torch.randn(70, generator=g)
    residual, norm_weight = torch.randn(rows, 70, generator=g), torch.rand(192, generator=g) + 0.5
    together = ops.gemv_int8_int16(q, scale, x, 0.9, bias, residual, 1e-5, False, norm_weight)
    alone = torch.cat([ops.gemv_int8_int16(q, scale, x[t:t + 1], 0.9, bias, residual[t:t + 1], 1e-5, False, norm_weight)
                       for t in range(rows)])
    assert torch.equal(together, alone)
    assert close(together, ops.gemv_int8(q, scale, x, 0.9, bias, residual, 1e-5, False, norm_weight), 1e-3)


def test_what_the_path_does_not_fit_is_the_float_path_exactly():
    """More rows than a pass of a few (a long prefill) and groups that are not a multiple of the int16 lanes run on
    gemv_int8."""
    g = torch.Generator().manual_seed(3)
    q, scale = quantize_rows(torch.randn(70, 192, generator=g))
    x = torch.randn(17, 192, generator=g)
    assert torch.equal(ops.gemv_int8_int16(q, scale, x, 0.9, None, None), ops.gemv_int8(q, scale, x, 0.9, None, None))
    q, scale = quantize_rows(torch.randn(9, 70, generator=g))  # one group of 70 per row
    x = torch.randn(1, 70, generator=g)
    assert torch.equal(ops.gemv_int8_int16(q, scale, x, 1.0, None, None), ops.gemv_int8(q, scale, x, 1.0, None, None))


def test_zero_activations_give_the_bias():
    q, scale = quantize_rows(torch.randn(20, 128))
    bias = torch.randn(20)
    assert torch.equal(ops.gemv_int8_int16(q, scale, torch.zeros(1, 128), 1.0, bias, None), bias[None])


@pytest.mark.parametrize("out_features, in_features, group", [(576, 1536, 64), (130, 128, 64), (40, 96, 32),
                                                               (17, 48, 16)])
def test_every_int8_shape_gives_the_same_bits(out_features, in_features, group):
    g = torch.Generator().manual_seed(out_features)
    q, scale = quantize_rows(torch.randn(out_features, in_features, generator=g), group)
    x = torch.randn(1, in_features, generator=g)
    results = {}
    for shape in CANDIDATES:
        kernel_shape.apply(ops, "int8", shape)
        results[shape] = ops.gemv_int8_int16(q, scale, x, 1.0, None, None)
    first = results[CANDIDATES[0]]
    assert all(torch.equal(first, r) for r in results.values())


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_step_region_gives_each_product_its_own_bits(threads):
    """products_region (the decode step's scheduling: one parallel region, each thread quantising its own copy of
    x, int8 rows in equal shares) gives each product the bits of its own gemv_int8_int16 call."""
    g = torch.Generator().manual_seed(threads)
    shapes = [(1536, 576), (576, 1536), (130, 64), (7, 64), (200, 576), (9, 70)]
    mats = [(*quantize_rows(torch.randn(n, k, generator=g)), torch.randn(1, k, generator=g)) for n, k in shapes]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        region = ops.products_region([q for q, _, _ in mats], [s for _, s, _ in mats], [x for _, _, x in mats], INT16)
        alone = [ops.gemv_int8_int16(q, s, x, 1.0, None, None) for q, s, x in mats]
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(region, alone, strict=True))


def test_the_path_is_chosen_by_name_on_every_cpu(monkeypatch):
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "int16")
    assert quant.int8_path(ops) == "int16" and quant.path_code("int16") == INT16

    class NoIntegerCode:  # an AVX-512 CPU without VNNI: the int16 path is there all the same
        @staticmethod
        def integer_code():
            return ""

    assert quant.int8_path(NoIntegerCode) == "int16"


def _int8_decoder(tmp_path, monkeypatch, path: str, arch: str = "llama"):
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", path)
    monkeypatch.setenv("TOKENSTEP_INT8_HEAD", "int8")  # the head on the path too (by default it ranks in 4 bits)
    folder = save_hf_model(make_hf_model(arch, seed=3), tmp_path / f"{arch}-{path}")
    return load_model(folder, device="cpu", dtype="int8").decoder


def test_decode_runs_on_the_int16_path(tmp_path, monkeypatch):
    """Every linear and the head take the path; decode steps' logits are the float path's to 1e-3 of their
    range (and not the same bits: the path really ran); a prefill longer than KERNEL_ROWS (dequantised for
    BLAS) is the float path's exactly."""
    steps = {}
    for path in ("float", "int16"):
        decoder = _int8_decoder(tmp_path, monkeypatch, path)
        linears = [lin for layer in decoder.weights.layers for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)]
        assert all(isinstance(lin, KernelInt8Linear) and lin.path == quant.path_code(path) for lin in linears)
        assert decoder.weights.lm_head.linear.path == quant.path_code(path)
        ids = torch.arange(3, 3 + KERNEL_ROWS + 4)
        with torch.inference_mode():
            cache = decoder.new_cache(len(ids) + 3)
            prefill = decoder.forward(ids, 0, cache, all_logits=True)
            steps[path] = (prefill, torch.cat([decoder.forward(torch.tensor([t]), len(ids) + i, cache)
                                               for i, t in enumerate((4, 9, 17))]))
    assert torch.equal(steps["float"][0], steps["int16"][0])
    float_steps, int16_steps = steps["float"][1], steps["int16"][1]
    assert not torch.equal(float_steps, int16_steps)
    assert (float_steps - int16_steps).abs().max().item() < 1e-3 * float_steps.abs().max().item()


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen3"])
def test_fused_decode_takes_the_int16_path_of_the_products(tmp_path, monkeypatch, arch):
    """Every layer in one decode_layers call gives the logits of the same layers run op by op, their products on
    gemv_int8_int16, step after step (mistral's past its sliding window). Not to 1e-5 as the float path: the
    norms and attention round differently op by op, and a last-bit change in x moves some of its int16
    roundings, each by 1/65534 of its group's largest; 1e-3 of the logits' range."""
    decoder = _int8_decoder(tmp_path, monkeypatch, "int16", arch)
    fused, op_by_op = fused_and_op_by_op(decoder, torch.tensor([5, 77, 200, 31, 9, 140, 3, 66, 250, 18]))
    assert (fused - op_by_op).abs().max().item() <= 1e-3 * fused.abs().max().item()


def test_the_int16_path_is_timed_on_its_own_products_and_cached_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "int16")
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="int8")
    mats = kernel_shape.products(model.decoder.weights, "int8")
    assert mats and all(path == INT16 for *_, path in mats)
    assert kernel_shape.cache_key("int8", mats) == "int8-int16"
    for (w, scale, x, _), got in zip(mats, kernel_shape.run_products(ops, mats), strict=True):
        assert torch.equal(got, ops.gemv_int8_int16(w, scale, x, 1.0, None, None))
    monkeypatch.setattr(kernel_shape, "MIN_TUNE_BYTES", 0)
    monkeypatch.setattr(kernel_shape, "measure", lambda _ops, m, kind, **kw:
                        {shape: [1.0 + 0.01 * i] * 3 for i, shape in enumerate(reversed(CANDIDATES))})
    assert kernel_shape.ensure(model.decoder) == CANDIDATES[-1]
    assert kernel_shape.read_cached(kernel_shape.cache_file()) == {"int8-int16": CANDIDATES[-1]}


def test_switching_the_path_in_place_reaches_the_fused_step(tmp_path, monkeypatch):
    """A benchmark switches a loaded model's linears between paths (bench_int8_path.set_path): the fused step,
    whose arguments are gathered once, must take the new path, as a model loaded on it does."""
    def step(decoder) -> torch.Tensor:
        cache = decoder.new_cache(8)
        with torch.inference_mode():
            decoder.forward(torch.arange(3, 7), 0, cache)
            return decoder.forward(torch.tensor([9]), 4, cache)

    decoder = _int8_decoder(tmp_path, monkeypatch, "float")
    before = step(decoder)
    for lin in [*(lin for layer in decoder.weights.layers for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)),
                decoder.weights.lm_head.linear]:
        lin.path = INT16
    switched = step(decoder)
    assert not torch.equal(before, switched)
    assert torch.equal(switched, step(_int8_decoder(tmp_path, monkeypatch, "int16")))


def _timed_paths(faster: str, calls: list, slower: float = 1.1):
    """A kernel_shape.measure stand-in: every candidate shape timed, the other path `slower` times the path
    `faster`."""
    def measure(_ops, mats, kind, shapes=CANDIDATES, **_):
        on = "int16" if mats and mats[0][3] == INT16 else "float"
        calls.append(on)
        base = 1.0 if on == faster else slower
        return {shape: [base + 0.01 * i] * 3 for i, shape in enumerate(shapes)}
    return measure


@pytest.mark.parametrize("faster, slower, chosen", [("int16", 1.1, "int16"), ("float", 1.1, "float"),
                                                   ("float", 1.05, "int16")])
def test_an_int8_model_takes_the_path_measured_faster_and_caches_it(tmp_path, monkeypatch, faster, slower, chosen):
    """Without TOKENSTEP_INT8_PATH, float and int16 activations (the same quality) are each timed in their own
    shapes at first use; the faster is put in force on every int8 product and cached with both shapes, and the
    next load reads it back without measuring. The float path must be more than PATH_HANDICAP faster (passes of
    several rows cost far less on int16)."""
    monkeypatch.delenv("TOKENSTEP_INT8_PATH", raising=False)
    monkeypatch.setenv("TOKENSTEP_INT8_HEAD", "int8")  # the head's product takes the path too
    monkeypatch.setattr(kernel_shape, "MIN_TUNE_BYTES", 0)
    calls = []
    monkeypatch.setattr(kernel_shape, "measure", _timed_paths(faster, calls, slower))
    folder = save_hf_model(make_hf_model("llama", seed=3), tmp_path / "tiny")
    for load in range(2):
        weights = load_model(folder, device="cpu", dtype="int8").decoder.weights
        linears = [lin for layer in weights.layers for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)]
        assert {lin.path for lin in [*linears, weights.lm_head.linear]} == {quant.path_code(chosen)}
        assert calls == ["float", "int16"]  # measured once, at the first load
    assert kernel_shape.read_cached_path(kernel_shape.cache_file()) == chosen
    cached = kernel_shape.read_cached(kernel_shape.cache_file())
    assert cached == {"int8": CANDIDATES[0], "int8-int16": CANDIDATES[0]}


def test_a_path_named_in_the_environment_is_not_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "float")
    monkeypatch.setattr(kernel_shape, "MIN_TUNE_BYTES", 0)
    calls = []
    monkeypatch.setattr(kernel_shape, "measure", _timed_paths("int16", calls))
    decoder = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="int8").decoder
    assert decoder.weights.layers[0].qkv.path == 0 and calls == ["float"]  # only the float path's shapes
    assert kernel_shape.read_cached_path(kernel_shape.cache_file()) is None
