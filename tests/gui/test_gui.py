"""The desktop app, offscreen, driven as a person would, on the real default model."""

import os
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from gui.dock_layout import LAYOUT_VERSION
from gui.main_window import MainWindow
from gui.theme import Appearance
from gui.link.worker import ENGINE_NICENESS
from app_driver import idle, prefill, settle, step

WAIT = 120_000  # ms: generous, the machines are shared


@pytest.fixture(scope="module")
def cached_default_model(default_model):
    return default_model  # make sure the converted model is in the cache before the window loads it


@pytest.fixture()
def settings_file(tmp_path):
    return QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)


@pytest.fixture()
def window(qtbot, cached_default_model, settings_file):
    """A window that has loaded the default model; held here, closed and joined after the test."""
    win = MainWindow(settings=settings_file, appearance=Appearance())
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitUntil(lambda: win.controller.info is not None, timeout=WAIT)
    yield win
    win.close()
    assert win.controller.thread.isFinished()


def reset(qtbot, win):
    win.actions["reset"].trigger()
    qtbot.waitUntil(lambda: not win.controller.steps and idle(win.controller), timeout=WAIT)


def ids(win):
    return [s.token.id for s in win.controller.steps]


def test_three_steps_show_in_context_and_candidates(qtbot, window):
    prefill(window)
    step(window, 3)
    settle(window)
    chips = window.views["context"].canvas.chips
    assert len(chips) == 5 + 3
    assert [ch.step for ch in chips[5:]] == [1, 2, 3]
    assert [ch.token_id for ch in chips[5:]] == ids(window)
    view = window.views["candidates"]
    third = window.controller.steps[2]
    assert view.header.text().startswith("Step 3 drew")
    heights = view.bars.bars["raw"].width
    assert np.allclose(heights, third.dist.candidates.p_raw)


def test_reset_same_seed_reproduces_and_greedy_repeats(qtbot, window):
    window.controls.seed.setValue(1234)
    prefill(window, "Once upon a time")
    step(window, 3)
    first = ids(window)
    reset(qtbot, window)
    step(window, 3)
    assert ids(window) == first
    assert window.controller.steps[0].seed == 1234
    window.controls.greedy.setChecked(True)
    reset(qtbot, window)
    step(window, 3)
    greedy = ids(window)
    reset(qtbot, window)
    step(window, 3)
    assert ids(window) == greedy
    assert all(s.random_u is None for s in window.controller.steps)


def test_temperature_redraws_pending_bars_without_a_forward(qtbot, window):
    prefill(window)
    c = window.controller
    settle(window)
    forwards = c.forward_count
    assert forwards >= 1  # the prefill ran one
    view = window.views["candidates"]
    before = np.array(view.bars.bars["temp"].width)  # after-temperature bars
    window.controls.temperature.setValue(2.0)
    qtbot.waitUntil(lambda: c.pending is not None and c.pending.dist.settings.temperature == 2.0, timeout=WAIT)
    settle(window)
    after = np.array(view.bars.bars["temp"].width)
    assert c.shown().pending and view.header.text().startswith("Step 1 (next")
    assert after[0] < before[0] - 0.05  # a hotter temperature flattens the top bar
    assert np.allclose(view.bars.bars["raw"].width, c.pending.dist.candidates.p_raw)  # raw bars unchanged
    assert c.forward_count == forwards


def test_scrubbing_to_step_one_shows_its_candidates(qtbot, window):
    prefill(window)
    step(window, 3)
    window.history.setValue(1)
    settle(window)
    first = window.controller.steps[0]
    view = window.views["candidates"]
    assert view.header.text().startswith("Step 1 drew")
    assert np.allclose(view.bars.bars["final"].width, first.dist.candidates.p_final)
    assert window.views["context"].canvas.selected_step == 1


