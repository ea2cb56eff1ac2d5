"""The decode kernels' shape (rows per pass, prefetch distance): every shape gives the same products, the
choice is measured once and cached per machine, TOKENSTEP_KERNEL_SHAPE forces one. Skipped where the
kernels cannot be built."""

import json

import pytest
import torch
from tiny import make_hf_model, save_hf_model

from inference.model import kernel_shape
from inference import kernels, progress
from inference.errors import one_line
from inference.model.kernel_shape import CANDIDATES, ENV, KernelShapeError, Shape
from inference.store.loading import load_model
from inference.model.quant import dequantize, quantize_rows

ops = kernels.ops()
pytestmark = [pytest.mark.kernels,
              pytest.mark.usefixtures("shape_kept")]


def _in_each_shape(kind, product):
    out = {}
    for shape in CANDIDATES:
        kernel_shape.apply(ops, kind, shape)
        assert kernel_shape.in_force(ops)[kind] == shape
        out[shape] = product()
    return out


@pytest.mark.parametrize("out_features, in_features", [(1536, 576), (130, 100), (7, 37), (67, 16), (37, 20)])
def test_every_f32_shape_gives_the_same_bits(out_features, in_features):
    """Plain, with bias + residual, with the folded RMSNorm, gated, an odd row count: bit-identical in every
    shape (rows far apart too, whose last block of rows is not a multiple of theirs), and within 1e-5 of the
    float64 product."""
    g = torch.Generator().manual_seed(in_features)
    w = torch.randn(2 * out_features, in_features, generator=g)
    x = torch.randn(1, in_features, generator=g)
    bias, residual = torch.randn(2 * out_features, generator=g), torch.randn(1, 2 * out_features, generator=g)
    results = _in_each_shape("f32", lambda: (ops.gemv_f32(w, x, 0.7, bias, residual),
                                             ops.gemv_f32(w, x, 1.0, None, None, 1e-5),
                                             ops.gemv_f32(w, x, 1.0, bias, None, 1e-5, True),
                                             ops.gemv_f32(w[:-1], x, 1.0, None, None)))
    assert any(shape.spread for shape in results)
    first = results[CANDIDATES[0]]
    assert all(all(torch.equal(a, b) for a, b in zip(first, r)) for r in results.values())
    expected = 0.7 * (x.double() @ w.double().t()) + bias.double() + residual.double()
    assert (first[0].double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5


@pytest.mark.parametrize("out_features, in_features, group", [(576, 1536, 64), (130, 128, 64), (9, 70, 70),
                                                               (40, 96, 32), (17, 48, 48)])
def test_every_int8_shape_gives_the_same_bits(out_features, in_features, group):
    """Group sizes that are and are not a multiple of the kernels' step; row counts not a multiple of 4."""
    g = torch.Generator().manual_seed(out_features)
    q, scale = quantize_rows(torch.randn(out_features, in_features, generator=g), group)
    x = torch.randn(1, in_features, generator=g)
    residual = torch.randn(1, out_features, generator=g)
    results = _in_each_shape("int8", lambda: ops.gemv_int8(q, scale, x, 1.3, None, residual))
    first = results[CANDIDATES[0]]
    assert all(torch.equal(first, r) for r in results.values())
    expected = 1.3 * (x.double() @ dequantize(q, scale).double().t()) + residual.double()
    assert (first.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item() + 1e-5
    if ops.integer_code():  # the integer path (AVX2: read in the same shapes; VNNI: one shape) the same way
        integer = _in_each_shape("int8", lambda: ops.gemv_int8_integer(q, scale, x, 1.3, None, residual, -1.0, False,
                                                                       None, 4))
        first = integer[CANDIDATES[0]]
        assert all(torch.equal(first, r) for r in integer.values())
        assert (first.double() - expected).abs().max().item() <= 0.05 * expected.abs().max().item()


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_fused_decode_gives_the_same_logits_in_every_shape(tmp_path, dtype):
    """decode_layer reads its matrices in the shape in force: the same logits, step after step."""
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype=dtype)
    assert model.decoder.fused_decode
    kind = kernel_shape.kind_of(model.decoder.backend)
    ids = torch.tensor([5, 77, 200, 31, 9, 140, 3])

    def decode():
        cache = model.decoder.new_cache(len(ids))
        with torch.inference_mode():
            model.decoder.forward(ids[:3], 0, cache)
            return torch.cat([model.decoder.forward(ids[i:i + 1], i, cache) for i in range(3, len(ids))])

    results = _in_each_shape(kind, decode)
    first = results[CANDIDATES[0]]
    assert all(torch.equal(first, r) for r in results.values())
    kernel_shape.apply(ops, kind, Shape(2, 4096))
    assert model.info().decode_path == "fused kernels, 2 rows/pass, prefetch 4 KB"
    kernel_shape.apply(ops, kind, Shape(4, 0, True))
    assert model.info().decode_path == "fused kernels, 4 rows/pass far apart, no prefetch"


@pytest.mark.skipif(ops is not None and not ops.integer_code(),
                    reason="no integer int8 code on this CPU (AVX-512 without VNNI)")
def test_the_integer_path_is_timed_on_its_own_products_and_cached_apart(tmp_path, monkeypatch):
    """An int8 model on the integer path (AVX2's; VNNI's has no shape to choose) has its shape measured on the integer products (not the float
    path's) and cached under its own key, so switching paths never reuses the other path's choice."""
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "integer")
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="int8")
    mats = kernel_shape.products(model.decoder.weights, "int8")
    assert mats and all(path == 4 for *_, path in mats)
    assert kernel_shape.cache_key("int8", mats) == "int8-integer"
    timed_products = kernel_shape.run_products(ops, mats)  # the integer products, not the float path's
    for (w, scale, x, path), got in zip(mats, timed_products, strict=True):
        assert torch.equal(got, ops.gemv_int8_integer(w, scale, x, 1.0, None, None, -1.0, False, None, path))
    monkeypatch.setattr(kernel_shape, "MIN_TUNE_BYTES", 0)
    timed = []
    monkeypatch.setattr(kernel_shape, "measure", lambda _ops, m, kind, **kw: timed.append(m) or
                        {shape: [1.0 + 0.01 * i] * 3 for i, shape in enumerate(CANDIDATES)})
    if ops.integer_code() == "vnni":  # VNNI's integer products have no shape to choose: nothing timed or cached
        assert kernel_shape.ensure(model.decoder) == kernel_shape.in_force(ops)["int8"]
        assert not timed and kernel_shape.read_cached(kernel_shape.cache_file()) == {}
        return
    assert kernel_shape.ensure(model.decoder) == CANDIDATES[0]
    assert timed and all(path == 4 for *_, path in timed[0])
    cached = kernel_shape.read_cached(kernel_shape.cache_file())
    assert cached == {"int8-integer": CANDIDATES[0]}


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_timed_products_are_the_products_of_each_call_alone(threads):
    """run_products times the products as a decode step runs them (one parallel region, float32 rows claimed a
    block at a time, a barrier after each); each is the bits of its own gemv call, in every shape."""
    g = torch.Generator().manual_seed(threads)
    shapes = [(1536, 576), (576, 1536), (130, 100), (7, 64), (200, 576)]
    f32 = [(torch.randn(n, k, generator=g), None, torch.randn(1, k, generator=g), 0) for n, k in shapes]
    int8 = [(*quantize_rows(w), x, 0) for w, _, x, _ in f32]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for shape in (CANDIDATES[0], Shape(4, 2048), Shape(2, 0, True)):
            kernel_shape.apply(ops, "f32", shape)
            kernel_shape.apply(ops, "int8", shape)
            for got, (w, _, x, _) in zip(kernel_shape.run_products(ops, f32), f32, strict=True):
                assert torch.equal(got, ops.gemv_f32(w, x, 1.0, None, None))
            for got, (q, scale, x, _) in zip(kernel_shape.run_products(ops, int8), int8, strict=True):
                assert torch.equal(got, ops.gemv_int8(q, scale, x, 1.0, None, None))
    finally:
        torch.set_num_threads(before)
    assert kernel_shape.run_products(ops, []) == []


