"""A first start does not wait for the decode kernels: the app's load runs on stock ops at once, the kernels
build in the background, and the engine moves the same session onto them between two steps.

These tests stand in for the build (a Future they resolve themselves; the library is the one the test
process already built); tests/e2e/test_first_start.py runs the one real build (`main.py download`)."""

from concurrent.futures import Future

import pytest
import torch
from engine_driver import EngineOverPipes
from tiny import make_hf_model, save_hf_model

from inference import kernels
from inference.engine import protocol as p
from inference.engine.backend_switch import switch_if_built
from inference.model.layers import KernelLinear
from inference.store.loading import BUILDING, load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings

GREEDY = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=40)


@pytest.fixture
def unbuilt(monkeypatch):
    """The kernels as if not built yet; `unbuilt.finish()` ends the stand-in build with the real library."""
    build: Future = Future()
    state = {"pending": True, "builds": 0}

    def start():
        state["builds"] += 1
        return build

    def finish(result=...):
        state["pending"] = False
        build.set_result(kernels.ops() if result is ... else result)

    monkeypatch.setattr(kernels, "build_pending", lambda: state["pending"])
    monkeypatch.setattr(kernels, "build_in_background", start)
    build.finish, build.state = finish, state
    return build


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("background"))


def _greedy_steps(session, n):
    return [event for _ in range(n) for event in session.step()]


@pytest.mark.kernels
def test_a_load_runs_on_stock_ops_until_the_build_is_done_then_the_same_session_goes_on(folder, unbuilt):
    model = load_model(folder, device="cpu", dtype="float32", kernels_in_background=True)
    assert model.kernels_pending and model.decoder.backend.name == "torch-cpu"
    assert model.info().decode_path == "stock PyTorch ops" + BUILDING
    at_load = model.fingerprint
    session = Session(model)
    session.update_settings(GREEDY)
    session.prefill([5, 77, 200, 31], "")
    before = _greedy_steps(session, 3)
    assert switch_if_built(model, unbuilt) is None  # still building: nothing changes
    unbuilt.finish()
    assert switch_if_built(model, unbuilt) is True
    assert not model.kernels_pending and model.info().decode_path.startswith("fused kernels,")
    assert all(isinstance(lin, KernelLinear) for lin in model.decoder.weights.linears())
    assert model.current_fingerprint() == at_load  # the same tensors, rebound
    after = _greedy_steps(session, 4)
    assert [s.index for s in before + after] == list(range(1, 8))  # the session went on where it was

    reference = Session(load_model(folder, device="cpu", dtype="float32"))  # on the kernels from the start
    assert reference.model.decoder.backend.name == "kernels"
    reference.update_settings(GREEDY)
    reference.prefill([5, 77, 200, 31], "")
    expected = _greedy_steps(reference, 7)
    assert [s.token.id for s in before + after] == [s.token.id for s in expected]
    for got, want in zip(before + after, expected):  # stock and kernels: the same sums in another order
        assert got.dist.entropy == pytest.approx(want.dist.entropy, abs=1e-5)
        got_p, want_p = got.dist.candidates.p_raw, want.dist.candidates.p_raw
        assert max(abs(float(a) - float(b)) for a, b in zip(got_p, want_p)) <= 1e-5


@pytest.mark.kernels
def test_a_rebound_decoder_computes_what_a_kernel_load_computes(folder, unbuilt):
    model = load_model(folder, device="cpu", dtype="float32", kernels_in_background=True)
    unbuilt.finish()
    switch_if_built(model, unbuilt)
    fresh = load_model(folder, device="cpu", dtype="float32")
    ids = torch.tensor([5, 77, 200, 31, 9])
    with torch.inference_mode():
        for decoder in (model.decoder, fresh.decoder):
            cache = decoder.new_cache(8)
            decoder.forward(ids[:4], 0, cache)
            decoder.logits = decoder.forward(ids[4:], 4, cache)
    assert torch.equal(model.decoder.logits, fresh.decoder.logits)  # the same classes on the same weights


