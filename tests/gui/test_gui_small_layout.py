"""The layout from 1024x700 up (issue 18 items 2, 9 and 10): every dock at least its minimum size in a small
window, a layout saved on a large screen that does not fit a small one falls back to the default, the KV
curve's x range holds every point, Timing's y axis follows its data, and greedy Candidates show no
temperature stage. On the real default model; one window serves the module."""

import numpy as np
from PySide6.QtCore import QRect, QSettings, Qt
from PySide6.QtWidgets import QApplication, QScrollArea, QToolButton

from gui.main_window import MainWindow
from gui.theme import Appearance
from gui.widgets.candidate_labels import fmt_p, row_label
from gui.widgets.plotting import covering, step_top
from gui.views.timing_view import robust_top
from app_driver import idle, settle, wait_until, window_fixture

window = window_fixture("small_layout")


def _inner(dock):
    w = dock.widget()
    return w.widget() if isinstance(w, QScrollArea) else w


def _prefill_and_step(win, n=3):
    c = win.controller
    wait_until(lambda: idle(c))
    win.prefill()
    wait_until(lambda: c.prefill_event is not None and idle(c))
    for _ in range(n):
        win.generation.step_or_pause()
        wait_until(lambda: idle(c))
    settle(win)


def test_at_1024x700_every_dock_keeps_its_minimum(window):
    window.resize(1024, 700)
    window.proportion_docks()
    QApplication.processEvents()
    wait_until(lambda: window.size().toTuple() == (1024, 700), 5000)
    hint = window.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700
    docked = [d for d in window.docks.values() if d.isVisible() and not d.isFloating()]
    for dock in docked:
        assert dock.width() >= dock.minimumSizeHint().width(), dock.objectName()
        assert dock.height() >= dock.minimumSizeHint().height(), dock.objectName()
    for key in ("context", "candidates"):  # not scrolled: the whole view at its own minimum
        dock = window.docks[key]
        assert dock.height() >= _inner(dock).minimumSizeHint().height()
    assert window.docks["controls"].width() >= _inner(window.docks["controls"]).minimumSizeHint().width()
    # the compact arrangement: the secondary views behind Candidates, Explain behind Controls, as tabs
    d = window.docks
    assert window.dock_layout.arrangement == "compact"
    behind = window.tabifiedDockWidgets(d["candidates"])
    assert all(d[key] in behind for key in ("kv", "stop", "timing", "compare", "branches"))
    assert d["explain"] in window.tabifiedDockWidgets(d["controls"])
    assert d["candidates"].width() >= window.width() - d["controls"].width() - 30
    # Controls whole in its width: no sideways scroll bar, Run and Reset inside the visible column
    area = d["controls"].widget()
    assert area.horizontalScrollBar().maximum() == 0
    for button in area.widget().findChildren(QToolButton):
        right = button.mapTo(area.viewport(), button.rect().topRight()).x()
        assert button.isVisible() and right <= area.viewport().width(), button.text()
    # grown back, the window gets the default arrangement again (not the small one's tabs or squeeze)
    window.resize(1600, 1000)
    wait_until(lambda: d["stop"] not in window.tabifiedDockWidgets(d["candidates"]), 5000)
    wait_until(lambda: not window.dock_layout.squeezed(), 5000)
    assert window.dock_layout.arrangement == "large"
    assert d["candidates"].height() > 0.4 * window.height() and d["timing"].isVisible()


def test_a_layout_from_a_large_screen_falls_back_when_it_does_not_fit(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)
    big = MainWindow(settings=settings, appearance=Appearance(), autoload=False)
    qtbot.addWidget(big)
    big.resize(2560, 1440)
    big.show()
    big.proportion_docks()
    qtbot.wait(400)  # past the check that follows a window resize (it would re-proportion the docks)
    big.docks["attention"].show()  # the big screen had room for more: Stop wide, Attention out
    big.resizeDocks([big.docks["candidates"], big.docks["stop"]], [500, 1500], Qt.Horizontal)
    qtbot.waitUntil(lambda: big.docks["stop"].width() > 1000, timeout=5000)
    big.save_layout()
    big.close()
    small = MainWindow(settings=settings, appearance=Appearance(), autoload=False)
    qtbot.addWidget(small)
    try:
        assert not small.dock_layout.restore(QRect(0, 0, 1024, 700))
        assert small.width() <= 1024 and small.height() <= 700
        assert small.docks["attention"].isHidden()  # the default's docks
        small.show()
        qtbot.wait(50)
        assert not small.dock_layout.squeezed()
    finally:
        small.close()
    # a layout saved in the small window itself is restored there
    small.dock_layout.save(QRect(0, 0, 1024, 700))
    again = MainWindow(settings=settings, appearance=Appearance(), autoload=False)
    qtbot.addWidget(again)
    try:
        assert again.dock_layout.restore(QRect(0, 0, 1024, 700))
        again.docks["stop"].hide()
    finally:
        again.close()  # (closing saves the layout for the offscreen screen: saved again for 1024x700)
    again.dock_layout.save(QRect(0, 0, 1024, 700))
    third = MainWindow(settings=settings, appearance=Appearance(), autoload=False)
    qtbot.addWidget(third)
    try:
        assert third.dock_layout.restore(QRect(0, 0, 1024, 700)) and third.docks["stop"].isHidden()
    finally:
        third.close()


