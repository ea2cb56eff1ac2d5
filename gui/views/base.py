"""What every dock view shares: redraw only while visible, and restyle when the appearance changes."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QDockWidget, QScrollArea, QWidget

from inference.events import StepDone

from gui.state.intents import Intents
from gui.theme import Appearance


class View(QWidget):
    """Subclasses implement `refresh()` (draw the state the history holds) and may override `restyle()`.

    Every visible view redraws at every redraw, from the same state (redraw.py): `shown_step` is the step
    the view drew last (the history's shown step then), what tests compare across views."""

    COSTLY = False  # a plot: several ms per redraw (redraw.py budgets the frames of a run for all of them)

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__()
        self.intents, self.appearance = intents, appearance
        self._stale = True
        self._watching_dock = False
        self.shown_step: int | None = None  # the step drawn last (0: the prompt only); None: never drawn
        self.scheduler = intents.scheduler
        self.scheduler.redraw.connect(self._on_redraw)
        appearance.changed.connect(self._on_appearance)

    def _on_redraw(self) -> None:
        # All views refresh in one event-loop turn, so the window repaints once per redraw, not per view.
        if self.isVisible():  # a hidden or tabbed-away dock costs nothing until it is shown
            self._draw()
        else:
            self._stale = True

    def _draw(self) -> None:
        self._stale = False
        step = self.intents.history.shown_index()
        self.refresh()
        if not self._stale:  # not tabbed away: it drew that step
            self.shown_step = step

    def _fill_background(self) -> None:
        """The view paints its own background, in the colour the style sheet gives what it sits in (a scroll
        area's panel, else the dock's window colour): to Qt it is then opaque, and a frame that changes a label or a
        chart inside it no longer has the dock (and every widget between) paint its style sheet's background under
        them first (~0.8 ms of a 1600x1000 frame)."""
        parent, in_scroll_area = self.parentWidget(), False
        while parent is not None and not isinstance(parent, QDockWidget):
            in_scroll_area = in_scroll_area or isinstance(parent, QScrollArea)
            parent = parent.parentWidget()
        t = self.appearance.theme
        palette = self.palette()
        palette.setColor(QPalette.Window, QColor(t.panel if in_scroll_area else t.window))
        self.setPalette(palette)
        self.setAutoFillBackground(True)

    def _on_appearance(self) -> None:
        self._fill_background()
        self.restyle()
        self._stale = True
        self._on_redraw()

    def changeEvent(self, event) -> None:
        """The app's language changed (Qt sends LanguageChange to every widget): word the static texts again
        and redraw the same state in the new words; the engine and the history are untouched."""
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:
            self.retranslate()
            self._stale = True
            self._on_redraw()

    def retranslate(self) -> None:
        """Re-set the texts set once (titles, axis names, tooltips) and drop what the view keeps to skip a
        redraw; the texts a refresh sets come from translate() at each refresh."""

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._fill_background()  # placed now: in a scroll area or not
        if self._stale:
            self._draw()

    def tabbed_away(self) -> bool:
        """True while this view's dock is tabbed behind another: Qt keeps such a dock 'visible' and moves
        it off-screen, so `isVisible` does not tell. A view that returns early from `refresh` when this is
        True is refreshed when its tab is raised."""
        if not self.isVisible() or not self.visibleRegion().isEmpty():
            return False
        self._stale = True
        dock = self.parentWidget()
        while dock is not None and not isinstance(dock, QDockWidget):  # in a scroll area (dock_layout)
            dock = dock.parentWidget()
        if isinstance(dock, QDockWidget) and not self._watching_dock:
            self._watching_dock = True
            dock.visibilityChanged.connect(self._on_dock_visibility)
        return True

    def _on_dock_visibility(self, visible: bool) -> None:
        if visible and self._stale:
            QTimer.singleShot(0, self._catch_up)  # once the raised tab has its place on screen

    def _catch_up(self) -> None:
        if self._stale and self.isVisible():
            self._draw()

    def past_step(self) -> StepDone | None:
        """The shown step when it is one before the newest (the history slider or a chip moved back), so
        that every view shows the state as it was then; None for the newest or the pending step, which the
        views show as it is now."""
        shown = self.intents.shown()
        if shown is None or shown.step is None or shown.index >= len(self.intents.steps):
            return None
        return shown.step

    def restyle(self) -> None:
        """Re-apply colours and fonts; the next refresh redraws the data."""

    def refresh(self) -> None:
        raise NotImplementedError