def test_run_until_max_new_tokens(qtbot, window):
    """Greedy, so the run is the same every time: this prompt's first 10 greedy tokens hold no EOS."""
    window.controls.greedy.setChecked(True)
    window.controls.max_new.setValue(10)
    prefill(window, "Write a long story about a dragon:")
    window.actions["run"].trigger()
    qtbot.waitUntil(lambda: window.controller.stopped is not None and idle(window.controller), timeout=WAIT)
    stopped = window.controller.stopped
    assert stopped.reason == "max_new_tokens"
    assert stopped.n_generated == 10 and len(window.controller.steps) == 10
    assert not window.actions["pause"].isEnabled() and not window.actions["step"].isEnabled()
    # The run ended: the engine hashed the weights again, and the status bar shows both fingerprints equal.
    qtbot.waitUntil(lambda: window.controller.weights_check is not None, timeout=WAIT)
    check, info = window.controller.weights_check, window.controller.info
    assert check.at_load == check.now == info.weights_fingerprint
    assert f"fingerprint {info.weights_fingerprint[:8]} = after the run ✓" in window.status.model.text()
    assert window.status.model.toolTip().startswith("Weights fingerprint")  # float32: no notes on the products
    # An int8 model's notes (its head's ranking, its path) open the tooltip; the line itself stays as short.
    text = window.status.model.text()
    window.controller.history.info = replace(info, dtype="int8",
                                             decode_notes="head ranks in 4 bits, best 256 rescored in float")
    try:
        window.status._show_model()
        assert window.status.model.toolTip().startswith("int8: head ranks in 4 bits, best 256 rescored in float\n")
        assert window.status.model.text() == text.replace(" · float32 · ", " · int8 · ")
    finally:
        window.controller.history.info = info
        window.status._show_model()


def test_a_long_prefill_says_which_chunk_it_reads(window):
    window.controller.progress.emit("prefill", 1024, 1800)  # as the engine reports a chunked prefill
    assert "chunk 2 of 4" in window.status.state.text() and "1,024 of 1,800 positions" in window.status.state.text()


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no process priorities here")
def test_the_engine_process_yields_the_cpu_to_the_gui(window):
    """The engine runs at a lower priority, so a paint never waits behind a decode step for a core."""
    engine = window.controller.worker.process.pid
    expected = min(os.getpriority(os.PRIO_PROCESS, 0) + ENGINE_NICENESS, 19)  # 19: the nicest there is
    assert os.getpriority(os.PRIO_PROCESS, engine) == expected


def test_views_redraw_together_during_run_within_a_cpu_share(qtbot, window, monkeypatch):
    """During Run every visible view redraws at each frame (all at the same step), and a frame comes only
    while the frames (their refresh and paint) stay within their CPU share, or once per min_turn_s; when the
    run ends every view catches up."""
    from gui.views.base import View

    scheduler = window.controller.scheduler
    prefill(window)
    step(window)
    views = [v for v in window.findChildren(View) if v.isVisible()]
    assert sum(v.COSTLY for v in views) >= 3 and any(type(v).__name__ == "ContextView" for v in views)
    counts = {}
    clock = {"cpu": 0.0, "wall": 0.0, "cpu_per_frame": 0.0}

    def refresh(v):
        counts[v] = counts.get(v, 0) + 1
        clock["cpu"] += clock["cpu_per_frame"] / len(views)  # what drawing it costs the GUI thread

    for v in views:
        monkeypatch.setattr(v, "refresh", lambda v=v: refresh(v))
    monkeypatch.setattr(scheduler, "cpu_clock", lambda: clock["cpu"])
    monkeypatch.setattr(scheduler, "wall_clock", lambda: clock["wall"])

    def redraws(n):
        counts.clear()
        for _ in range(n):
            clock["wall"] += 1.0  # a second between redraws
            clock["cpu"] += 0.5  # the GUI thread's work at each step: done with frames or without, not paid
            scheduler.redraw_now()

    redraws(1)  # not running yet: the scheduler starts its accounts from the (fake) clocks
    monkeypatch.setattr(scheduler, "is_running", lambda: True)  # only the redraw policy is under test
    monkeypatch.setattr(scheduler, "cpu_share", 1.0)  # a whole core, unused: a frame at every redraw
    redraws(5)
    assert all(counts.get(v) == 5 for v in views)
    monkeypatch.setattr(scheduler, "cpu_share", 0.05)  # frames costing a second each: after one, no more...
    monkeypatch.setattr(scheduler, "min_turn_s", 3600.0)
    clock["cpu_per_frame"] = 1.0
    redraws(1)
    assert all(counts.get(v) == 1 for v in views)  # (savings from the frames before)
    redraws(4)
    assert not counts and scheduler.redraw_due  # the change waits for a frame
    clock["wall"] += 3600.0  # ...except one when the last frame is min_turn_s ago: every view in it
    redraws(4)
    assert all(counts.get(v) == 1 for v in views)
    monkeypatch.setattr(scheduler, "is_running", lambda: False)
    redraws(1)
    assert all(counts.get(v) == 1 for v in views)


