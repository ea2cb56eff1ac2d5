"""Shared pyqtgraph set-up: themed plots with fixed ranges, no mouse zoom, reusable items."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor

from ..theme import Appearance

pg.setConfigOptions(antialias=True, useOpenGL=False)


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