def test_the_kv_curve_holds_every_point_and_timing_its_bars(window):
    _prefill_and_step(window, 3)
    kv = window.views["kv"]
    xs = kv.growth.series["used"].x
    low, high = kv.growth.x_range
    assert len(xs) >= 2 and low < float(np.min(xs)) and float(np.max(xs)) < high
    timing = window.views["timing"]
    steps = window.controller.steps
    tops = [s.forward_ms + s.sample_ms for s in steps[1:]]
    y_top = timing.step_chart.y_range[1]
    assert max(tops) <= y_top <= 1.5 * max(max(tops), window.views["timing"].series.update(
        window.controller.history.log)) + 1e-9


def test_ranges_from_the_data():
    lo, hi = covering(692, 700, 16)  # a long prompt, a few steps: not a dot at the edge of 0..704
    assert lo < 692 < 700 < hi and hi - lo <= 64
    assert covering(5, 105, 16)[0] == 0
    assert covering(692, 700, 16, None) == (lo, hi)  # not running: the same


def test_a_run_s_step_axes_change_rarely_and_end_where_the_run_leaves_them():
    """A range change lays an axis out and paints it again: during a run (a frame about once a second, some 50
    steps apart) the step axes cover the whole run from the start, or double, not grow by a block a frame."""
    assert step_top(40, 16) == 48  # by hand: whole blocks, a tight fit
    assert {step_top(n, 16, 100) for n in range(0, 101)} == {step_top(100, 16)} == {112}  # no jump at the end
    assert {covering(13, 13 + n, 16, 113) for n in range(0, 101)} == {covering(13, 113, 16)}
    tops = [step_top(n, 16, 100_000) for n in range(0, 5000)]  # a run too long to show whole from the start
    assert all(n <= top <= max(2 * n, 16) for n, top in enumerate(tops))
    assert len(set(tops)) <= 10 and tops == sorted(tops)  # doubling: 16, 32 ... 8192
    assert step_top(300, 16, 2000) == 2000  # within 8x what is there: the whole run
    assert step_top(120, 16, 99) == 128  # a limit already behind: the steps themselves


def test_robust_tops_from_the_data():
    decode = np.array([1900.0] * 20 + [4800.0])  # one pause among steady passes
    assert robust_top(decode, 0.0, 100.0) <= 1.5 * 1900
    assert robust_top(np.array([3.0, 4.0]), 0.0, 100.0) == 4.0


def test_each_stage_labelled_and_greedy_without_temperature(window):
    class S:
        is_greedy, temperature = False, 0.1
    assert row_label(0.3, 0.002, 0.0, S) == "0.30 → 0.002 → ✕"  # not "0.000"
    assert fmt_p(3e-5) == "3e-5" and fmt_p(1.0) == "1"
    c = window.controls
    c.greedy.setChecked(True)
    try:
        _prefill_and_step(window, 1)
        view = window.views["candidates"]
        assert view.bars.bars["temp"].width.size == 0  # the temperature bars
        assert "after T" not in view.legend.text()
        names = [name for _, name in view.waterfall.x_ticks]
        assert "temp." not in names and "argmax" in names
        assert len(view.bars.bars["raw"].width) == len(view._rows) > 0
    finally:
        c.greedy.setChecked(False)
    _prefill_and_step(window, 1)
    view = window.views["candidates"]
    assert "after T" in view.legend.text() and view.bars.bars["temp"].width.size > 0


def test_the_three_stage_colours_are_distinct_in_every_theme():
    from PySide6.QtGui import QColor

    from gui.theme import DARK, LIGHT, _high_contrast

    for theme in (LIGHT, DARK, _high_contrast(LIGHT), _high_contrast(DARK)):
        raw, temp, final = (QColor(getattr(theme, key)) for key in ("raw", "temp", "final"))
        assert abs(temp.hueF() - final.hueF()) > 0.08, theme.name  # not two blues
        assert final.hsvSaturationF() > 0.6 and raw.hsvSaturationF() < 0.3  # final saturated, raw grey
