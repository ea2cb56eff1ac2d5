"""Shared pyqtgraph set-up: themed plots with fixed ranges, no mouse zoom, reusable items."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, QSizeF, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPen
from PySide6.QtWidgets import QVBoxLayout, QWidget

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


ALIGN = Qt.AlignLeft | Qt.AlignTop  # a chart label's lines


class TextWidths:
    """Texts' widths in one font (horizontalAdvance), each measured once: a frame's names and labels mostly repeat
    the texts of the frame before."""

    def __init__(self, metrics: QFontMetricsF):
        self.metrics = metrics
        self._widths: dict[str, float] = {}

    def __call__(self, text: str) -> float:
        width = self._widths.get(text)
        if width is None:
            if len(self._widths) > 4096:
                self._widths.clear()
            width = self._widths[text] = self.metrics.horizontalAdvance(text)
        return width


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
