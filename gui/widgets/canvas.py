"""What every custom-painted canvas shares: its background, or a placeholder while it has nothing to show."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QWidget

from gui.theme import Appearance


def begin_paint(canvas: QWidget, appearance: Appearance, placeholder: str, empty: bool) -> QPainter | None:
    """A custom-painted canvas's background; an empty one shows `placeholder` instead (then None)."""
    t = appearance.theme
    painter = QPainter(canvas)
    painter.setRenderHint(QPainter.Antialiasing)
    painter.fillRect(canvas.rect(), QColor(t.panel))
    if not empty:
        return painter
    painter.setPen(QColor(t.muted))
    painter.setFont(appearance.font(1.0))
    painter.drawText(canvas.rect().adjusted(12, 12, -12, -12), Qt.AlignLeft | Qt.TextWordWrap, placeholder)
    painter.end()
    return None
