"""A widget's layout requests passed on to its parent only when its size constraints changed.

Qt passes every layout activation up to the window ("ideally only if sizeHint() or sizePolicy() has changed",
says QLayout::activate, which does not check): a label in Context or Candidates whose text changes at every
frame of a run re-laid out the view, then its dock, then the main window, whose layout then repainted the
whole window (1600x930 px) one event-loop turn after the frame's own paint (benchmarks/RESULTS.md, "The app
while running": 2-3 ms of GUI CPU a frame). Between a view and its dock, the gate lets a request through
only when what the dock's layout reads from the view (its size hints, its minimum and maximum sizes, its
size policy) changed since it last let one through; the view's own layout still follows every change.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtWidgets import QWidget, QWidgetItem


class LayoutGate(QWidget):
    """Holds `inner` and fills itself with it; to its parent's layout it is the widget it holds."""

    def __init__(self, inner: QWidget, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName(f"gate_{inner.objectName() or type(inner).__name__}")
        self.inner = inner
        inner.setParent(self)
        self._item = QWidgetItem(inner)  # reads the hints as a layout would (minimum, maximum, policy)
        self._told = self._shape()
        self._adopt(self._told)
        inner.show()

    def widget(self) -> QWidget:
        return self.inner

    def _shape(self) -> tuple:
        item, policy = self._item, self.inner.sizePolicy()
        return (item.sizeHint().toTuple(), item.minimumSize().toTuple(), item.maximumSize().toTuple(),
                policy.horizontalPolicy(), policy.verticalPolicy(), policy.horizontalStretch(),
                policy.verticalStretch())

    def _adopt(self, shape: tuple) -> None:
        self.setSizePolicy(self.inner.sizePolicy())
        self.setMaximumSize(QSize(*shape[2]))

    def sizeHint(self) -> QSize:
        return self._item.sizeHint()

    def minimumSizeHint(self) -> QSize:
        return self._item.minimumSize()

    def _pass_on_if_changed(self) -> None:
        shape = self._shape()
        if shape != self._told:
            self._told = shape
            self._adopt(shape)
            self.updateGeometry()

    def event(self, event) -> bool:
        if event.type() == QEvent.LayoutRequest:  # posted by the inner widget's updateGeometry
            self._pass_on_if_changed()
            return True
        return super().event(event)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._told = None  # hidden, it was not told of changes: tell the parent once
        self._pass_on_if_changed()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.inner.setGeometry(self.rect())
