"""A bar chart painted with QPainter, as the Serving dock's canvases are: a title, two axes and sets of bars
in data coordinates, and text at data points.

A pyqtgraph plot costs a frame of a Run several ms of GUI CPU where a chart's bars change (its scene's items
processed, its view box and axes laid out in Python, the graphics view's paint in C++); this one keeps what
it shows as a few arrays and paints them in one pass (~0.3 ms at 1600x1000). A frame that sets the same bars
again paints nothing (`update` only on a change), and one that changes a few bars or labels of a set (a new
step's bar, the shown step's band moved) paints only where they were and are, as a graphics scene does.

Axes: x runs left to right; y runs up, or down where `rows` names the rows (row i at y = i, top to bottom: a
chart of named rows, like pyqtgraph's inverted y with a left axis of names). Ticks are given, or chosen at
round values (1, 2, 5 x 10^k) as far apart as the labels need. A strip without a y axis (`y_axis=False`: the
timeline's blocks, whose height means nothing) gives the data area the room. An empty chart (no bar has a point)
draws no axes: a range over nothing means nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, QSize, QSizeF, Qt
from PySide6.QtGui import (QBrush, QColor, QFont, QFontMetricsF, QPainter, QPainterPath, QPainterPathStroker, QPen,
                           QPolygonF, QStaticText, QTextDocument, QTransform)
from PySide6.QtWidgets import QSizePolicy, QWidget

from gui.theme import Appearance
from gui.widgets.plotting import TextWidths, text_size

TICK = 5.0  # px a tick mark reaches out of its axis
LABEL_MARGIN = 4.0  # px around a label's text (as pyqtgraph's TextItem's)
GAP = 3.0  # px between a tick mark and its text, and around the title and the axis label


def equal(a: np.ndarray, b: np.ndarray) -> bool:
    """The same values, bit for bit (a frame's few bars: np.array_equal's checks cost more than the comparison;
    -0.0 against 0.0 reads as a change, which only paints again)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@dataclass(frozen=True)
class BarSet:
    """Bars of one colour: bar i spans x0[i] .. x0[i] + width[i], y0[i] .. y0[i] + height[i] (data units)."""
    x0: np.ndarray
    y0: np.ndarray
    width: np.ndarray
    height: np.ndarray
    colour: str
    alpha: int = 255
    outline: str | None = None  # a pen's colour around each bar (None: no outline)
    outline_width: float = 1.0
    hatched: bool = False  # diagonal lines of the colour instead of a fill (a re-read, on the timeline)

    def styled_as(self, other: BarSet | None) -> bool:
        return (other is not None and self.colour == other.colour and self.alpha == other.alpha
                and self.outline == other.outline and self.outline_width == other.outline_width
                and self.hatched == other.hatched)

    def same(self, other: BarSet | None) -> bool:
        return (self.styled_as(other)
                and all(equal(a, b) for a, b in ((self.x0, other.x0), (self.y0, other.y0),
                                                          (self.width, other.width), (self.height, other.height))))


def bar_set(colour: str, x0, y0, width, height, alpha: int = 255, outline: str | None = None,
            outline_width: float = 1.0, hatched: bool = False) -> BarSet:
    """Scalars are repeated for every bar (as pyqtgraph's BarGraphItem takes them); no width, no bars."""
    arrays = [np.atleast_1d(np.asarray(v, dtype=float)) for v in (x0, y0, width, height)]
    n = 0 if min(len(a) for a in arrays) == 0 else max(len(a) for a in arrays)
    x0, y0, width, height = (np.full(n, a[0]) if len(a) == 1 and n != 1 else a[:n] for a in arrays)
    return BarSet(x0, y0, width, height, colour, alpha, outline, outline_width, hatched)


@dataclass(frozen=True)
class ChartText:
    """Text at a data point; `anchor` (0..1 of its box, LABEL_MARGIN px around the text) sits at the point, as
    pyqtgraph's TextItem's."""
    text: str
    x: float
    y: float
    anchor: tuple[float, float] = (0.0, 0.5)
    colour: str | None = None  # None: the theme's text colour


