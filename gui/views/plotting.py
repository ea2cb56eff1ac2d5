"""Shared pyqtgraph set-up: themed plots with fixed ranges, no mouse zoom, reusable items."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QColor

from ..theme import Appearance

# Bars are axis-aligned rectangles: antialiasing buys nothing there and costs paint time; curves turn it on.
pg.setConfigOptions(antialias=False, useOpenGL=False)


def colour(hex_colour: str, alpha: int = 255) -> QColor:
    c = QColor(hex_colour)
    c.setAlpha(alpha)
    return c


def make_plot(appearance: Appearance, title: str = "") -> pg.PlotWidget:
    plot = pg.PlotWidget()
    plot.setMenuEnabled(False)
    plot.setMouseEnabled(x=False, y=False)
    plot.hideButtons()
    plot.getPlotItem().setTitle(title)
    style_plot(plot, appearance)
    return plot


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


def text_item(appearance: Appearance, anchor=(0, 0.5)) -> pg.TextItem:
    item = pg.TextItem("", color=appearance.theme.text, anchor=anchor)
    item.setFont(appearance.font(0.85))
    return item


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
