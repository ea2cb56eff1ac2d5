"""Shared pyqtgraph set-up: themed plots with fixed ranges, no mouse zoom, reusable items."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ..theme import Appearance

# Bars are axis-aligned rectangles: antialiasing buys nothing there and costs paint time; curves turn it on.
pg.setConfigOptions(antialias=False, useOpenGL=False)


def colour(hex_colour: str, alpha: int = 255) -> QColor:
    c = QColor(hex_colour)
    c.setAlpha(alpha)
    return c


class StyledBars(pg.BarGraphItem):
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
        self._palette = [(QPen(Qt.NoPen) if pen is None else pen,
                          brush if isinstance(brush, QBrush) else QBrush(brush)) for pen, brush in palette]
        self._styles = np.asarray(styles, dtype=np.intp).reshape(-1)
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


def make_plot(appearance: Appearance, title: str = "") -> pg.PlotWidget:
    plot = pg.PlotWidget()
    plot.setMenuEnabled(False)
    plot.setMouseEnabled(x=False, y=False)
    plot.hideButtons()
    plot.getPlotItem().setTitle(title)
    style_plot(plot, appearance)
    return plot


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


class Label(pg.TextItem):
    """A text item in a plot that touches Qt only when its text, place, anchor or colour change.

    Views reposition their labels on every redraw; re-setting an unchanged text still re-lays out the
    underlying QGraphicsTextItem, which was a large share of a redraw.
    """

    def __init__(self, appearance: Appearance, anchor=(0, 0.5)):
        super().__init__("", color=appearance.theme.text, anchor=anchor)
        self.setFont(appearance.font(0.85))
        self._shown: tuple = ("", None, None, anchor, None)

    def show_text(self, text: str, x: float = 0.0, y: float = 0.0, anchor=None, color: str | None = None):
        old_text, old_x, old_y, old_anchor, old_color = self._shown
        if text != old_text:
            self.setText(text)
        if anchor is not None and anchor != old_anchor:
            self.setAnchor(anchor)
        if color is not None and color != old_color:
            self.setColor(color)
        if text and (x, y) != (old_x, old_y):
            self.setPos(x, y)
        self._shown = (text, x, y, anchor or old_anchor, color or old_color)

    def restyle(self, appearance: Appearance) -> None:
        self.setColor(appearance.theme.text)
        self.setFont(appearance.font(0.85))
        self._shown = (self._shown[0], self._shown[1], self._shown[2], self._shown[3], None)


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


def set_ticks(axis: pg.AxisItem, ticks: list) -> None:
    """axis.setTicks, skipped when the ticks are the ones shown: every setTicks drops the axis's cached
    picture, and laying an axis out again took ~1.4 ms of the GUI thread per redraw."""
    if getattr(axis, "_tokenstep_ticks", None) == ticks:
        return
    axis._tokenstep_ticks = ticks
    axis.setTicks(ticks)


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


def covering(lo: float, hi: float, block: int) -> tuple[float, float]:
    """An x range in whole blocks that holds lo..hi with a margin on both sides: from 0 while lo is near it,
    else from just below lo (a 700-token prompt and 8 steps: 688..720, not a dot at the edge of 0..720)."""
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


def titled(title, plot, extra=None) -> QWidget:
    """A plot under a wrapped caption (and a widget under it)."""
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    if title:
        label = QLabel(title)
        label.setObjectName("muted")
        label.setWordWrap(True)
        layout.addWidget(label)
    layout.addWidget(plot, 1)
    if extra is not None:
        layout.addWidget(extra)
    return box
