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

from PySide6.QtCore import QCoreApplication, QEvent, QObject
from PySide6.QtWidgets import QGraphicsView
from shiboken6 import isValid


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


# The graphics views a frame paints together: every plot registers here as it is made (plotting.make_plot).
# Searching the windows for them at every frame (topLevelWidgets, then findChildren over each whole widget
# tree) took ~0.6 ms of a frame's GUI CPU; the list is pruned of deleted views as it is read.
_views: list[QGraphicsView] = []


def paints_with_frames(view: QGraphicsView) -> None:
    """A graphics view whose scene a frame processes before its window paints (paint_together)."""
    _views.append(view)


def shown_scenes() -> list:
    """The scenes of the registered graphics views on screen (each once)."""
    _views[:] = [view for view in _views if isValid(view)]
    scenes = []
    for view in _views:
        if view.isVisible():  # shown, and so is its window
            scene = view.scene()
            if scene is not None and scene not in scenes:
                scenes.append(scene)
    return scenes


def paint_together() -> list[QObject]:
    """After a frame's views have set their items: every shown scene marks what changed while the windows'
    paints are held back. Returns the windows whose paint was held: the caller has each of them paint the
    whole frame at once, later (`paint_windows`)."""
    app = QCoreApplication.instance()
    if app is None:
        return []
    held = _HeldPaints()
    app.installEventFilter(held)
    try:
        for scene in shown_scenes():
            QCoreApplication.sendPostedEvents(scene, QEvent.MetaCall.value)  # its dirty items: regions marked
    finally:
        app.removeEventFilter(held)
    return held.windows


def paint_windows(windows: list[QObject]) -> None:
    """Each window paints what is marked now (the paint its UpdateRequest asks for), at once."""
    for window in windows:
        if isValid(window):
            QCoreApplication.sendEvent(window, QEvent(QEvent.UpdateRequest))