def test_set_shape_refuses_a_shape_that_is_no_candidate():
    before = ops.get_shape()
    for bad in ((3, 0, 1, 0), (1, 100, 1, 0), (1, 0, 8, 0), (1, 0, 1, -64), (-3, 0, 1, 0), (1, 0, -1, 0)):
        with pytest.raises(RuntimeError, match="not a candidate"):
            ops.set_shape(*bad)
        assert ops.get_shape() == before  # nothing half-set


@pytest.fixture
def tuned_on_tiny(monkeypatch):
    """ensure() measuring even a tiny model (2 quick rounds), with every measurement counted."""
    calls = []
    measure = kernel_shape.measure

    def counted(*args, **kwargs):
        calls.append(args[2])
        return measure(*args, **{**kwargs, "rounds": 2})

    monkeypatch.setattr(kernel_shape, "MIN_TUNE_BYTES", 0)
    monkeypatch.setattr(kernel_shape, "QUIET_SPREAD", float("inf"))  # a tiny model's passes take microseconds
    monkeypatch.setattr(kernel_shape, "MIN_ROUNDS", 1)
    monkeypatch.setattr(kernel_shape, "measure", counted)
    return calls


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_the_choice_is_measured_once_cached_and_reused(tmp_path, tuned_on_tiny, dtype, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_INT8_PATH", "float")  # the path is not measured (test_int8_int16.py)
    folder = save_hf_model(make_hf_model("llama"), tmp_path / "tiny")
    stages = []
    model = load_model(folder, device="cpu", dtype=dtype, progress=lambda *a: stages.append(a))
    kind = "int8" if dtype == "int8" else "f32"
    assert tuned_on_tiny == [kind] and ("tune", 0, 1) in stages and stages[-1] == ("tune", 1, 1)
    assert "once" in progress.STAGES["tune"]  # the words the status bar and the terminal show meanwhile
    path = kernel_shape.cache_file()
    data = json.loads(path.read_text())
    chosen = kernel_shape.in_force(ops)[kind]
    assert kernel_shape.read_cached(path) == {kind: chosen}
    assert data[kind]["rounds"] == 2 and set(data[kind]["median_ms"]) == {s.key for s in CANDIDATES}
    assert data["library"] == kernels._target().stem and data["flags"] == kernel_shape.cpu_identity()["flags"]
    assert model.info().decode_path == f"fused kernels, {chosen.describe()}"
    # next time the file decides, without measuring: shown by a choice written into it by hand
    other = next(s for s in reversed(CANDIDATES) if s != chosen)  # a shape with rows far apart
    data[kind].update(rows=other.rows, prefetch=other.prefetch, spread=other.spread)
    path.write_text(json.dumps(data))
    stages.clear()
    assert kernel_shape.ensure(model.decoder, lambda *a: stages.append(a)) == other
    assert kernel_shape.in_force(ops)[kind] == other and tuned_on_tiny == [kind] and stages == []


@pytest.mark.parametrize("text", ["{", "[]", "null", '{"version": 1, "f32": {"rows": 3, "prefetch": 0}}',
                                  '{"version": 1, "f32": {"rows": "x"}}', '{"version": 99, "f32": {"rows": 1, '
                                  '"prefetch": 0}}', "\x00\xff"])
def test_a_corrupt_cache_file_is_ignored_and_rewritten(tmp_path, tuned_on_tiny, text):
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="float32")
    path = kernel_shape.cache_file()
    path.write_text(text)
    tuned_on_tiny.clear()
    shape = kernel_shape.ensure(model.decoder)
    assert tuned_on_tiny == ["f32"] and kernel_shape.read_cached(path) == {"f32": shape}


