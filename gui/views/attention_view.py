"""Attention: where the query that produced a step's distribution looked, per layer and position.

Capturing attention runs the explicit (slower) attention path, so the worker records it only while this
view is visible. Rows are layers, columns are context positions; each row sums to 1.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout

from ..controller import Controller
from ..theme import Appearance
from .base import View
from .plotting import make_plot, set_range, style_plot


class AttentionView(View):
    COSTLY = True  # takes turns with the other plot views during Run

    def __init__(self, controller: Controller, appearance: Appearance):
        super().__init__(controller, appearance)
        self.caption = QLabel("Shown while this view is open: each step's attention is recorded from then on.")
        self.caption.setObjectName("muted")
        self.caption.setWordWrap(True)
        self.head = QComboBox()
        self.head.addItem("mean over heads")
        self.head.currentIndexChanged.connect(self._force)
        self.plot = make_plot(appearance)
        self.plot.getPlotItem().setLabel("bottom", "context position")
        self.plot.getPlotItem().setLabel("left", "layer")
        self.plot.invertY(True)
        self.image = pg.ImageItem()
        self.plot.addItem(self.image)
        self.image.setColorMap(pg.colormap.get("viridis"))
        row = QHBoxLayout()
        row.addWidget(QLabel("Heads"))
        row.addWidget(self.head)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addLayout(row)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.caption)
        controller.model_changed.connect(self._heads)
        self._key = None

    def restyle(self) -> None:
        style_plot(self.plot, self.appearance)

    def _heads(self) -> None:
        info = self.controller.info
        self.head.blockSignals(True)
        self.head.clear()
        self.head.addItem("mean over heads")
        for h in range(info.n_heads if info else 0):
            self.head.addItem(f"head {h}")
        self.head.blockSignals(False)
        self._force()

    def _force(self) -> None:
        self._key = None
        self.refresh()

    def refresh(self) -> None:
        c = self.controller
        shown = c.shown()
        attention = None
        if shown is not None and shown.step is not None:
            attention = shown.step.attention
        elif c.prefill_event is not None and (shown is None or shown.index == 1):
            attention = c.prefill_event.attention
        # the array's identity, not the step number: after a fork or a branch switch step k is another step
        key = (c.epoch, None if shown is None else shown.index, id(attention), self.head.currentIndex())
        if key == self._key:
            return
        self._key = key
        if attention is None:
            self.image.clear()
            return
        head = self.head.currentIndex()
        grid = attention.mean(axis=1) if head == 0 else attention[:, head - 1, :]  # (layers, positions)
        self.image.setImage(np.ascontiguousarray(grid.T), levels=(0.0, float(max(grid.max(), 1e-6))))
        set_range(self.plot, x=(0, grid.shape[1]), y=(0, grid.shape[0]))
        where = "the last prompt position (prefill)" if shown is None or shown.step is None or shown.index == 1 \
            else f"the query at position {shown.step.position - 1}"
        self.caption.setText(f"Attention of {where} over {grid.shape[1]} positions in each of "
                             f"{grid.shape[0]} layers; brighter = more weight. Early positions never see later ones.")
