"""bar_chart.BarChart, the painted chart of Candidates and the KV cache: where it draws bars, labels and lines,
what a point of it is in data units, and that a frame setting the same data again paints nothing."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QObject, QPointF
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication

from gui.theme import Appearance
from gui.widgets.bar_chart import BarChart, ChartText, Marker, bar_set, round_ticks, series


@pytest.fixture
def appearance(qapp):
    return Appearance()


def pixel(image: QImage, point: QPointF) -> str:
    return QColor(image.pixel(point.toPoint())).name()


def test_round_ticks_are_as_far_apart_as_their_room_asks():
    assert round_ticks(-0.02, 1.02, 330, 56) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert round_ticks(0, 50, 150, 37) == [0, 20, 40]
    assert round_ticks(0, 1, 0, 10) == [] and round_ticks(1, 1, 100, 10) == []


@pytest.mark.parametrize("rows", [False, True])
def test_bars_are_drawn_where_the_chart_maps_their_data(appearance, rows):
    t = appearance.theme
    chart = BarChart(appearance, rows=rows)
    chart.resize(300, 200)
    chart.set_range(x=(0, 10), y=(0, 4))
    assert not chart.axes_shown()  # nothing to show: no axes
    chart.set_bars("a", bar_set(t.final, [1.0, 5.0], [0.5, 1.0], 2.0, [1.0, 2.0]))
    assert chart.axes_shown()
    image = chart.grab().toImage()
    assert pixel(image, chart.map(2.0, 1.0)) == QColor(t.final).name()  # inside the first bar
    assert pixel(image, chart.map(6.0, 2.5)) == QColor(t.final).name()  # inside the second
    assert pixel(image, chart.map(4.0, 1.0)) == QColor(t.panel).name()  # between them
    at = chart.map(2.0, 1.0)
    assert chart.to_data(at).x() == pytest.approx(2.0, abs=0.05) and chart.to_data(at).y() == pytest.approx(1.0, abs=0.05)
    # rows run down (row 0 at the top), values up
    assert (chart.map(0, 0).y() < chart.map(0, 3).y()) == rows
    assert chart.to_data(QPointF(0, 0)) is None  # outside the data area


def test_labels_sit_at_their_anchor_and_markers_and_series_are_drawn(appearance):
    t = appearance.theme
    chart = BarChart(appearance)
    chart.resize(300, 200)
    chart.set_range(x=(0, 1), y=(0, 1))
    chart.set_labels([ChartText("u = 0.5", 0.5, 1.0, (0, 0)), ChartText("end", 0.5, 0.5, (1, 0.5))])
    chart.set_markers([Marker(0.25, t.chosen, 3)])
    chart.set_series("line", series(t.warning, [0, 1], [0.1, 0.1], 3))
    first, second = (chart.label_rect(label) for label in chart.labels)
    assert first.topLeft() == chart.map(0.5, 1.0)
    assert second.right() == pytest.approx(chart.map(0.5, 0.5).x()) and second.center().y() == pytest.approx(
        chart.map(0.5, 0.5).y())
    image = chart.grab().toImage()
    assert pixel(image, chart.map(0.25, 0.6)) == QColor(t.chosen).name()
    assert pixel(image, chart.map(0.75, 0.1)) == QColor(t.warning).name()


class Paints(QObject):
    def __init__(self, widget):
        super().__init__()
        self.count = 0
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        self.count += event.type() == QEvent.Paint
        return False


def test_the_same_data_set_again_paints_nothing_and_new_data_repaints(appearance):
    chart = BarChart(appearance)
    chart.resize(200, 120)
    chart.show()
    paints = Paints(chart)
    x = np.arange(4.0)

    def frame(bars, labels):
        chart.set_bars("a", bar_set("#3366cc", x, 0.0, 0.8, bars))
        chart.set_labels([ChartText(text, 0, 0) for text in labels])
        chart.set_range(x=(-1, 4), y=(0, 4))
        for _ in range(3):
            QApplication.processEvents()
        return paints.count

    first = frame(x.copy(), ["a"])
    assert frame(x.copy(), ["a"]) == first  # equal arrays and labels, new objects: no paint
    assert frame(x / 2, ["a"]) > first
    chart.close()


def test_a_rich_title_is_one_line(appearance):
    chart = BarChart(appearance)
    chart.resize(400, 150)
    chart.set_title("<span style='color:#ff0000'>━ used</span> and <span style='color:#0000ff'>╌ allocated</span> vs context")
    chart.set_series("a", series("#00aa00", [0, 1], [0, 1]))
    image = chart.grab().toImage()
    panel = QColor(appearance.theme.panel).rgb()
    top = chart.plot_rect().top()
    inked = [y for y in range(int(top)) if any(image.pixel(x, y) != panel for x in range(chart.width()))]
    assert inked and max(inked) - min(inked) < 1.6 * chart.metrics().height()
    # and nothing of it runs down into the data area (the series crosses the middle third lower down)
    middle = range(chart.width() // 3, 2 * chart.width() // 3)
    below = range(int(top) + 1, int(top + 2 * chart.metrics().height()))
    assert all(image.pixel(x, y) == panel for x in middle for y in below)


def test_hatched_bars_and_a_chart_without_a_y_axis(appearance):
    """The timeline's strip: re-reads hatched (lines of their colour over the panel, outlined), and no y axis, its
    room given to the data."""
    t = appearance.theme
    chart = BarChart(appearance, y_axis=False)
    chart.resize(300, 100)
    chart.set_range(x=(0, 10), y=(0, 1))
    chart.set_bars("re-read", bar_set(t.accent, 1.0, 0.0, 8.0, 1.0, outline=t.accent, hatched=True))
    with_axis = BarChart(appearance)
    with_axis.resize(300, 100)
    with_axis.set_range(x=(0, 10), y=(0, 1))
    assert chart.plot_rect().left() < with_axis.plot_rect().left()
    image = chart.grab().toImage()
    left, right = chart.map(2.0, 0.5), chart.map(8.0, 0.5)
    inside = {QColor(image.pixel(x, int(left.y()))).name() for x in range(int(left.x()), int(right.x()))}
    assert {QColor(t.accent).name(), QColor(t.panel).name()} <= inside  # lines, and the panel between them
    edge = int(chart.map(1.0, 0.5).x())  # its outline: a whole column of the colour at the left edge
    column = [{QColor(image.pixel(x, y)).name() for y in range(int(chart.map(1, 0.9).y()), int(chart.map(1, 0.1).y()))}
              for x in range(edge - 1, edge + 2)]
    assert {QColor(t.accent).name()} in column


class Regions(QObject):
    """The rectangles of a widget's paints."""

    def __init__(self, widget):
        super().__init__()
        self.rects = []
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Paint:
            self.rects.append(event.rect())
        return False