def test_a_small_model_is_not_measured_and_leaves_no_file(tmp_path):
    """Its products would be timed from the CPU's caches: the defaults (or the shape in force) stay."""
    before = kernel_shape.in_force(ops)["f32"]
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="float32")
    assert kernel_shape.in_force(ops)["f32"] == before
    assert not kernel_shape.cache_file().exists()
    assert model.info().decode_path == f"fused kernels, {before.describe()}"


def test_the_env_knob_forces_a_shape_without_measuring(tmp_path, tuned_on_tiny, monkeypatch):
    monkeypatch.setenv(ENV, "f32=2sx0,int8=4sx1024")
    assert kernel_shape.forced() == {"f32": Shape(2, 0, True), "int8": Shape(4, 1024, True)}
    monkeypatch.setenv(ENV, "f32=1x8192, int8=4x0")
    assert kernel_shape.forced() == {"f32": Shape(1, 8192), "int8": Shape(4, 0)}
    folder = save_hf_model(make_hf_model("llama"), tmp_path / "tiny")
    for dtype, shape in (("float32", Shape(1, 8192)), ("int8", Shape(4, 0))):
        model = load_model(folder, device="cpu", dtype=dtype)
        assert kernel_shape.in_force(ops)[kernel_shape.kind_of(model.decoder.backend)] == shape
    assert tuned_on_tiny == [] and not kernel_shape.cache_file().exists()
    monkeypatch.setenv(ENV, "int8=2x2048")  # only int8 forced: float32 is measured as usual
    load_model(folder, device="cpu", dtype="float32")
    assert tuned_on_tiny == ["f32"]


@pytest.mark.parametrize("value", ["f32=3x0", "f32=1x100", "gpu=1x0", "f32=1", "f32=1x0,f32=2x0", "1x0",
                                   "f32=ax0", "f32=1x0;int8=1x0", "f32=1sx0", "f32=sx0", "int8=3sx0"])