def test_during_a_run_the_step_axes_hold_the_whole_run_from_the_start(qtbot, window):
    """A range change lays an axis out and paints it again, at every frame while the steps grew by blocks:
    during a Run the step axes of Timing, Stop and the KV cache's growth cover the run to its length limit,
    and keep that range from frame to frame."""
    c = window.controller
    window.controls.max_new.setValue(400)
    prefill(window, "Count to one thousand: 1, 2, 3,")
    n_prompt = c.prefill_event.n_tokens
    views = window.views
    plots = {"timing": lambda: views["timing"].step_chart.x_range,  # painted charts
             "stop": lambda: views["stop"].eos_plot.x_range,
             "kv": lambda: views["kv"].growth.x_range}

    def ranges():
        for name in plots:
            views[name].refresh()
        return {name: tuple(x_range()) for name, x_range in plots.items()}

    window.actions["run"].trigger()
    qtbot.waitUntil(lambda: len(c.steps) >= 3 and c.running, timeout=WAIT)
    early = ranges()
    qtbot.waitUntil(lambda: len(c.steps) >= 30 or not c.running, timeout=WAIT)
    assert c.running, "the run ended before the check (it has 400 steps to go)"
    assert ranges() == early
    assert early["timing"][1] >= 400 and early["stop"][1] >= 400 and early["kv"][1] >= n_prompt + 400
    window.actions["stop"].trigger()
    qtbot.waitUntil(lambda: idle(c), timeout=WAIT)
    assert ranges()["timing"][1] < 400  # stopped: the steps there are, in whole blocks


def test_the_controls_panel_keeps_its_size_when_a_run_ends(qtbot, window):
    """The panel sat at its dock's height through a run, then (its scroll area sizing it to its preferred
    height at the first layout change after the run) grew past it: the prompt box grew 120 px, the panel
    scrolled and everything below the box moved, at the end of every run."""
    c, controls = window.controller, window.controls
    controls.max_new.setValue(8)
    prefill(window)
    qtbot.wait(50)
    before = (controls.height(), controls.prompt.height())
    window.actions["run"].trigger()
    qtbot.waitUntil(lambda: c.stopped is not None and idle(c), timeout=WAIT)
    qtbot.wait(100)  # the layout requests the end of the run set off
    viewport = controls.parentWidget()  # the scroll area's viewport
    assert (controls.height(), controls.prompt.height()) == before
    assert controls.height() <= max(viewport.height(), controls.minimumSizeHint().height())


