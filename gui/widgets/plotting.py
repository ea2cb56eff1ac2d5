"""Shared pyqtgraph set-up: themed plots with fixed ranges, no mouse zoom, reusable items."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, QSizeF, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsObject, QVBoxLayout, QWidget

from gui.state.i18n import translate
from gui.theme import Appearance
from gui.widgets.frame_paint import paints_with_frames
from gui.widgets.wrap_label import ElidedLabel

# Bars are axis-aligned rectangles: antialiasing buys nothing there and costs paint time; curves turn it on.
pg.setConfigOptions(antialias=False, useOpenGL=False)


def colour(hex_colour: str, alpha: int = 255) -> QColor:
    c = QColor(hex_colour)
    c.setAlpha(alpha)
    return c


def same(a, b) -> bool:
    """Whether two values of an item's option draw the same: numbers, arrays and lists by their elements, pens,
    brushes and colours by value."""
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        try:
            a, b = np.asarray(a), np.asarray(b)
        except ValueError:  # ragged: no option of a bar item is
            return False
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return type(a) is type(b) and bool(a == b)


def shown_already(shown: dict | None, opts: dict) -> bool:
    """Whether every option in opts is one an item already shows (`shown`: the copies kept of what it was set)."""
    return shown is not None and all(k in shown and same(v, shown[k]) for k, v in opts.items())


def kept(value):
    """A copy of an option's value to compare the next one with (the caller may change its array later)."""
    if isinstance(value, (np.ndarray, list, tuple)):
        return np.array(value)
    if isinstance(value, (QPen, QBrush, QColor)):
        return type(value)(value)
    return value


class Bars(pg.BarGraphItem):
    """pg.BarGraphItem with its bounding rectangle kept until the bars or the view change, and bars set again
    as they are left alone.

    The scene asks every item for it several times a paint, and pg.BarGraphItem computes it each time in
    Python (the pixel size from the device transform, for the outline's padding): ~60 calls, ~2 ms, a frame.
    A frame sets every bar item again, and many are as they were (an empty tail bar, the waterfall while the
    sampler keeps one token): each such `setOpts` made the item again and repainted its plot's area under it.
    """

    def __init__(self, **opts):
        self._bounds: QRectF | None = None
        self._set: dict | None = None  # the options set so far (copies): what the bars show
        super().__init__(**opts)

    def setOpts(self, **opts) -> None:
        if shown_already(self._set, opts):
            return
        self._set = (self._set or {}) | {k: kept(v) for k, v in opts.items()}
        self._bounds = None
        super().setOpts(**opts)

    def viewTransformChanged(self) -> None:
        self._bounds = None  # the pixel padding changes with the zoom and the view's size
        super().viewTransformChanged()

    def boundingRect(self) -> QRectF:
        if self._bounds is None:
            self._bounds = super().boundingRect()
        return QRectF(self._bounds)


class StyledBars(Bars):
    """Bars in a few styles (a pen and a brush each), drawn one style at a time.

    `pg.BarGraphItem` with a brush or pen per bar makes a QBrush and a QPen per bar at every `setOpts` and
    changes the painter's state twice per bar when it paints: a run's Timing view (two bars a step) spent
    several ms of each frame there. Here each style's pen and brush are made once and each style is one
    `drawRects`. Bars of a later style are drawn over those of an earlier one.
    """

    def __init__(self, **opts):
        self._palette: list[tuple[QPen, QBrush]] = []
        self._styles = np.zeros(0, dtype=np.intp)
        super().__init__(**opts)

    def set_bars(self, styles, palette, **coords) -> None:
        """coords as `setOpts` takes them (x/x0, y/y0, width, height); `styles[i]` indexes bar i's
        (pen, brush) in `palette`: a pen (None: no outline) and a brush or colour."""
        palette = [(QPen(Qt.NoPen) if pen is None else QPen(pen), QBrush(brush)) for pen, brush in palette]
        styles = np.array(styles, dtype=np.intp).reshape(-1)
        if palette != self._palette or not np.array_equal(styles, self._styles):
            self._set = None  # the same coordinates in other styles: drawn again
        self._palette, self._styles = palette, styles
        widest = max((pen for pen, _ in self._palette), key=QPen.widthF, default=QPen(Qt.NoPen))
        self.setOpts(pen=widest, brush=None, pens=None, brushes=None, **coords)

    def _updateColors(self, opts) -> None:
        super()._updateColors(opts)
        # bounds are padded for the widest outline; paint() draws the picture, never one shared style
        self._singleColor = False

    def _render(self, painter) -> None:
        rects = self._rectarray.instances()
        styles = self._styles[:len(rects)]
        for index, (pen, brush) in enumerate(self._palette):
            chosen = np.flatnonzero(styles == index)
            if len(chosen):
                painter.setPen(pen)
                painter.setBrush(brush)
                painter.drawRects([rects[i] for i in chosen])


