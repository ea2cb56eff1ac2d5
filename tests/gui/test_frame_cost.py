"""What a Run's frames skip to cost less GUI time (plotting.py, chip_canvas.py), checked against
doing the whole work: the same sizes, the same bars and curves, the same chips, the same pixels on screen."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from gui.theme import Appearance
from gui.widgets.chip_canvas import Chip, ChipCanvas
from gui.widgets.plotting import Bars, StyledBars, set_data

def settle():
    for _ in range(4):
        QApplication.processEvents()


def on_screen(widget: QWidget) -> QImage:
    """What the window's backing store holds (the offscreen platform grabs it): the frames' paints as they
    accumulated, not a fresh render."""
    return widget.screen().grabWindow(widget.winId()).toImage()


def same_pixels(a: QImage, b: QImage) -> bool:
    return a.convertToFormat(QImage.Format_RGB32) == b.convertToFormat(QImage.Format_RGB32)


class Plot:
    """A plot to render items in, kept alive with them (its scene owns them)."""

    def __init__(self, size=(160, 80), view=(0, 0, 12, 6)):
        self.widget = pg.PlotWidget()
        self.widget.resize(*size)
        self.widget.setXRange(view[0], view[2], padding=0)
        self.widget.setYRange(view[1], view[3], padding=0)
        self.widget.getPlotItem().hideAxis("left")
        self.widget.getPlotItem().hideAxis("bottom")

    def render(self, *items) -> QImage:
        for item in items:
            self.widget.addItem(item)
        image = QImage(self.widget.size(), QImage.Format_ARGB32)
        image.fill(0)
        painter = QPainter(image)
        self.widget.render(painter)
        painter.end()
        for item in items:
            self.widget.removeItem(item)
        return image


@pytest.fixture
def rebuilt(monkeypatch):
    """How many times pyqtgraph's BarGraphItem was set up again (its bars prepared, its picture dropped)."""
    calls = []
    original = pg.BarGraphItem.setOpts
    monkeypatch.setattr(pg.BarGraphItem, "setOpts", lambda self, **opts: (calls.append(opts), original(self, **opts)))
    return calls


def test_bars_set_again_as_they_are_are_left_alone_and_changed_ones_draw_anew(qapp, rebuilt):
    plot, x = Plot(), np.arange(1.0, 9.0)
    bars = Bars(x=x, height=x / 2, width=0.6, brush=QColor("#3366cc"), pen=None)
    bars.setOpts(x=list(x), height=x.copy() / 2, width=0.6, brush=QColor("#3366cc"), pen=None)  # equal, new objects
    assert len(rebuilt) == 1
    bars.setOpts(x=[], height=[])  # then changed: drawn anew, as the item it replaces draws it
    bars.setOpts(x=x, height=x / 3, brush=QColor("#dc3912"))
    assert len(rebuilt) == 3
    plain = pg.BarGraphItem(x=x, height=x / 3, width=0.6, brush=QColor("#dc3912"), pen=None)
    assert plot.render(bars) == plot.render(plain)
    height = x / 4
    bars.setOpts(height=height)
    height[2] = 5.0  # the caller's array changed in place: not the bars shown
    bars.setOpts(height=height)
    assert len(rebuilt) == 6  # (the plain item's own)
    assert plot.render(bars) == plot.render(pg.BarGraphItem(x=x, height=height, width=0.6, brush=QColor("#dc3912"),
                                                            pen=None))


def test_styled_bars_in_new_styles_draw_anew(qapp, rebuilt):
    plot, x = Plot(), np.arange(1.0, 6.0)
    fills = [QColor("#3366cc"), QColor("#dc3912")]
    styled = StyledBars(x=[], height=[], width=0.7)
    styled.set_bars([0, 1, 0, 1, 0], [(None, fills[0]), (None, fills[1])], x=x, height=x, width=0.7)
    count = len(rebuilt)
    styled.set_bars([0, 1, 0, 1, 0], [(None, QColor(fills[0])), (None, QColor(fills[1]))], x=x, height=x, width=0.7)
    assert len(rebuilt) == count  # the same bars in the same styles
    styled.set_bars([1, 1, 0, 0, 0], [(None, fills[0]), (None, fills[1])], x=x, height=x, width=0.7)
    assert len(rebuilt) == count + 1
    plain = pg.BarGraphItem(x=x, height=x, width=0.7, brushes=[fills[s] for s in (1, 1, 0, 0, 0)],
                            pens=[pg.mkPen(None)] * 5)
    assert plot.render(styled) == plot.render(plain)


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
