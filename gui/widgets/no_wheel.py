"""The mouse wheel over a panel scrolls the panel: a slider, spin box or combo box it passes takes the wheel
only once it has focus (a click or Tab), so scrolling down to Speculate never moves Top-k on the way."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QAbstractScrollArea, QAbstractSlider, QAbstractSpinBox, QApplication, QComboBox, QWidget

TAKES_THE_WHEEL = (QAbstractSlider, QAbstractSpinBox, QComboBox)


class WheelOnlyWhenFocused(QObject):
    """An event filter: an unfocused widget hands the wheel to the scroll area around it."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Wheel or not isinstance(watched, QWidget) or watched.hasFocus():
            return False
        area = _scroll_area_around(watched)
        if area is not None:
            # Sent on explicitly (not ignored for Qt to propagate): Qt propagates only wheel events that came
            # from the window system, and a panel scrolls the same whoever sent the wheel.
            viewport = area.viewport()
            at = viewport.mapFromGlobal(event.globalPosition())
            QApplication.sendEvent(viewport, QWheelEvent(at, event.globalPosition(), event.pixelDelta(),
                                                         event.angleDelta(), event.buttons(), event.modifiers(),
                                                         event.phase(), event.inverted(), event.source()))
        return True


def _scroll_area_around(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    return parent


def guard(panel: QWidget) -> WheelOnlyWhenFocused:
    """Every slider, spin box and combo box inside `panel` takes the wheel only when focused (and the wheel
    no longer gives them focus)."""
    only_focused = WheelOnlyWhenFocused(panel)
    for kind in TAKES_THE_WHEEL:
        for widget in panel.findChildren(kind):
            widget.setFocusPolicy(Qt.StrongFocus)
            widget.installEventFilter(only_focused)
    return only_focused
