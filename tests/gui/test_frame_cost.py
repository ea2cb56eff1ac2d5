"""What a Run's frames skip to cost less GUI time (plotting.py, chip_canvas.py), checked against
doing the whole work: the same sizes, the same curves, the same chips, the same pixels on screen (the painted charts'
own: test_bar_chart.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from gui.theme import Appearance
from gui.widgets.chip_canvas import Chip, ChipCanvas
from gui.widgets.plotting import set_data

def settle():
    for _ in range(4):
        QApplication.processEvents()


def on_screen(widget: QWidget) -> QImage:
    """What the window's backing store holds (the offscreen platform grabs it): the frames' paints as they
    accumulated, not a fresh render."""
    return widget.screen().grabWindow(widget.winId()).toImage()


def same_pixels(a: QImage, b: QImage) -> bool:
    return a.convertToFormat(QImage.Format_RGB32) == b.convertToFormat(QImage.Format_RGB32)


def test_a_curve_set_again_as_it_is_is_left_alone(qapp, monkeypatch):
    curve = pg.PlotDataItem([], [])
    calls = []
    original = curve.setData
    monkeypatch.setattr(curve, "setData", lambda *a, **k: (calls.append(a), original(*a, **k)))
    x = np.arange(5.0)
    set_data(curve, x, x ** 2, pen=pg.mkPen("#3366cc", width=2))
    set_data(curve, list(x), x ** 2, pen=pg.mkPen("#3366cc", width=2))  # equal: skipped
    assert len(calls) == 1
    y = x ** 2
    set_data(curve, x, y, pen=pg.mkPen("#3366cc", width=3))  # another pen
    y[0] = 7.0  # changed in place since
    set_data(curve, x, y, pen=pg.mkPen("#3366cc", width=3))
    set_data(curve, x, y)  # other options given: set
    assert len(calls) == 4
    assert np.array_equal(curve.getData()[1], y)


def chips_of(labels, newline_after=(), group=None) -> list[Chip]:
    chips = [Chip(label, "prompt" if i < 5 else "generated", i, i, None if i < 5 else i - 4, i in newline_after)
             for i, label in enumerate(labels)]
    if group is not None:
        start, end = group
        for chip in chips[start:end]:
            chip.group = group
        chips[start].group_label = "字"
    return chips


def test_chips_added_in_a_run_are_laid_out_and_painted_as_a_whole_canvas(qapp):
    """Each frame keeps the places of the chips before the first change and repaints only what changed: the
    places equal a fresh canvas's, and the screen equals a full render of the canvas."""
    appearance = Appearance()
    canvas = ChipCanvas(appearance)
    canvas.resize(420, 320)
    canvas.show()
    words = [f"·w{i % 13}" * (1 + i % 3) for i in range(90)]
    frames = [
        chips_of(words[:10]),
        chips_of(words[:25], newline_after=(12,)),
        chips_of(words[:40], newline_after=(12,)),
        chips_of(words[:40], newline_after=(12, 30)),  # a chip in the middle changed: re-laid from there
        chips_of(words[:3] + ["·other"] + words[4:55], newline_after=(12, 30)),
        chips_of(words[:70], newline_after=(12, 30), group=(60, 62)),
        chips_of(words[:90], newline_after=(12, 30), group=(60, 62)),
        chips_of(words[:50]),  # a rewind: fewer chips
    ]
    for k, chips in enumerate(frames):
        newest = len(chips) - 1
        canvas.set_chips(chips, {}, newest, None)
        settle()
        fresh = ChipCanvas(appearance)
        fresh.resize(canvas.size())
        fresh.set_chips([replace(c, rect=None) for c in chips], {}, newest, None)
        assert [c.rect for c in canvas.chips] == [c.rect for c in fresh.chips], k
        assert canvas.cursor_rect == fresh.cursor_rect
        assert same_pixels(on_screen(canvas), canvas.grab().toImage()), k
    canvas.set_chips(frames[-1], {}, 20, 16)  # a step selected: everything repainted
    settle()
    assert same_pixels(on_screen(canvas), canvas.grab().toImage())
    canvas.close()


@pytest.mark.parametrize("width", [300, 520])
def test_chips_laid_out_again_at_another_width_start_over(qapp, width):
    appearance = Appearance()
    canvas = ChipCanvas(appearance)
    canvas.resize(420, 300)
    chips = chips_of([f"·t{i}" for i in range(60)])
    canvas.set_chips(chips, {}, 59, None)
    canvas.resize(width, 300)
    more = chips_of([f"·t{i}" for i in range(70)])
    canvas.set_chips(more, {}, 69, None)
    fresh = ChipCanvas(appearance)
    fresh.resize(width, 300)
    fresh.set_chips(chips_of([f"·t{i}" for i in range(70)]), {}, 69, None)
    assert [c.rect for c in canvas.chips] == [c.rect for c in fresh.chips]


def test_chips_in_a_scroll_area_that_follows_the_newest_line_show_what_a_full_render_shows(qapp):
    """As in the Context view: the canvas grows a line and the area scrolls to it (Qt moves what is drawn
    and paints the uncovered line), then the area is made narrower (every chip placed and painted again)."""
    appearance = Appearance()
    canvas = ChipCanvas(appearance)
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOn)
    area.setWidget(canvas)
    area.resize(420, 150)
    area.show()
    words = [f"·w{i % 11}" * (1 + i % 2) for i in range(200)]
    for n in range(10, 200, 12):
        canvas.set_chips(chips_of(words[:n], newline_after=(40, 41)), {}, n - 1, n - 5)
        settle()
        area.verticalScrollBar().setValue(area.verticalScrollBar().maximum())
        settle()
        assert same_pixels(on_screen(area), area.grab().toImage()), n
    area.resize(300, 150)
    settle()
    assert same_pixels(on_screen(area), area.grab().toImage())
    area.close()


def test_a_frame_processes_the_scenes_of_the_plots_on_screen_and_forgets_deleted_ones(qapp):
    from shiboken6 import delete

    from gui.widgets.frame_paint import shown_scenes
    from gui.widgets.plotting import make_plot

    plots = [make_plot(Appearance()) for _ in range(2)]
    plots[0].show()
    settle()
    scenes = shown_scenes()
    assert plots[0].scene() in scenes and plots[1].scene() not in scenes  # made, not shown
    plots[1].show()
    settle()
    assert plots[1].scene() in shown_scenes()
    delete(plots[0])
    assert len(shown_scenes()) == len(scenes)  # the deleted one gone, the shown one in
