"""A frame reaches the screen in ONE paint of each window: its labels and all its plots together.

A view sets its labels (the window is marked dirty at once) and its plot items (a QGraphicsScene notes the
items and processes them later, in a queued call). When Qt processes a scene's dirty items, the scene's views
send their window's pending paint at once (QGraphicsView dispatches its pending update requests), so a frame
reached the screen in as many paints as there were plots changed: the labels with the first plot, then every
other plot in a paint of its own, each a few ms later (much later on a busy machine). A viewer, a screenshot
saw Candidates' heading at step 8 over its draw strip at step 7, KV's text at 13 tokens beside its bars at 12
(issue 40, item 2). Here, at the end of a frame, every shown scene processes its dirty items while the
windows' paints are held back; then each window paints once, everything of the frame in the same paint.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QApplication, QGraphicsView


class _HeldPaints(QObject):
    """Swallows the windows' paint requests (UpdateRequest) for a moment; remembers whose."""

    def __init__(self):
        super().__init__()
        self.windows: list[QObject] = []

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.UpdateRequest:
            if obj not in self.windows:
                self.windows.append(obj)
            return True
        return False


def shown_scenes() -> list:
    """The scenes of the graphics views on screen (each once)."""
    scenes = []
    for top in QApplication.topLevelWidgets():
        if not top.isVisible():
            continue
        for view in top.findChildren(QGraphicsView):
            scene = view.scene()
            if scene is not None and view.isVisible() and scene not in scenes:
                scenes.append(scene)
    return scenes


def paint_together() -> None:
    """After a frame's views have set their items: each window paints the whole frame at once, later."""
    app = QCoreApplication.instance()
    if app is None:
        return
    held = _HeldPaints()
    app.installEventFilter(held)
    try:
        for scene in shown_scenes():
            QCoreApplication.sendPostedEvents(scene, QEvent.MetaCall.value)  # its dirty items: regions marked
    finally:
        app.removeEventFilter(held)
    for window in held.windows:  # a paint swallowed: ask again, once, for everything marked since
        QCoreApplication.postEvent(window, QEvent(QEvent.UpdateRequest), Qt.LowEventPriority.value)