def set_data(curve: pg.PlotDataItem, x, y, **opts) -> None:
    """curve.setData, skipped when the points and options are the ones it shows: each setData builds the curve
    again and repaints its plot's area under it (Timing's series, empty while one mode has steps, were set
    again at every frame)."""
    wanted = {"x": x, "y": y, **opts}
    shown = getattr(curve, "_tokenstep_data", None)
    if shown is not None and shown.keys() == wanted.keys() and shown_already(shown, wanted):
        return
    curve._tokenstep_data = {k: kept(v) for k, v in wanted.items()}
    curve.setData(x, y, **opts)


def make_plot(appearance: Appearance, title: str = "") -> pg.PlotWidget:
    plot = pg.PlotWidget()
    plot.setMenuEnabled(False)
    plot.setMouseEnabled(x=False, y=False)
    plot.hideButtons()
    paints_with_frames(plot)
    plot.getPlotItem().setTitle(title)
    # No automatic SI prefix: the units are in the labels, and with it every range change re-set each axis
    # label's HTML (a QTextDocument each time: ~18 a frame of a Run, as the step axes grow)
    for name in ("left", "bottom", "right", "top"):
        plot.getPlotItem().getAxis(name).enableAutoSIPrefix(False)
    style_plot(plot, appearance)
    axes_follow_data(plot)
    return plot


DATA_ITEMS = (pg.PlotDataItem, pg.PlotCurveItem, pg.ScatterPlotItem, pg.BarGraphItem, pg.ImageItem)


def holds_data(plot: pg.PlotWidget) -> bool:
    """Whether any shown curve, bar, scatter or image of the plot has a point (labels and lines are no data)."""
    for item in plot.getPlotItem().items:
        if not isinstance(item, DATA_ITEMS) or not item.isVisible():
            continue
        if isinstance(item, pg.ImageItem):
            if item.image is not None and item.image.size:
                return True
        elif item.dataBounds(0)[0] is not None:
            return True
    return False


def axes_follow_data(plot: pg.PlotWidget) -> None:
    """The plot's axes show only while it holds data: an empty plot (no model, no prompt yet) drew axes of
    nothing, a log chart from -0.4 to 0.4. Every curve or bar set anew tells its view box (itemBoundsChanged),
    so the check runs as the view draws, before the window paints, and costs a look at a few items."""
    box = plot.getPlotItem().getViewBox()
    bounds_changed = box.itemBoundsChanged

    def follow(item) -> None:
        bounds_changed(item)
        show_axes(plot, holds_data(plot))

    box.itemBoundsChanged = follow
    # once the view that made it has set it up (and hidden the axes it never shows)
    QTimer.singleShot(0, plot, lambda: show_axes(plot, holds_data(plot)))


def show_axes(plot: pg.PlotWidget, on: bool) -> None:
    """An empty plot shows no axes (before a prompt, ranges like -0.4..0.5 mean nothing); data brings back
    the ones it had (a plot that hides an axis by design keeps it hidden)."""
    item = plot.getPlotItem()
    if not on and not hasattr(plot, "axes_with_data"):
        plot.axes_with_data = [n for n in ("left", "bottom") if item.getAxis(n).isVisible()]
    for name in getattr(plot, "axes_with_data", ("left", "bottom")):
        if item.getAxis(name).isVisible() != on:
            item.showAxis(name, on)


def style_plot(plot: pg.PlotWidget, appearance: Appearance) -> None:
    t = appearance.theme
    plot.setBackground(t.panel)
    item = plot.getPlotItem()
    font = appearance.font(0.85)
    for name in ("left", "bottom", "right", "top"):
        axis = item.getAxis(name)
        axis.setPen(pg.mkPen(t.grid))
        axis.setTextPen(pg.mkPen(t.text))
        axis.setTickFont(font)
    if item.titleLabel.text:
        item.setTitle(item.titleLabel.text, color=t.text, size=f"{font.pointSizeF():.0f}pt")


