"""Taking a token by clicking it in a plot: the candidate bars, or a segment of the draw strip.

A `TokenPicker` watches one pyqtgraph plot's scene. Hovering over something that names a token shows a
tooltip about it and, where a click may take it, a hand cursor (the tooltip then says what a click does);
a left click emits `picked(token_id)`. What lies under a point is the view's business (`token_at`, in the
plot's data coordinates); what a click does (take the token at the pending step, or fork at a past one) is
the controller's.
"""

from __future__ import annotations

from typing import Callable

import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt, Signal, Slot
from PySide6.QtWidgets import QToolTip


class TokenPicker(QObject):
    picked = Signal(int)  # a token id the user clicked

    def __init__(self, plot: pg.PlotWidget, token_at: Callable[[QPointF], int | None],
                 describe: Callable[[int], str], enabled: Callable[[], bool]):
        super().__init__(plot)
        self.plot, self.token_at, self.describe, self.enabled = plot, token_at, describe, enabled
        self._hovered: tuple[int | None, bool] = (None, False)  # the token under the mouse, and if a click takes it
        plot.scene().sigMouseClicked.connect(self._on_click)
        plot.scene().sigMouseMoved.connect(self._on_move)

    def token_at_scene(self, scene_pos: QPointF) -> int | None:
        """The token under a point of the plot's scene (None outside the plot's data area or on nothing)."""
        box = self.plot.getPlotItem().getViewBox()
        if not box.sceneBoundingRect().contains(scene_pos):
            return None
        return self.token_at(box.mapSceneToView(scene_pos))

    def scene_pos(self, view_point: QPointF) -> QPointF:
        """Where a point in data coordinates lies in the scene (what a test clicks)."""
        return self.plot.getPlotItem().getViewBox().mapViewToScene(view_point)

    @Slot(object)
    def _on_click(self, event) -> None:
        if event.button() != Qt.LeftButton or not self.enabled():
            return
        token_id = self.token_at_scene(event.scenePos())
        if token_id is not None:
            event.accept()
            self.picked.emit(token_id)

    @Slot(object)
    def _on_move(self, scene_pos: QPointF) -> None:
        token_id = self.token_at_scene(scene_pos)  # named even where no click may take it (a run, a stop)
        clickable = token_id is not None and self.enabled()
        if (token_id, clickable) == self._hovered:
            return
        self._hovered = (token_id, clickable)
        viewport = self.plot.viewport()
        if token_id is None:
            viewport.unsetCursor()
            QToolTip.hideText()
            return
        if clickable:
            viewport.setCursor(Qt.PointingHandCursor)
        else:
            viewport.unsetCursor()
        at = self.plot.mapToGlobal(self.plot.mapFromScene(scene_pos))
        QToolTip.showText(at, self.describe(token_id), viewport)