@dataclass(frozen=True)
class Series:
    """A line through points (x[i], y[i]), dashed or solid, with a dot of `dots` px at each point (0: none)."""
    x: np.ndarray
    y: np.ndarray
    colour: str
    width: float = 1.0
    alpha: int = 255
    dashed: bool = False
    dots: float = 0.0
    fill: str | None = None  # the area down to y = 0 filled in this colour

    def styled_as(self, other: Series | None) -> bool:
        return (other is not None and (self.colour, self.width, self.alpha, self.dashed, self.dots, self.fill)
                == (other.colour, other.width, other.alpha, other.dashed, other.dots, other.fill))

    def same(self, other: Series | None) -> bool:
        return self.styled_as(other) and equal(self.x, other.x) and equal(self.y, other.y)


def series(colour: str, x, y, width: float = 1.0, alpha: int = 255, dashed: bool = False, dots: float = 0.0,
           fill: str | None = None) -> Series:
    return Series(np.asarray(x, dtype=float), np.asarray(y, dtype=float), colour, width, alpha, dashed, dots, fill)


@dataclass(frozen=True)
class Marker:
    """A vertical line across the data area at x (the draw's u)."""
    x: float
    colour: str
    width: float = 1.0


def round_ticks(lo: float, hi: float, px: float, room_px: float) -> list[float]:
    """Values at a round step (1, 2, 5 x 10^k) in lo..hi, at least room_px apart on an axis px long."""
    span = hi - lo
    if span <= 0 or px <= 0:
        return []
    raw = span * max(room_px, 1.0) / px  # the smallest step that keeps ticks room_px apart
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 10) for k in range(first, int(math.floor(hi / step + 1e-9)) + 1)]


def many(changed: int, of: int) -> bool:
    """More than a few of the items changed, and most of them: repainted whole, not measured one by one."""
    return changed > 4 and 2 * changed > of


def tick_text(value: float) -> str:
    return f"{value:g}"