ALIGN = Qt.AlignLeft | Qt.AlignTop  # a label's lines


_sizes: dict[tuple[str, str], QSizeF] = {}


def text_size(font: QFont, text: str) -> QSizeF:
    """The size of a label's lines in this font, measured once per text: a step's labels mostly repeat texts
    shown before ("3e-5 → 3e-5", "50", "1.98 MB"), and each measure is a text layout (~20 a frame)."""
    key = (font.key(), text)
    size = _sizes.get(key)
    if size is None:
        if len(_sizes) > 4096:
            _sizes.clear()
        size = _sizes[key] = QFontMetricsF(font).boundingRect(QRectF(0, 0, 1e6, 1e6), ALIGN, text).size()
    return QSizeF(size)


class Label(QGraphicsObject):
    """Text at a point of a plot, unscaled by the plot's zoom: its anchor (0..1 of its box, as pg.TextItem's)
    sits at the point. Views reposition their labels on every redraw; this touches Qt only when the text,
    place, anchor or colour change.

    pg.TextItem lays its text out in a QGraphicsTextItem (a QTextDocument: a new layout at every change)
    and recomputes its transform in Python at every paint; a run's frames spent several ms of GUI time
    there. Here the text is measured once per change and drawn with one drawText. Lines are left-aligned
    in a box with a 4 px margin, as pg.TextItem's.
    """

    MARGIN = 4.0  # px around the text, as a QGraphicsTextItem's document margin

    def __init__(self, appearance: Appearance, anchor=(0, 0.5)):
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations)  # pixels, at a data point
        self._text = ""
        self._anchor = tuple(anchor)
        self._colour = QColor(appearance.theme.text)
        self._font = appearance.font(0.85)
        self._box = QRectF()
        self._shown: tuple = ("", None, None, self._anchor, None)

    def toPlainText(self) -> str:
        return self._text

    def show_text(self, text: str, x: float = 0.0, y: float = 0.0, anchor=None, color: str | None = None):
        old_text, old_x, old_y, old_anchor, old_color = self._shown
        if (text != old_text) or (anchor is not None and tuple(anchor) != old_anchor):
            self._text, self._anchor = text, tuple(anchor) if anchor is not None else self._anchor
            self._measure()
        if color is not None and color != old_color:
            self._colour = QColor(color)
            self.update()
        if text and (x, y) != (old_x, old_y):
            self.setPos(x, y)
            old_x, old_y = x, y
        # the place recorded is where the item is: a hidden (empty) label's call moves nothing
        self._shown = (text, old_x, old_y, self._anchor, color or old_color)

    def restyle(self, appearance: Appearance) -> None:
        self._colour = QColor(appearance.theme.text)
        self._font = appearance.font(0.85)
        self._measure()
        self._shown = (self._shown[0], self._shown[1], self._shown[2], self._shown[3], None)

    def _measure(self) -> None:
        self.prepareGeometryChange()
        if not self._text:
            self._box = QRectF()
        else:
            size = text_size(self._font, self._text)
            w, h = size.width() + 2 * self.MARGIN, size.height() + 2 * self.MARGIN
            self._box = QRectF(-self._anchor[0] * w, -self._anchor[1] * h, w, h)
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(self._box)

    def dataBounds(self, axis: int, frac: float = 1.0, orthoRange=None):
        """An auto-ranging plot counts only the point the label is at (pixels have no data size)."""
        return [0.0, 0.0]

    def paint(self, painter, option, widget=None) -> None:
        if self._text:
            painter.setFont(self._font)
            painter.setPen(self._colour)
            painter.drawText(self._box.adjusted(self.MARGIN, self.MARGIN, -self.MARGIN, -self.MARGIN), ALIGN,
                             self._text)


def text_item(appearance: Appearance, anchor=(0, 0.5)) -> Label:
    return Label(appearance, anchor)


def set_range(plot: pg.PlotWidget, x: tuple[float, float] | None = None, y: tuple[float, float] | None = None,
              padding: float = 0.0) -> None:
    """Set fixed axis ranges, touching the view box only when they change (a change re-lays the axes)."""
    key = (x, y, padding)
    if getattr(plot, "_tokenstep_range", None) == key:
        return
    plot._tokenstep_range = key
    if x is not None:
        plot.setXRange(*x, padding=padding)
    if y is not None:
        plot.setYRange(*y, padding=padding)


