"""Logit lens: what the model would say were it to stop after each layer.

For the position being predicted, the residual stream after layer i goes through the final norm and the
head, as the stream after the last layer does for the real prediction: one distribution per layer. Left, a
layers x steps heatmap of p(the token finally chosen), layer 1 at the bottom, so a step's column shows the
layer where the model made up its mind; right, for the shown step, each layer's most likely token and its p.
Recording it costs a head product per layer and step, so the worker asks for it only while this view is
shown (like Attention); steps taken before it opened have no column, except a step gone back to (a Reset, a
rewind: its lens is read again while it is pending). A colour scale beside the heatmap reads its colours.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import (QAbstractItemView, QGraphicsRectItem, QHeaderView, QLabel, QSizePolicy, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout)

from gui.state.intents import Intents
from gui.state.history import Shown
from gui.theme import Appearance
from gui.views.base import View
from gui.state.format import display
from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.widgets.plotting import grid_ceiling, make_plot, set_range, style_plot

COLUMNS = (QT_TRANSLATE_NOOP("Lens", "Layer"), QT_TRANSLATE_NOOP("Lens", "Top-1 token"), "p", "p(chosen)")
STEP_BLOCK = 16  # the step axis grows in blocks of this many steps (fixed ranges, few relayouts)
PLACEHOLDER = QT_TRANSLATE_NOOP("Lens", "Open while stepping: each step's logit lens is recorded from then on (one "
                                "pass through the head per layer).")


class LensView(View):
    COSTLY = True  # a plot: several ms per redraw

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.colormap = pg.colormap.get("viridis")
        self.plot = make_plot(appearance)
        item = self.plot.getPlotItem()
        self.image = pg.ImageItem()
        self.plot.addItem(self.image)
        self.marker = QGraphicsRectItem()  # the shown step's column
        self.marker.setZValue(10)
        self.plot.addItem(self.marker)
        # the colour scale beside the heatmap: its colours are p(chosen) on a fixed 0..1 scale (drawn from the
        # same map, never linked to the image, whose colours are computed here)
        self.scale = pg.ColorBarItem(values=(0.0, 1.0), colorMap=self.colormap, interactive=False, width=14,
                                     label="p(chosen)")
        item.layout.addItem(self.scale, 2, 5)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.NoSelection)
        self.table.setFocusPolicy(Qt.NoFocus)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.Stretch)
        self.split = split = QSplitter(Qt.Horizontal)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        # The heatmap and the table take the height there is: their preferred heights (a table of 30 rows)
        # made the dock's scroll area hold the view taller than the dock, which showed layers 15-30 only.
        split.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Ignored)
        self.caption = QLabel(translate("Lens", PLACEHOLDER))
        self.caption.setObjectName("muted")
        self.caption.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(split, 1)
        layout.addWidget(self.caption)
        self._key = self._grid_key = None
        self.restyle()
        self.retranslate()

    def retranslate(self) -> None:
        item = self.plot.getPlotItem()
        item.setLabel("bottom", translate("Lens", "step", "a decoding step (the axis of steps)"))
        item.setLabel("left", translate("Lens", "layer"))
        self.table.setHorizontalHeaderLabels([translate("Lens", column) for column in COLUMNS])
        self._key = None

    def restyle(self) -> None:
        style_plot(self.plot, self.appearance)
        t = self.appearance.theme
        axis = self.scale.axis  # the colour scale's numbers, as the plot's axes
        axis.setPen(pg.mkPen(t.grid))
        axis.setTextPen(pg.mkPen(t.text))
        axis.setTickFont(self.appearance.font(0.85))
        axis.setLabel("p(chosen)", color=t.text)
        pen = QPen(QColor(t.chosen), 2.0 * self.appearance.scale)
        pen.setCosmetic(True)  # pixels, not steps
        self.marker.setPen(pen)
        self.marker.setBrush(QBrush(Qt.NoBrush))
        self.table.setFont(self.appearance.font(0.95))
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.table.setMinimumWidth(int(330 * self.appearance.scale))  # every column readable
        self.split.setMinimumHeight(int(150 * self.appearance.scale))  # lower than this, the dock scrolls
        self._key = self._grid_key = None

    def refresh(self) -> None:
        c = self.intents
        shown, steps = c.shown(), c.steps
        n_layers = c.info.n_layers if c.info is not None else 0
        # identities, not lengths: after a rewind, a fork or a branch switch step k is another step
        key = (c.epoch, n_layers, len(steps), id(steps[-1]) if steps else None,
               None if shown is None else (shown.index, id(shown.dist)))
        if key == self._key:
            return
        self._key = key
        self._draw_grid(steps, n_layers, shown)
        self._fill_table(shown, n_layers)

    # --- the heatmap ------------------------------------------------------------------------------------
    def _draw_grid(self, steps, n_layers: int, shown: Shown | None) -> None:
        width = int(grid_ceiling(len(steps) + 1, STEP_BLOCK))  # room for the pending step
        grid_key = (n_layers, width, len(steps), id(steps[0]) if steps else None, id(steps[-1]) if steps else None)
        if grid_key != self._grid_key:
            self._grid_key = grid_key
            p = np.full((width, max(n_layers, 1)), np.nan)  # (steps, layers): x is the step, y the layer
            for k, step in enumerate(steps):
                lens = step.dist.lens
                if lens is not None and lens.p_chosen is not None and lens.n_layers == n_layers:
                    p[k] = lens.p_chosen
            self.image.setImage(self._colours(p), autoLevels=False)
            self.image.setRect(QRectF(0.5, 0.5, width, max(n_layers, 1)))
            set_range(self.plot, x=(0.5, width + 0.5), y=(0.5, max(n_layers, 1) + 0.5))
        if shown is None or n_layers == 0:
            self.marker.hide()
            return
        self.marker.setRect(QRectF(shown.index - 0.5, 0.5, 1.0, n_layers))
        self.marker.show()

    def _colours(self, p: np.ndarray) -> np.ndarray:
        """RGBA of p in [0, 1] on a fixed scale; no lens (NaN) is left transparent, the panel showing."""
        missing = np.isnan(p)
        rgba = self.colormap.map(np.nan_to_num(p), mode="byte")  # (steps, layers, 4)
        rgba[missing, 3] = 0
        return rgba

    # --- the shown step ---------------------------------------------------------------------------------
    def _fill_table(self, shown: Shown | None, n_layers: int) -> None:
        lens = shown.dist.lens if shown is not None else None
        t = self.appearance.theme
        if lens is None or lens.n_layers != n_layers:
            self.table.setRowCount(0)
            self.caption.setText(translate("Lens", PLACEHOLDER) if shown is None else
                                 translate("Lens", "Step {index} has no logit lens: it was taken before this view opened "
                                           "(or decided by a speculative verify pass).").format(index=shown.index))
            return
        chosen = shown.step.token.id if shown.step is not None else None
        final = chosen if chosen is not None else int(lens.ids[-1, 0])
        self.table.setRowCount(n_layers)
        for row in range(n_layers):
            layer = n_layers - 1 - row  # the last layer on top, as in the heatmap
            token = int(lens.ids[layer, 0])
            cells = (str(layer + 1), display(lens.texts[layer][0]), f"{lens.p[layer, 0]:.3f}",
                     "—" if lens.p_chosen is None else f"{lens.p_chosen[layer]:.3f}")
            for column, text in enumerate(cells):
                self._cell(row, column, text, t.chosen if column == 1 and token == final else t.text)
            top5 = ", ".join(f"{display(x)} {q:.3f}" for x, q in zip(lens.texts[layer][:5], lens.p[layer, :5]))
            self.table.item(row, 1).setToolTip(translate("Lens", "Layer {layer}: {top5}").format(layer=layer + 1,
                                                                                                top5=top5))
        self.caption.setText(self._summary(shown, lens, final))

    def _cell(self, row: int, column: int, text: str, colour: str) -> None:
        item = self.table.item(row, column)
        if item is None:
            item = QTableWidgetItem()
            item.setTextAlignment((Qt.AlignLeft if column == 1 else Qt.AlignRight) | Qt.AlignVCenter)
            self.table.setItem(row, column, item)
        if item.text() != text:
            item.setText(text)
        item.setForeground(QColor(colour))

    @staticmethod
    def _summary(shown: Shown, lens, final: int) -> str:
        settled = lens.n_layers
        while settled > 1 and int(lens.ids[settled - 2, 0]) == final:
            settled -= 1
        what = translate("Lens", "its chosen token") if shown.step is not None else translate("Lens", "its final guess")
        first = translate("Lens", "from layer {layer} on").format(layer=settled) if settled < lens.n_layers else \
            translate("Lens", "only at the last layer")
        chosen = "" if lens.p_chosen is None else \
            translate("Lens", "; p(chosen) {p} after the last layer").format(p=f"{lens.p_chosen[-1]:.3f}")
        step = (translate("Lens", "Step {index}") if shown.step is not None else
                translate("Lens", "Step {index} (next, not drawn)")).format(index=shown.index)
        return translate("Lens", "{step}: each layer's stream through the final norm and head. The top guess is {what} "
                         "{first}{chosen}. Colour: p(chosen) from 0 (dark) to 1 (yellow); a red token is the one "
                         "finally chosen.").format(step=step, what=what, first=first, chosen=chosen)