def test_a_failed_build_leaves_stock_ops_and_says_so(folder, unbuilt):
    model = load_model(folder, device="cpu", dtype="float32", kernels_in_background=True)
    unbuilt.finish(None)  # ops() gives None when the build failed
    assert switch_if_built(model, unbuilt) is False
    assert model.info().decode_path == "stock PyTorch ops" and model.decoder.backend.name == "torch-cpu"


def test_only_float32_loads_leave_the_build_to_the_background(folder, unbuilt, monkeypatch):
    """int8 on stock ops rounds its activations to bfloat16: other numbers than the kernels', so it waits for the build
    (here: the build finds nothing to do); a plain load (trace) waits as before."""
    monkeypatch.setattr(kernels, "ops_reporting", lambda progress=None: None)
    assert not load_model(folder, device="cpu", dtype="int8", kernels_in_background=True).kernels_pending
    assert not load_model(folder, device="cpu", dtype="float32").kernels_pending
    assert unbuilt.state["builds"] == 0


@pytest.mark.kernels
def test_the_engine_switches_between_steps_and_tells_the_front_end(folder, unbuilt):
    engine = EngineOverPipes()
    try:
        engine.ask(p.Load(str(folder), "cpu", "float32", 1))
        loaded = [r for r in engine.replies if isinstance(r, p.ModelLoaded)][0]
        assert loaded.info.decode_path == "stock PyTorch ops" + BUILDING
        assert not [r for r in engine.replies if isinstance(r, p.Progress) and r.stage == "compile"]
        engine.ask(p.Prefill("the cat", False, "", GREEDY, 2))
        engine.ask(p.Step())
        unbuilt.finish()  # the engine is idle: it notices on its own and says so
        changed = engine.until(lambda r: isinstance(r, p.ModelInfoChanged))
        assert changed.info.decode_path.startswith("fused kernels,")
        assert changed.info.weights_fingerprint == loaded.info.weights_fingerprint
        engine.ask(p.Run(max_steps=3, batch_s=60.0))
        taken = [e.index for r in engine.replies if isinstance(r, p.Stepped) for e in r.events]
        assert taken == [1, 2, 3, 4]
        assert not [r for r in engine.replies if isinstance(r, p.Failed)]
    finally:
        engine.close()


def test_the_window_shows_the_new_decode_path_and_keeps_its_steps(qtbot, folder, tmp_path):
    """The front-end's half: a ModelInfoChanged reply (as the engine sends it after the switch) changes the
    status bar's model line and nothing of the generation shown."""
    from dataclasses import replace

    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow
    from gui.link.redraw import SMALL_MACHINE_SHARE, RUN_GUI_CPU_SHARE, run_cpu_share
    from gui.theme import Appearance

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings, appearance=Appearance(), model=str(folder), device="cpu", dtype="float32")
    qtbot.addWidget(win)
    try:
        c = win.controller
        qtbot.waitUntil(lambda: c.info is not None, timeout=60_000)
        win.controls.prompt.setPlainText("the cat")
        win.prefill()
        qtbot.waitUntil(lambda: c.prefilled and not c.busy, timeout=60_000)
        c.step()
        qtbot.waitUntil(lambda: len(c.steps) == 1 and not c.busy, timeout=60_000)
        steps, shown = list(c.steps), c.info.decode_path
        changed = "kernels per product" if shown.startswith("fused kernels") else "fused kernels"
        c._on_reply(p.ModelInfoChanged(replace(c.info, decode_path=changed)))
        assert f"decode: {changed}" in win.status.model.text() and f"decode: {shown}" not in win.status.model.text()
        assert c.info.decode_path == changed and list(c.steps) == steps and c.prefilled
    finally:
        win.controller.shutdown()
        win.close()
    # and during a Run on 2 cores the frames take half the GUI's usual CPU share
    assert run_cpu_share(2) == SMALL_MACHINE_SHARE == RUN_GUI_CPU_SHARE / 2 and run_cpu_share(16) == RUN_GUI_CPU_SHARE