def nice_ceiling(value: float) -> float:
    """The next 1, 2 or 5 x 10^k at or above value: axis tops that change rarely and read well."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * 10 ** exponent >= value:
            return float(step * 10 ** exponent)
    return float(10 ** (exponent + 1))


def grid_ceiling(value: float, block: int) -> float:
    """value rounded up to a whole number of blocks (at least one): an x axis that grows in jumps."""
    return float(max(1, math.ceil(value / block)) * block)


# A Run's whole length is on its step axes from the start when it is at most RUN_SPAN steps, or at most
# RUN_SPAN_FACTOR times what they hold (a run of 100,000 steps: not a dot at the left edge for its first minutes).
RUN_SPAN = 512
RUN_SPAN_FACTOR = 8


def run_end(lo: float, hi: float, block: int, horizon: float | None) -> float:
    """Where an x axis holding lo..hi ends during a run headed for `horizon` (None: not running, hi itself).

    An axis whose range changes is laid out and painted again, and during a Run a frame comes about once a
    second, some 50 steps after the last one: an axis grown in blocks of 16 changed at every frame (on 2
    cores ~13 ms more GUI CPU a frame, taken from the engine's decode). So during a run an axis covers the
    run's whole length from the start when that is short enough (the bars fill it as the run goes), else its
    length doubles (16, 32, 64...): a few changes over a long run.
    """
    if horizon is None or horizon < hi:
        return hi
    held = max(hi - lo, float(block))
    if horizon - lo <= max(RUN_SPAN, RUN_SPAN_FACTOR * held):
        return float(horizon)
    return lo + block * 2.0 ** math.ceil(math.log2(held / block))


def step_top(n: int, block: int, horizon: int | None = None) -> float:
    """The top of an axis of n steps, in whole blocks; during a run headed for `horizon` steps, see run_end."""
    return grid_ceiling(run_end(0.0, float(n), block, horizon), block)


def covering(lo: float, hi: float, block: int, horizon: float | None = None) -> tuple[float, float]:
    """An x range in whole blocks that holds lo..hi with a margin on both sides: from 0 while lo is near it,
    else from just below lo (a 700-token prompt and 8 steps: 688..720, not a dot at the edge of 0..720).
    During a run headed for `horizon`, up to where run_end says."""
    hi = run_end(lo, hi, block, horizon)
    span = max(hi - lo, float(block))
    margin = max(1.0, 0.06 * span)
    start = 0.0 if lo - margin <= span else math.floor((lo - margin) / block) * block
    return float(start), float(math.ceil((hi + margin) / block) * block)


def snug_ceiling(value: float) -> float:
    """A round axis top just above value (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k): the data fills the plot
    instead of its lower half, and the top still changes rarely."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * 10 ** exponent >= value:
            return float(step * 10 ** exponent)
    return float(10 ** (exponent + 1))


def bar_width(plot: pg.PlotWidget, span: float, width: float = 0.7) -> float:
    """Bars `width` apart-units wide, or touching (1.0) where that would leave them thinner than 2 pixels:
    sub-pixel bars vanish or alias into gaps."""
    px = max(plot.getPlotItem().getViewBox().width(), 1.0) / max(span, 1e-9)
    return width if width * px >= 2.0 else 1.0


class PlotTitle(ElidedLabel):
    """A plot's title on one line, cut short with "…" where the plot is narrower than it (the whole title in
    its tooltip, cut short or not). A wrapped title took a second line that splitters and layouts do not reserve (they ask a
    label for one line): in a short dock it was drawn over the plot under it."""

    def __init__(self, title: str):
        super().__init__()
        self.source = title  # the English source (marked with QT_TRANSLATE_NOOP("Plots", …) where it is written)
        self.setObjectName("muted")
        self.always_tip = True
        self._word()

    def _word(self) -> None:
        self.setText(translate("Plots", self.source))

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:
            self._word()


def titled(title, plot, extra=None) -> QWidget:
    """A plot under a one-line title (and a widget under it)."""
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    if title:
        layout.addWidget(PlotTitle(title))
    layout.addWidget(plot, 1)
    if extra is not None:
        layout.addWidget(extra)
    return box