def test_bad_folder_shows_an_error_and_the_old_model_still_steps(qtbot, window, tmp_path):
    """Issue 18: a failed load used to leave a modal progress dialog over the error and every later Step
    answered and ignored. Now: the error closes with one click and Space steps on, without a new prefill."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QProgressDialog

    prefill(window)
    step(window, 1)
    first = ids(window)
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "config.json").write_text('{"architectures": ["NopeForCausalLM"]}')
    name = window.controller.info.name
    window.load_model(str(bad))
    qtbot.waitUntil(lambda: window.loader.error_box is not None, timeout=WAIT)
    box = window.loader.error_box
    assert "unsupported architecture 'NopeForCausalLM'" in box.text()
    assert window.controller.info.name == name and not window.controller.loading
    qtbot.wait(600)  # past the progress dialog's 400 ms show delay: it must not appear now
    assert not [w for w in QApplication.topLevelWidgets() if isinstance(w, QProgressDialog) and w.isVisible()]
    qtbot.mouseClick(box.button(QMessageBox.Ok), Qt.LeftButton)
    qtbot.waitUntil(lambda: window.loader.error_box is None, timeout=WAIT)
    assert window.actions["step"].shortcut().toString() == "Space" and window.actions["step"].isEnabled()
    window.actions["step"].trigger()  # what Space does (offscreen windows get no key focus)
    qtbot.waitUntil(lambda: len(window.controller.steps) == 2 and idle(window.controller), timeout=WAIT)
    assert ids(window)[:1] == first


def test_layout_round_trips_and_a_stale_version_falls_back(qtbot, window, settings_file):
    window.docks["timing"].hide()
    window.docks["attention"].show()
    window.save_layout()
    again = MainWindow(settings=settings_file, appearance=Appearance(), autoload=False)
    qtbot.addWidget(again)
    try:
        assert again.layout_restored
        assert again.docks["timing"].isHidden() and not again.docks["attention"].isHidden()
    finally:
        again.close()
    settings_file.setValue("layout/version", LAYOUT_VERSION - 1)
    stale = MainWindow(settings=settings_file, appearance=Appearance(), autoload=False)
    qtbot.addWidget(stale)
    try:
        assert not stale.layout_restored and not stale.docks["timing"].isHidden()
    finally:
        stale.close()


def test_closing_mid_run_joins_the_thread_quickly(qtbot, cached_default_model, settings_file):
    import time

    win = MainWindow(settings=settings_file, appearance=Appearance())
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.controller.info is not None, timeout=WAIT)
    win.controls.max_new.setValue(500)
    win.controls.prompt.setPlainText("Count to one thousand: 1, 2, 3,")
    win.actions["run"].trigger()
    qtbot.waitUntil(lambda: len(win.controller.steps) >= 3, timeout=WAIT)
    started = time.perf_counter()
    win.close()
    closed_s = time.perf_counter() - started
    assert win.controller.thread.isFinished(), f"worker thread still running after {closed_s:.2f} s"
    assert not win.controller.worker.process.is_alive(), f"engine still alive after {closed_s:.2f} s"
    assert closed_s < 2.0, f"closing took {closed_s:.2f} s"
    assert win.controller.stopped is None  # no abort message


def test_export_trace_and_png(qtbot, window, tmp_path):
    import json

    prefill(window)
    step(window, 2)
    path = window.export_trace(str(tmp_path / "t.jsonl"))
    events = [json.loads(line) for line in open(path, encoding="utf-8")]
    assert [e["type"] for e in events] == ["model", "settings", "prefill", "step", "step"]
    assert events[3]["token"]["id"] == window.controller.steps[0].token.id
    png = window.export_png("candidates", str(tmp_path / "c.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_presentation_and_dark_mode_rescale(qtbot, window):
    canvas = window.views["context"].canvas
    prefill(window)
    settle(window)
    normal = canvas.chips[0].rect.height()
    window.actions["presentation"].trigger()
    window.actions["dark"].trigger()
    settle(window)
    assert canvas.chips[0].rect.height() > normal * 1.1  # the type grew by the presentation scale
    assert window.appearance.theme.name == "dark"
    window.actions["presentation"].trigger()
    window.actions["dark"].trigger()


def test_the_window_opens_before_torch_is_imported():
    """The 1.7 s torch import happens in the worker thread, after the window is up."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import os, sys; os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
            "from PySide6.QtWidgets import QApplication; app = QApplication([])\n"
            "from gui.main_window import MainWindow\n"
            "w = MainWindow(autoload=False); w.show(); app.processEvents()\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_presentation_mode_tabs_the_secondary_docks_and_gives_the_layout_back(qtbot, window):
    d = window.docks

    def on_screen():  # a dock tabbed behind another is "visible" to Qt, off-screen where Qt likes
        return {key: dock.geometry() for key, dock in d.items() if dock.isVisible() and
                window.rect().intersects(dock.geometry())}

    before = on_screen()
    window.actions["presentation"].trigger()
    qtbot.waitUntil(lambda: d["stop"] in window.tabifiedDockWidgets(d["kv"]), timeout=5000)
    assert d["timing"] in window.tabifiedDockWidgets(d["kv"])
    assert d["explain"] in window.tabifiedDockWidgets(d["controls"])
    # Candidates now spans the width that it shared with Stop
    assert d["candidates"].width() > before["candidates"].width() + before["stop"].width() * 0.8
    window.actions["presentation"].trigger()
    qtbot.waitUntil(lambda: not window.tabifiedDockWidgets(d["kv"]), timeout=5000)
    settle(window)
    after = on_screen()
    assert after.keys() == before.keys()
    for key in before:
        assert abs(after[key].width() - before[key].width()) <= 2 and abs(after[key].x() - before[key].x()) <= 2
