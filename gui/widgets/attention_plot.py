"""The attention matrix as a zoomable image: queries down, keys across, token texts on both axes.

Masked cells are NaN, which the image leaves transparent over a hatched backdrop: the causal mask reads
as "not there", never as a weight of 0. The wheel zooms and a drag pans (rows and columns, or only
columns for a single decode row); the axis labels thin out to what fits and show every token zoomed in.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from gui.theme import Appearance
from gui.widgets.plotting import axes_follow_data, colour

COLOUR_MAP = "viridis"


def _nice_steps():
    """1, 2, 5, 10, 20, 50, ..."""
    scale = 1
    while True:
        yield from (scale, 2 * scale, 5 * scale)
        scale *= 10


class TokenAxis(pg.AxisItem):
    """Ticks at cell centres labelled with token texts, thinned to steps of 1, 2, 5, 10, ... that fit."""

    def __init__(self, orientation: str):
        super().__init__(orientation)
        self.labels: list[str] = []
        self._need = 14.0  # pixels a label needs along the axis

    def set_labels(self, labels: list[str]) -> None:
        self.labels = labels
        fm = QFontMetricsF(self.style.get("tickFont") or self.font())
        if self.orientation in ("left", "right"):
            self._need = fm.height() + 2
            widest = max((fm.horizontalAdvance(f"{len(labels)} {t}") for t in labels), default=20)
            self.setWidth(int(min(widest, 220) + 12))
        else:
            self._need = max((fm.horizontalAdvance(f"{len(labels)} {t}") for t in labels), default=20) + 10
        self.picture = None
        self.update()

    def tickValues(self, minVal, maxVal, size):
        n = len(self.labels)
        minVal, maxVal = min(minVal, maxVal), max(minVal, maxVal)  # an inverted axis passes them reversed
        if n == 0 or size <= 0 or maxVal <= minVal:
            return []
        per_cell = size / (maxVal - minVal)
        step = next(s for s in _nice_steps() if s * per_cell >= self._need or s >= n)
        first = max(0, math.ceil(minVal - 0.5))
        first += (-first) % step
        last = min(n - 1, math.floor(maxVal - 0.5))
        return [(float(step), [i + 0.5 for i in range(first, last + 1, step)])]

    def tickStrings(self, values, scale, spacing):
        out = []
        for v in values:
            i = int(v)
            text = self.labels[i] if 0 <= i < len(self.labels) else ""
            out.append(f"{i} {text}" if spacing > 1 else text)
        return out


class AttentionPlot(pg.PlotWidget):
    hovered = Signal(int, int)  # row, column (-1, -1: off the matrix)
    clicked = Signal(int, int)

    def __init__(self, appearance: Appearance):
        self.rows_axis, self.cols_axis = TokenAxis("left"), TokenAxis("bottom")
        super().__init__(axisItems={"left": self.rows_axis, "bottom": self.cols_axis})
        self.appearance = appearance
        self.setMenuEnabled(False)
        self.hideButtons()
        self.invertY(True)
        self.backdrop = QGraphicsRectItem()
        self.backdrop.setZValue(-1)
        self.addItem(self.backdrop)
        self.image = pg.ImageItem()
        self.addItem(self.image)
        self.colour_bar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(COLOUR_MAP), interactive=False,
                                          width=12)
        self.colour_bar.setImageItem(self.image, insert_in=self.getPlotItem())
        self.colour_bar.axis.enableAutoSIPrefix(False)
        self.getPlotItem().setContentsMargins(2, 2, 10, 2)  # the colour bar's label clear of the edge
        self.marker = QGraphicsRectItem()
        self.marker.setBrush(Qt.NoBrush)
        self.marker.setZValue(5)
        self.marker.hide()
        self.addItem(self.marker)
        self.grid: np.ndarray | None = None  # (rows, columns), NaN where masked
        self._shape = None
        self.scene().sigMouseMoved.connect(self._moved)
        self.scene().sigMouseClicked.connect(self._clicked)
        self.set_contrast(True)
        self.restyle()
        axes_follow_data(self)  # no token axes around an empty matrix

    def set_contrast(self, root: bool) -> None:
        """Colours by the weight (linear) or by its square root, so that small weights beside an
        attention sink still show; the colour bar keeps the weights' own scale either way."""
        base = pg.colormap.get(COLOUR_MAP)
        stops = np.linspace(0.0, 1.0, 33)
        self.colour_bar.setColorMap(pg.ColorMap(stops ** 2 if root else stops, base.map(stops, mode="byte")))

    def restyle(self) -> None:
        t, a = self.appearance.theme, self.appearance
        self.setBackground(t.panel)
        font = a.font(0.85)
        for axis in (self.rows_axis, self.cols_axis, self.colour_bar.axis):
            axis.setPen(pg.mkPen(t.grid))
            axis.setTextPen(pg.mkPen(t.text))
            axis.setTickFont(font)
        self.colour_bar.axis.setLabel("weight", color=t.text)
        hatch = QBrush(colour(t.muted, 150), Qt.BDiagPattern)
        self.backdrop.setBrush(hatch)
        self.backdrop.setPen(QPen(Qt.NoPen))
        pen = QPen(QColor(t.chosen), 2.5 * a.scale)
        pen.setCosmetic(True)
        self.marker.setPen(pen)
        self.rows_axis.set_labels(self.rows_axis.labels)
        self.cols_axis.set_labels(self.cols_axis.labels)

    def show_grid(self, grid: np.ndarray, row_labels: list[str], col_labels: list[str]) -> None:
        """grid (rows, columns); a new shape resets the zoom to the whole matrix, a new head keeps it."""
        self.grid = grid
        rows, cols = grid.shape
        finite = grid[np.isfinite(grid)]
        top = float(max(finite.max(), 1e-6)) if finite.size else 1.0
        self.image.setImage(np.ascontiguousarray(grid.T), autoLevels=False)
        self.colour_bar.setLevels((0.0, top))
        self.backdrop.setRect(QRectF(0, 0, cols, rows))
        self.rows_axis.set_labels(row_labels)
        self.cols_axis.set_labels(col_labels)
        if (rows, cols) != self._shape:
            self._shape = (rows, cols)
            self.marker.hide()
            self.setMouseEnabled(x=True, y=rows > 1)
            self.setLimits(xMin=0, xMax=cols, yMin=0, yMax=rows, minXRange=min(cols, 3), minYRange=min(rows, 3))
            self.fit()

    def fit(self) -> None:
        if self._shape is not None:
            rows, cols = self._shape
            self.setRange(xRange=(0, cols), yRange=(0, rows), padding=0)

    def clear_grid(self) -> None:
        self.grid, self._shape = None, None
        self.image.clear()
        self.marker.hide()

    def mark(self, row: int, col: int) -> None:
        self.marker.setRect(QRectF(col, row, 1, 1))
        self.marker.show()

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int]:
        if self.grid is None or not self.getPlotItem().vb.sceneBoundingRect().contains(scene_pos):
            return -1, -1
        point = self.getPlotItem().vb.mapSceneToView(scene_pos)
        row, col = math.floor(point.y()), math.floor(point.x())
        if 0 <= row < self.grid.shape[0] and 0 <= col < self.grid.shape[1]:
            return row, col
        return -1, -1

    def scene_pos(self, row: int, col: int) -> QPointF:
        """The scene point at a cell's centre (for tests that click it)."""
        return self.getPlotItem().vb.mapViewToScene(QPointF(col + 0.5, row + 0.5))

    def _moved(self, scene_pos) -> None:
        self.hovered.emit(*self.cell_at(scene_pos))

    def _clicked(self, event) -> None:
        if event.button() == Qt.LeftButton:
            self.clicked.emit(*self.cell_at(event.scenePos()))
