"""Taking a token by clicking it in a chart: the candidate bars, or a segment of the draw strip.

A `TokenPicker` watches the mouse over one painted chart (bar_chart.BarChart). Hovering over something that
names a token shows a tooltip about it and, where a click may take it, a hand cursor (the tooltip then says
what a click does); a left click emits `picked(token_id)`. What lies under a point is the view's business
(`token_at`, in the chart's data coordinates); what a click does (take the token at the pending step, or fork
at a past one) is the controller's.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt, Signal
from PySide6.QtWidgets import QToolTip

from gui.widgets.bar_chart import BarChart


class TokenPicker(QObject):
    picked = Signal(int)  # a token id the user clicked

    def __init__(self, chart: BarChart, token_at: Callable[[QPointF], int | None],
                 describe: Callable[[int], str], enabled: Callable[[], bool]):
        super().__init__(chart)
        self.chart, self.token_at, self.describe, self.enabled = chart, token_at, describe, enabled
        chart.setMouseTracking(True)
        chart.installEventFilter(self)
        self._hovered: tuple[int | None, bool] = (None, False)  # the token under the mouse, and if a click takes it

    def widget_pos(self, data_point: QPointF) -> QPoint:
        """Where a point in data coordinates lies in the chart (what a test clicks)."""
        return self.chart.map(data_point.x(), data_point.y()).toPoint()

    def token_at_pos(self, pos: QPointF | QPoint) -> int | None:
        """The token under a place in the chart (None outside its data area or on nothing)."""
        point = self.chart.to_data(QPointF(pos))
        return None if point is None else self.token_at(point)

    def eventFilter(self, obj, event) -> bool:
        kind = event.type()
        if kind == QEvent.MouseMove:
            self._on_move(event.position())
        elif kind == QEvent.MouseButtonRelease and event.button() == Qt.LeftButton and self.enabled():
            token_id = self.token_at_pos(event.position())
            if token_id is not None:
                self.picked.emit(token_id)
        elif kind == QEvent.Leave:
            self._on_move(None)
        return False

    def _on_move(self, pos: QPointF | QPoint | None) -> None:
        token_id = None if pos is None else self.token_at_pos(pos)  # named even where no click may take it
        clickable = token_id is not None and self.enabled()
        if (token_id, clickable) == self._hovered:
            return
        self._hovered = (token_id, clickable)
        if token_id is None:
            self.chart.unsetCursor()
            QToolTip.hideText()
            return
        if clickable:
            self.chart.setCursor(Qt.PointingHandCursor)
        else:
            self.chart.unsetCursor()
        QToolTip.showText(self.chart.mapToGlobal(QPointF(pos).toPoint()), self.describe(token_id), self.chart)