def test_a_chart_changed_in_parts_paints_only_them_and_shows_what_a_whole_paint_shows(appearance):
    """A frame of a Run moves the shown step's band, adds a step's bar and a block's words: the chart paints where
    they were and are, and the screen (the window's backing store, painted in parts) holds what one paint of the
    whole chart draws."""
    t = appearance.theme
    chart = BarChart(appearance)
    chart.resize(320, 180)
    chart.set_title("title")
    chart.set_bottom_label("step")
    chart.set_left_label("ms")
    x = np.arange(1.0, 11.0)
    chart.set_range(x=(0, 12), y=(0, 10))

    def frame(band: float, n: int, words: str) -> None:
        chart.set_bars("band", bar_set(t.selected, band - 0.5, 0.0, 1.0, 10.0, alpha=50))
        chart.set_bars("steps", bar_set(t.final, x[:n] - 0.35, 0.0, 0.7, x[:n] * 0.8, outline=t.final))
        chart.set_bars("draws", bar_set(t.warning, x[:n] - 0.35, x[:n] * 0.8, 0.7, 0.5))
        chart.set_labels([ChartText("first", 2.0, 9.5, (0.5, 0.5)), ChartText(words, 8.0, 9.5, (0.5, 0.5))])

    frame(4.0, 8, "eight")
    chart.show()
    for _ in range(4):
        QApplication.processEvents()
    regions = Regions(chart)
    frame(9.0, 9, "nine")
    for _ in range(4):
        QApplication.processEvents()
    assert regions.rects and all(r.width() * r.height() < 0.5 * chart.width() * chart.height() for r in regions.rects)
    on_screen = chart.screen().grabWindow(chart.winId()).toImage().convertToFormat(QImage.Format_RGB32)
    assert on_screen == chart.grab().toImage().convertToFormat(QImage.Format_RGB32)
    chart.close()


def test_a_line_that_grows_paints_its_new_segments_and_shows_what_a_whole_paint_shows(appearance):
    """A Run's frame adds a point to KV's used and allocated lines and to Stop's p(EOS): the chart paints the new
    segments (a filled line: down to y = 0), and the screen holds what one paint of the whole chart draws."""
    t = appearance.theme
    chart = BarChart(appearance)
    chart.resize(320, 180)
    chart.set_range(x=(0, 40), y=(0, 1))
    x = np.arange(1.0, 31.0)
    y = 0.5 + 0.4 * np.sin(x / 3)

    def frame(n: int) -> None:
        chart.set_series("filled", series(t.chosen, x[:n], y[:n], 2.0, fill=t.removed))
        chart.set_series("dotted", series(t.final, x[:n], y[:n] * 0.5, 2.5, dots=5.0))
        chart.set_series("dashed", series(t.warning, x[:n], y[:n] * 0.8, 1.5, dashed=True))

    frame(20)
    chart.show()
    for _ in range(4):
        QApplication.processEvents()
    for n in (21, 22, 25):
        regions = Regions(chart)
        frame(n)
        for _ in range(4):
            QApplication.processEvents()
        assert regions.rects and all(r.width() < 0.5 * chart.width() for r in regions.rects)
        on_screen = chart.screen().grabWindow(chart.winId()).toImage().convertToFormat(QImage.Format_RGB32)
        assert on_screen == chart.grab().toImage().convertToFormat(QImage.Format_RGB32)
    regions = Regions(chart)
    frame(10)  # not a growth (a rewind): the whole chart
    for _ in range(4):
        QApplication.processEvents()
    assert any(r.width() == chart.width() for r in regions.rects)
    chart.close()