def test_a_bad_env_knob_is_one_line_naming_the_variable(tmp_path, monkeypatch, value):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(KernelShapeError) as caught:
        load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="float32")
    line = one_line(caught.value)
    assert line.startswith(f"{ENV}=") and "\n" not in str(caught.value) and "f32=1x8192" in line


def test_a_noisy_measurement_holds_for_this_run_but_is_not_cached(tmp_path, tuned_on_tiny, monkeypatch):
    """The winner's passes disagree by more than QUIET_SPREAD, or the time ran out before MIN_ROUNDS rounds
    (a machine busy with other work): in force now, measured again next time."""
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="float32")
    kernel_shape.cache_file().unlink()  # measured (quietly enough) while loading: start without a choice
    winner = Shape(2, 1024)
    monkeypatch.setattr(kernel_shape, "QUIET_SPREAD", 1.5)
    monkeypatch.setattr(kernel_shape, "MIN_ROUNDS", 3)
    for winner_ms, cached in (([1.0, 1.1, 2.0], False), ([1.0], False), ([1.0, 1.1, 1.2], True)):
        timings = {s: [5.0] * len(winner_ms) for s in CANDIDATES}
        timings[winner] = winner_ms
        monkeypatch.setattr(kernel_shape, "measure", lambda *a, **k: timings)
        assert kernel_shape.ensure(model.decoder) == winner == kernel_shape.in_force(ops)["f32"]
        assert kernel_shape.cache_file().exists() == cached


@pytest.mark.parametrize("out_features, in_features", [(1536, 576), (130, 100), (41, 1536)])
def test_the_tiles_give_the_same_bits_with_and_without_their_l1_prefetch(out_features, in_features):
    g = torch.Generator().manual_seed(out_features)
    w, x = torch.randn(out_features, in_features, generator=g), torch.randn(16, in_features, generator=g)
    products = {}
    for on in (True, False):
        ops.set_tile_l1_prefetch(on)
        products[on] = [ops.gemv_f32(w, x[:rows].contiguous(), 0.8, None, None) for rows in range(2, 17)]
    assert all(torch.equal(a, b) for a, b in zip(products[True], products[False]))


def _tiles_in_force() -> bool:
    return kernel_shape.tiles_in_force(ops)


@pytest.mark.parametrize("faster", [False, True])
def test_the_tiles_l1_prefetch_is_measured_once_cached_and_reused(tmp_path, monkeypatch, faster):
    """A float32 model's load times passes of several rows with and without the tiles' L1 prefetch, puts the faster
    in force and caches it; the next load takes it from the file without measuring."""
    timed = []

    def measure_tiles(decoder, rounds=kernel_shape.ROUNDS):
        timed.append(decoder)
        return {faster: [1.0, 1.1, 1.0], not faster: [2.0, 2.1, 2.0]}

    monkeypatch.setattr(kernel_shape, "TILES_MIN_BYTES", 0)
    monkeypatch.setattr(kernel_shape, "measure_tiles", measure_tiles)
    ops.set_tile_l1_prefetch(not faster)
    folder = save_hf_model(make_hf_model("llama"), tmp_path / "tiny")
    load_model(folder, device="cpu", dtype="float32")
    assert len(timed) == 1 and _tiles_in_force() == faster
    path = kernel_shape.cache_file()
    assert kernel_shape.read_cached_tiles(path) == faster
    assert json.loads(path.read_text())[kernel_shape.TILES_KEY]["median_ms"] == {"l1" if faster else "none": 1.0,
                                                                                  "none" if faster else "l1": 2.0}
    ops.set_tile_l1_prefetch(not faster)
    load_model(folder, device="cpu", dtype="float32")
    assert len(timed) == 1 and _tiles_in_force() == faster  # from the file


def test_the_tiles_are_timed_on_the_models_passes_of_several_rows_with_each_setting(tmp_path):
    """measure_tiles itself: every round times both settings on the model's own passes of TILE_ROWS positions, and
    the setting in force is kept."""
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="float32")
    ops.set_tile_l1_prefetch(False)
    times = kernel_shape.measure_tiles(model.decoder, rounds=3)
    assert set(times) == {True, False} and all(len(t) == 3 and min(t) > 0 for t in times.values())
    assert _tiles_in_force() is False


def test_a_small_model_leaves_the_tiles_as_they_are(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_shape, "measure_tiles", lambda *a, **k: pytest.fail("a tiny model's passes were timed"))
    ops.set_tile_l1_prefetch(False)
    load_model(save_hf_model(make_hf_model("llama"), tmp_path / "tiny"), device="cpu", dtype="float32")
    assert _tiles_in_force() is False and not kernel_shape.cache_file().exists()