class BarChart(QWidget):
    def __init__(self, appearance: Appearance, rows: bool = False, y_axis: bool = True):
        super().__init__()
        self.appearance = appearance
        self.rows_axis = rows
        self.y_axis = y_axis  # False: no y axis drawn, nor room kept for it
        self.title = ""
        self.bottom_label = ""
        self.left_label = ""  # written up the left edge
        self.x_range, self.y_range = (0.0, 1.0), (0.0, 1.0)
        self.x_ticks: list[tuple[float, str]] | None = None  # None: round values
        self.y_ticks: list[tuple[float, str]] | None = None  # the rows' names where `rows`
        self.bars: dict[str, BarSet] = {}
        self.labels: list[ChartText] = []
        self.markers: list[Marker] = []
        self.series: dict[str, Series] = {}
        self._title_text: tuple[str, QTextDocument] | None = None  # a rich-text title, laid out once
        self.left_axis_px: float | None = None  # a fixed width for the y axis's names (None: the widest name's)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.setAttribute(Qt.WA_OpaquePaintEvent)  # the paint fills the whole widget
        self._label_font: QFont | None = None
        self._font_key, self._font_metrics = "", None
        appearance.changed.connect(self._restyled)
        self._widths: TextWidths | None = None  # made with the font (_font)
        self._elisions: dict[tuple[str, float], str] = {}
        self._statics: dict[str, QStaticText] = {}  # each text laid out in the labels' font (_draw_text)
        self._rect_key, self._rect = None, QRectF()
        self._dirty, self._dirty_all = QRect(), False  # marked to paint again since the last paint (_mark)

    def sizeHint(self) -> QSize:
        return QSize(300, 160)

    # --- what it shows: each setter repaints only on a change -------------------------------------------
    def _mark(self, rect: QRect | None = None) -> None:
        """Pixels to paint again (None: all of the chart). A frame's marks add up to one rectangle, and past half
        the chart to all of it: a region of many small rectangles (Candidates' changed bars and words) clipped
        every fill and text of the paint, and cost it more than painting everything."""
        if self._dirty_all:
            return
        if rect is not None and not self._dirty.isNull():
            rect = self._dirty.united(rect)
        if rect is None or rect.width() * rect.height() > 0.5 * self.width() * self.height():
            self._dirty_all = True
            self.update()
            return
        self._dirty = rect
        self.update(rect)

    def _set(self, name: str, value) -> None:
        if getattr(self, name) != value:
            setattr(self, name, value)
            self._mark()

    def set_title(self, title: str) -> None:
        self._set("title", title)

    def set_bottom_label(self, label: str) -> None:
        self._set("bottom_label", label)

    def set_left_label(self, label: str) -> None:
        self._set("left_label", label)

    def set_range(self, x: tuple[float, float] | None = None, y: tuple[float, float] | None = None) -> None:
        if x is not None:
            self._set("x_range", (float(x[0]), float(x[1])))
        if y is not None:
            self._set("y_range", (float(y[0]), float(y[1])))

    def set_x_ticks(self, ticks: list[tuple[float, str]] | None) -> None:
        self._set("x_ticks", None if ticks is None else [(float(v), str(t)) for v, t in ticks])

    def set_y_ticks(self, ticks: list[tuple[float, str]] | None) -> None:
        """The rows' names (row i at y = i) on a chart of rows; else the y axis's ticks."""
        self._set("y_ticks", None if ticks is None else [(float(v), str(t)) for v, t in ticks])

    def set_bars(self, key: str, bars: BarSet) -> None:
        old = self.bars.get(key)
        if bars.same(old):
            return
        had_data = self.holds_data()
        self.bars[key] = bars
        if not bars.styled_as(old) or self.holds_data() != had_data:  # another look, or the axes come or go
            self._mark()
            return
        if self._dirty_all:
            return  # painted whole already
        # the bars that differ, where they were and where they are (the rest is painted as it was)
        common = min(len(old.x0), len(bars.x0))
        differ = np.zeros(common, dtype=bool)
        for a, b in ((old.x0, bars.x0), (old.y0, bars.y0), (old.width, bars.width), (old.height, bars.height)):
            differ |= a[:common] != b[:common]
        changed = np.flatnonzero(differ)
        if many(len(changed) + abs(len(old.x0) - len(bars.x0)), max(len(old.x0), len(bars.x0))):
            self._mark()  # most bars changed (Candidates' at each step): measuring where costs more than it saves
            return
        for shown, extra in ((old, np.arange(common, len(old.x0))), (bars, np.arange(common, len(bars.x0)))):
            at = np.concatenate([changed, extra])
            if len(at):
                self._mark(self._bars_px(shown, at))

    def _bars_px(self, bars: BarSet, at: np.ndarray) -> QRect:
        """The pixels bars[at] cover, their outline and a pixel of rounding included."""
        area = self.plot_rect()
        (x_lo, x_hi), (y_lo, y_hi) = self.x_range, self.y_range
        sx, sy = area.width() / (x_hi - x_lo or 1.0), area.height() / (y_hi - y_lo or 1.0)
        # in Python floats: a frame's few changed bars cost more in numpy's calls than in the arithmetic
        x0, width, y0, height = (bars.x0[at].tolist(), bars.width[at].tolist(), bars.y0[at].tolist(),
                                 bars.height[at].tolist())
        xs = x0 + [a + b for a, b in zip(x0, width)]
        ys = y0 + [a + b for a, b in zip(y0, height)]
        x = [area.left() + (min(xs) - x_lo) * sx, area.left() + (max(xs) - x_lo) * sx]
        y = [(v - y_lo) * sy for v in (min(ys), max(ys))]
        y = [area.top() + v for v in y] if self.rows_axis else [area.bottom() - v for v in y]
        margin = math.ceil(bars.outline_width if bars.outline is not None else 0.0) + 2
        left, right = max(min(x), area.left() - 1), min(max(x), area.right() + 1)
        top, bottom = max(min(y), area.top() - 1), min(max(y), area.bottom() + 1)
        return QRect(math.floor(left) - margin, math.floor(top) - margin, math.ceil(right - left) + 2 * margin + 1,
                     math.ceil(bottom - top) + 2 * margin + 1)

    def clear_bars(self) -> None:
        if any(len(b.x0) for b in self.bars.values()):
            self._mark()
        self.bars = {}

    def set_labels(self, labels: list[ChartText]) -> None:
        """The labels that differ are painted where they were and are."""
        labels = list(labels)
        if labels == self.labels:
            return
        gone, new = set(self.labels) - set(labels), set(labels) - set(self.labels)
        self.labels = labels
        if many(len(gone | new), len(labels)):
            self._mark()
        elif self.holds_data():
            for label in gone | new:
                if label.text and not self._dirty_all:
                    self._mark(self.label_rect(label).toAlignedRect().adjusted(-1, -1, 1, 1))

    def set_series(self, key: str, line: Series) -> None:
        """A line that only grew (a run's new step: its points so far, and one more) paints its new segments; any
        other change paints the chart whole."""
        old = self.series.get(key)
        if line.same(old):
            return
        had_data = self.holds_data()
        self.series[key] = line
        grown = (old is not None and len(old.x) and len(line.x) > len(old.x) and line.styled_as(old)
                 and equal(line.x[:len(old.x)], old.x) and equal(line.y[:len(old.y)], old.y))
        if not grown or self.holds_data() != had_data:
            self._mark()
        elif not self._dirty_all:
            self._mark(self._segments_px(line, len(old.x) - 1))

    def _segments_px(self, line: Series, start: int) -> QRect:
        """The pixels the line covers from point `start` on (its pen, its dots and, where it is filled, the area
        down to y = 0 included)."""
        area = self.plot_rect()
        (x_lo, x_hi), (y_lo, y_hi) = self.x_range, self.y_range
        x = area.left() + (line.x[start:] - x_lo) / (x_hi - x_lo or 1.0) * area.width()
        y = area.bottom() - (np.append(line.y[start:], 0.0 if line.fill is not None else line.y[start]) - y_lo) / (
            y_hi - y_lo or 1.0) * area.height()
        margin = math.ceil(max(line.width, line.dots)) + 2
        left, right = max(float(np.min(x)), area.left() - 1), min(float(np.max(x)), area.right() + 1)
        top, bottom = max(float(np.min(y)), area.top() - 1), min(float(np.max(y)), area.bottom() + 1)
        return QRect(math.floor(left) - margin, math.floor(top) - margin, math.ceil(right - left) + 2 * margin + 1,
                     math.ceil(bottom - top) + 2 * margin + 1)

    def set_markers(self, markers: list[Marker]) -> None:
        self._set("markers", list(markers))

    def holds_data(self) -> bool:
        return any(len(b.x0) for b in self.bars.values()) or any(len(s.x) for s in self.series.values())

    def axes_shown(self) -> bool:
        return self.holds_data()

    # --- geometry -------------------------------------------------------------------------------------
    def _font(self) -> QFont:
        """The labels' font (the plots' tick font), made once per appearance (presentation mode makes it bigger)."""
        if self._label_font is None:
            font = self._label_font = self.appearance.font(0.85)
            self._font_key, self._font_metrics = font.key(), QFontMetricsF(font)
            self._widths, self._elisions, self._statics = TextWidths(self._font_metrics), {}, {}
        return self._label_font

    def metrics(self) -> QFontMetricsF:
        self._font()
        return self._font_metrics

    def _restyled(self) -> None:
        self._label_font = None
        self._title_text = None
        self._mark()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.FontChange, QEvent.ApplicationFontChange):
            self._restyled()

    def plot_rect(self) -> QRectF:
        """The data area, in the widget's pixels (measured again only when what it depends on changed: a frame
        asks several times)."""
        m = self.metrics()
        names = None if self.left_axis_px is not None else (self.y_ticks, self.y_range)  # what the axis is as wide as
        key = (self.width(), self.height(), bool(self.title), bool(self.bottom_label), bool(self.left_label), self._font_key,
               self.left_axis_px, names)
        if key != self._rect_key:
            self._rect_key, self._rect = key, self._measure_plot_rect(m)
        return QRectF(self._rect)

    def _measure_plot_rect(self, m: QFontMetricsF) -> QRectF:
        line = m.height()
        top = GAP + (line + GAP if self.title else 0) + line / 2  # the top tick's text reaches above the area
        tick_texts = 0.0 if self.x_ticks == [] else line + GAP  # none where the x axis is given no ticks
        bottom = self.height() - GAP - tick_texts - TICK - (line + GAP if self.bottom_label else 0)
        if self.left_axis_px is not None or not self.y_axis:
            names = []
        elif self.rows_axis:
            names = [t for _, t in self.y_ticks or []]
        else:
            names = [t for _, t in self._y_ticks(QRectF(0, top, 1, max(bottom - top, 1)))]
        widest = max((m.horizontalAdvance(t) for t in names), default=0.0)
        left = (GAP + widest if self.left_axis_px is None else self.left_axis_px) + GAP + TICK
        left = left if self.y_axis else GAP + m.horizontalAdvance("0")  # the first x tick's text whole
        left += line + GAP if self.left_label else 0
        right = self.width() - GAP - m.horizontalAdvance("0") * 2  # the last x tick's text is centred on it
        return QRectF(left, top, max(right - left, 1.0), max(bottom - top, 1.0))

    def map(self, x: float, y: float, area: QRectF | None = None) -> QPointF:
        """A data point's place in the widget."""
        area = area or self.plot_rect()
        (x_lo, x_hi), (y_lo, y_hi) = self.x_range, self.y_range
        px = area.left() + (x - x_lo) / (x_hi - x_lo or 1.0) * area.width()
        fraction = (y - y_lo) / (y_hi - y_lo or 1.0)
        py = area.top() + fraction * area.height() if self.rows_axis else area.bottom() - fraction * area.height()
        return QPointF(px, py)

    def to_data(self, pos: QPointF) -> QPointF | None:
        """The data point at a place in the widget (None outside the data area)."""
        area = self.plot_rect()
        if not area.contains(pos):
            return None
        (x_lo, x_hi), (y_lo, y_hi) = self.x_range, self.y_range
        x = x_lo + (pos.x() - area.left()) / area.width() * (x_hi - x_lo)
        fraction = (pos.y() - area.top()) / area.height() if self.rows_axis else (area.bottom() - pos.y()) / area.height()
        return QPointF(x, y_lo + fraction * (y_hi - y_lo))

    def data_size(self) -> QSizeF:
        """The data area's size in px."""
        return self.plot_rect().size()

    def _y_ticks(self, area: QRectF) -> list[tuple[float, str]]:
        if self.y_ticks is not None:
            return self.y_ticks
        lo, hi = self.y_range
        return [(v, tick_text(v)) for v in round_ticks(lo, hi, area.height(), 2.5 * self.metrics().height())]

    def _x_ticks(self, area: QRectF) -> list[tuple[float, str]]:
        if self.x_ticks is not None:
            return self.x_ticks
        lo, hi = self.x_range
        widest = self.metrics().horizontalAdvance(tick_text(max(abs(lo), abs(hi))))
        return [(v, tick_text(v)) for v in round_ticks(lo, hi, area.width(), max(2 * widest, 40.0))]

    # --- paint ----------------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        """What reaches into the region to paint again (`event.rect()`: all of it, or where bars or labels changed)."""
        a, t = self.appearance, self.appearance.theme
        dirty = QRectF(event.rect())
        self._dirty, self._dirty_all = QRect(), False
        painter = QPainter(self)
        painter.fillRect(dirty, QColor(t.panel))
        m = self.metrics()
        painter.setFont(self._font())
        line = m.height()
        text = QColor(t.text)
        title = dirty.top() <= GAP + line + 1  # the region painted reaches the title's line
        if title and self.title.startswith("<"):  # rich text (coloured words): laid out once per title, font and colour
            html = f"<span style='color:{t.text}'>{self.title}</span>"
            if self._title_text is None or self._title_text[0] != html:
                document = QTextDocument()
                document.setDocumentMargin(0)
                document.setDefaultFont(self._font())
                document.setHtml(html)
                self._title_text = (html, document)
            document = self._title_text[1]
            width = document.idealWidth()  # one line, centred; cut at the chart's edges where it is wider
            painter.save()
            painter.setClipRect(self.rect())
            painter.translate(max(GAP, (self.width() - width) / 2), GAP)
            document.drawContents(painter)
            painter.restore()
        elif title and self.title:
            painter.setPen(text)
            title = m.elidedText(self.title, Qt.ElideRight, self.width() - 2 * GAP)
            painter.drawText(QRectF(0, GAP, self.width(), line), Qt.AlignHCenter | Qt.AlignVCenter, title)
        if not self.holds_data():
            painter.end()
            return
        area = self.plot_rect()
        painter.save()
        painter.setClipRect(area.adjusted(-1, -1, 1, 1))
        for bars in self.bars.values():
            self._paint_bars(painter, bars, area, dirty)
        for line in self.series.values():
            self._paint_series(painter, line, area, dirty)
        for marker in self.markers:
            x = self.map(marker.x, 0.0, area).x()
            painter.setPen(QPen(QColor(marker.colour), marker.width))
            painter.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()))
        painter.restore()
        self._paint_axes(painter, area, m, text, dirty)
        self._paint_labels(painter, area, m, text, dirty)
        painter.end()

    def _paint_series(self, painter: QPainter, line: Series, area: QRectF, dirty: QRectF) -> None:
        if not len(line.x):
            return
        (x_lo, x_hi), (y_lo, y_hi) = self.x_range, self.y_range
        px = area.left() + (line.x - x_lo) / (x_hi - x_lo or 1.0) * area.width()
        py = area.bottom() - (line.y - y_lo) / (y_hi - y_lo or 1.0) * area.height()
        if not line.dashed and not dirty.contains(area) and len(px) > 8 and bool(np.all(px[1:] >= px[:-1])):
            # x in order (a line over steps or positions): the points that reach into the region painted, and two
            # more each side (their segments, joins and caps); a run's new point repainted a line of every step.
            # (Not a dashed line: its dashes would start again where the slice begins.)
            pad = max(line.width, line.dots) + 2.0
            lo = max(int(np.searchsorted(px, dirty.left() - pad, "left")) - 2, 0)
            hi = min(int(np.searchsorted(px, dirty.right() + pad, "right")) + 2, len(px))
            px, py = px[lo:hi], py[lo:hi]
        px, py = px.tolist(), py.tolist()
        points = QPolygonF([QPointF(x, y) for x, y in zip(px, py)])
        colour = QColor(line.colour)
        colour.setAlpha(line.alpha)
        painter.setRenderHint(QPainter.Antialiasing, True)
        if line.fill is not None:
            base = area.bottom() - (0.0 - y_lo) / (y_hi - y_lo or 1.0) * area.height()
            painter.setPen(Qt.NoPen)
            painter.setBrush(QColor(line.fill))
            painter.drawPolygon(QPolygonF([QPointF(px[0], base), *points, QPointF(px[-1], base)]))
        pen = QPen(colour, line.width)
        if line.dashed:  # the dashes as a shape, filled: a stroke's dashes start again where a paint's clip begins
            pen.setStyle(Qt.DashLine)
            path = QPainterPath()
            path.addPolygon(points)
            painter.fillPath(QPainterPathStroker(pen).createStroke(path), colour)
        else:
            painter.setPen(pen)
            painter.drawPolyline(points)
        if line.dots:  # round dots: points drawn with a pen as wide as a dot, round-capped
            dot = QPen(colour, line.dots)
            dot.setCapStyle(Qt.RoundCap)
            painter.setPen(dot)
            painter.drawPoints(points)
        painter.setRenderHint(QPainter.Antialiasing, False)

    def _paint_bars(self, painter: QPainter, bars: BarSet, area: QRectF, dirty: QRectF) -> None:
        if not len(bars.x0):
            return
        (x_lo, x_hi), (y_lo, y_hi) = self.x_range, self.y_range
        sx, sy = area.width() / (x_hi - x_lo or 1.0), area.height() / (y_hi - y_lo or 1.0)
        left = area.left() + (bars.x0 - x_lo) * sx
        right = left + bars.width * sx
        if self.rows_axis:
            top = area.top() + (bars.y0 - y_lo) * sy
            bottom = top + bars.height * sy
        else:
            bottom = area.bottom() - (bars.y0 - y_lo) * sy
            top = bottom - bars.height * sy
        x1, y1 = np.minimum(left, right), np.minimum(top, bottom)
        w, h = np.abs(right - left), np.abs(bottom - top)
        if not dirty.contains(area):  # a part painted again: the bars that reach into it
            pad = bars.outline_width + 1.0 if bars.outline is not None else 1.0
            at = ((x1 - pad <= dirty.right()) & (x1 + w + pad >= dirty.left()) & (y1 - pad <= dirty.bottom())
                  & (y1 + h + pad >= dirty.top()))
            if not at.any():
                return
            x1, y1, w, h = x1[at], y1[at], w[at], h[at]
        colour = QColor(bars.colour)
        colour.setAlpha(bars.alpha)
        painter.setPen(Qt.NoPen if bars.outline is None else QPen(QColor(bars.outline), bars.outline_width))
        painter.setBrush(QBrush(colour, Qt.BDiagPattern) if bars.hatched else colour)
        painter.drawRects([QRectF(*r) for r in zip(x1.tolist(), y1.tolist(), w.tolist(), h.tolist())])

    def _advance(self, text: str) -> float:
        """A text's width in the labels' font, measured once per text (a step's names and labels mostly repeat)."""
        self._font()
        return self._widths(text)

    def _draw_text(self, painter: QPainter, x: float, top: float, text: str) -> None:
        """One line of text whose line box's top left is at (x, top), laid out once per text and font: a chart's
        names, ticks and labels mostly repeat from frame to frame, and QPainter.drawText(point, text) shaped
        the text again at each call."""
        static = self._statics.get(text)
        if static is None:
            if len(self._statics) > 1024:
                self._statics.clear()
            static = self._statics[text] = QStaticText(text)
            static.setTextFormat(Qt.PlainText)
            static.prepare(QTransform(), self._font())
        painter.drawStaticText(QPointF(x, top), static)

    def _elided(self, text: str, room: float) -> str:
        key = (text, room)
        elided = self._elisions.get(key)
        if elided is None:
            if len(self._elisions) > 4096:
                self._elisions.clear()
            elided = self._elisions[key] = self.metrics().elidedText(text, Qt.ElideRight, room)
        return elided

    def _paint_axes(self, painter: QPainter, area: QRectF, m: QFontMetricsF, text: QColor, dirty: QRectF) -> None:
        """The axes' lines and ticks; their words where the region painted reaches them."""
        line, ascent = m.height(), m.ascent()
        painter.setPen(QPen(QColor(self.appearance.theme.grid)))
        painter.drawLine(area.bottomLeft(), area.bottomRight())
        if self.y_axis:
            painter.drawLine(area.topLeft(), area.bottomLeft())
        x_ticks = [(self.map(v, self.y_range[0], area).x(), s) for v, s in self._x_ticks(area)]
        x_ticks = [(x, s) for x, s in x_ticks if area.left() - 0.5 <= x <= area.right() + 0.5]
        y_ticks = [(self.map(self.x_range[0], v, area).y(), s) for v, s in self._y_ticks(area)] if self.y_axis else []
        y_ticks = [(y, s) for y, s in y_ticks if area.top() - 0.5 <= y <= area.bottom() + 0.5]
        for x, _ in x_ticks:
            painter.drawLine(QPointF(x, area.bottom()), QPointF(x, area.bottom() + TICK))
        for y, _ in y_ticks:
            painter.drawLine(QPointF(area.left() - TICK, y), QPointF(area.left(), y))
        painter.setPen(text)
        below = area.bottom() + TICK + GAP
        right = area.left() - TICK - GAP
        if dirty.bottom() < below:
            x_ticks = []  # their words are below the region painted
        if dirty.left() > right:
            y_ticks = []  # and these left of it
        for x, s in x_ticks:
            self._draw_text(painter, x - self._advance(s) / 2, below, s)
        for y, s in y_ticks:
            s = self._elided(s, right - GAP) if self.left_axis_px is not None else s
            self._draw_text(painter, right - self._advance(s), y - line / 2, s)
        if self.bottom_label and dirty.bottom() >= below:
            painter.drawText(QRectF(area.left(), below + line + GAP, area.width(), line), Qt.AlignCenter,
                             self.bottom_label)
        if self.left_label and dirty.left() <= GAP + line:  # turned a quarter left, centred on the data area's height
            painter.save()
            painter.translate(GAP, area.center().y())
            painter.rotate(-90)
            painter.drawText(QRectF(-area.height() / 2, 0, area.height(), line), Qt.AlignCenter, self.left_label)
            painter.restore()

    def _paint_labels(self, painter: QPainter, area: QRectF, m: QFontMetricsF, text: QColor, dirty: QRectF) -> None:
        ascent = m.ascent()
        whole = dirty.contains(QRectF(self.rect()))
        for label in self.labels:
            if not label.text:
                continue
            box = self.label_rect(label, area)
            if not whole and not box.intersects(dirty):
                continue
            painter.setPen(text if label.colour is None else QColor(label.colour))
            if "\n" in label.text:
                painter.drawText(box.adjusted(LABEL_MARGIN, LABEL_MARGIN, -LABEL_MARGIN, -LABEL_MARGIN),
                                 Qt.AlignLeft | Qt.AlignTop, label.text)
            else:
                self._draw_text(painter, box.left() + LABEL_MARGIN, box.top() + LABEL_MARGIN, label.text)

    def label_rect(self, label: ChartText, area: QRectF | None = None) -> QRectF:
        """Where a label is drawn (its margin included), in the widget's pixels."""
        at = self.map(label.x, label.y, area)
        if "\n" in label.text:
            size = text_size(self._font(), label.text)
            w, h = size.width(), size.height()
        else:
            w, h = self._advance(label.text), self.metrics().height()
        w, h = w + 2 * LABEL_MARGIN, h + 2 * LABEL_MARGIN
        return QRectF(at.x() - label.anchor[0] * w, at.y() - label.anchor[1] * h, w, h)
