"""The docks: where each one starts and its share of the window, presentation mode's tabbed arrangement, and
the layout saved between sessions (versioned: a layout saved by an older dock set falls back to the default;
so does one that does not fit the screen it is restored on).

The layout holds from 1024x700 up: the secondary docks' contents scroll rather than hold the window open
(their minimum sizes stay honoured inside the scroll area); Candidates and Context do not scroll and get
the larger shares; a window resize that leaves them squeezed below their share gives back the default
proportions."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QEvent, QObject, QRect, QSettings, QSize, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea, QTabBar, QTabWidget, QWidget

from gui.theme import Appearance

LAYOUT_VERSION = 8  # bump when docks change: an older saved layout then falls back to the default
TITLES = {"controls": "Controls", "context": "Context", "candidates": "Candidates", "kv": "KV cache",
          "stop": "Stop", "timing": "Timing", "explain": "Explain", "attention": "Attention",
          "lens": "Logit lens",
          "branches": "Branches", "compare": "Compare"}
LEFT = ("controls", "explain")
HIDDEN_AT_FIRST = ("attention", "lens")  # they slow every step (each is recorded while it is shown)
PRIORITY = ("context", "candidates")  # never scrolled, never squeezed below their minimum
SQUEEZED = 0.28  # Candidates below this share of the window's height (or 0.4 of its width): re-proportion


def scrolled(widget: QWidget) -> QScrollArea:
    """The widget in a frameless scroll area: below its minimum size it scrolls instead of holding the window
    (and its dock) at that size."""
    area = QScrollArea()
    area.setObjectName(f"scroll_{widget.objectName() or type(widget).__name__}")
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setMinimumSize(60, 40)
    return area


class DockLayout(QObject):
    def __init__(self, window: QMainWindow, widgets: dict[str, QWidget], appearance: Appearance,
                 settings: QSettings):
        super().__init__(window)
        self.window, self.appearance, self.settings = window, appearance, settings
        placeholder = QWidget()
        placeholder.setMaximumSize(0, 0)
        window.setCentralWidget(placeholder)
        window.setDockNestingEnabled(True)
        window.setTabPosition(Qt.AllDockWidgetAreas, QTabWidget.TabPosition.North)  # tabs read like titles
        self.docks: dict[str, QDockWidget] = {key: self._dock(key, widgets[key]) for key in TITLES}
        self._arrange()
        self._compacted = False  # Stop and Timing tabbed behind the KV cache for a small window
        self.proportion(compact=False)  # the window's size is not known yet
        self.default_state = QByteArray()
        self._state_before_presentation: QByteArray | None = None
        self._recheck = QTimer(self, singleShot=True, interval=150)  # once a resize has settled
        self._recheck.timeout.connect(self.heal)
        window.installEventFilter(self)

    def _dock(self, key: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(TITLES[key], self.window)
        dock.setObjectName(f"dock_{key}")
        dock.setWidget(widget if key in PRIORITY else scrolled(widget))
        dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable |
                         QDockWidget.DockWidgetClosable)
        area = Qt.LeftDockWidgetArea if key in LEFT else Qt.RightDockWidgetArea
        self.window.addDockWidget(area, dock)
        return dock

    def _arrange(self) -> None:
        # Controls and Explain on the left; Context (Branches behind it) on top; Candidates over KV; Stop
        # (Compare behind it) over Timing (Attention behind it) on the right; Logit lens behind the KV cache.
        d, w = self.docks, self.window
        w.splitDockWidget(d["controls"], d["explain"], Qt.Vertical)
        w.splitDockWidget(d["context"], d["candidates"], Qt.Vertical)
        w.splitDockWidget(d["candidates"], d["kv"], Qt.Vertical)
        w.splitDockWidget(d["candidates"], d["stop"], Qt.Horizontal)
        w.splitDockWidget(d["kv"], d["timing"], Qt.Horizontal)
        for key in HIDDEN_AT_FIRST:  # before they join a tab group: hidden after, with two such groups,
            d[key].hide()  # one group's old tab bar stayed on screen over Candidates
        w.tabifyDockWidget(d["timing"], d["attention"])
        w.tabifyDockWidget(d["kv"], d["lens"])  # the width its heatmap and table need
        w.tabifyDockWidget(d["stop"], d["compare"])
        w.tabifyDockWidget(d["context"], d["branches"])  # one click away, at the width a tree needs
        for key in ("timing", "stop", "context"):
            d[key].raise_()
        self._hide_tab_bars()

    def _hide_tab_bars(self) -> None:
        """Hide the window's dock tab bars; its next layout shows again the ones in use. Qt leaves stale ones
        visible: tabifying Stop with Compare (and Context with Branches) made two tab bars each, and the
        first stayed where the layout had put it before the window's size was known (a second "Stop |
        Compare" over Candidates); a restoreState leaves the previous layout's bars behind in the same way."""
        for bar in self.window.findChildren(QTabBar):
            if bar.parent() is self.window:
                bar.hide()

    def _restore_state(self, state: QByteArray) -> bool:
        self._hide_tab_bars()
        return self.window.restoreState(state, LAYOUT_VERSION)

    def remember_default(self) -> None:
        """Keep the layout as built as the default; called once the toolbar is in, so that it is part of it."""
        self.default_state = self.window.saveState(LAYOUT_VERSION)

    def proportion(self, compact: bool = True) -> None:
        """The default share of the window for each dock (also after the type size changes). In a small
        window (below 1200x760) Stop and Timing first go behind the KV cache as tabs, as in presentation mode:
        beside Candidates and the KV cache they left each a strip too small to read."""
        d, w = self.docks, self.window
        small = w.width() < 1200 or w.height() < 760
        if compact and small and not self.appearance.presentation and not self._compacted:
            self._tab_behind_kv(("stop", "timing", "compare", "attention"))
            self._compacted = True
        elif compact and not small and self._compacted and not self.appearance.presentation:
            self._restore_state(self.default_state)  # grown back: that tabbing was only for room
            self._compacted = False
        width = w.width() if w.width() >= 1000 else 1280  # before the window has its size: a typical one
        height = w.height() if w.height() >= 680 else 720
        area = d["controls"].widget()  # its minimum width (and a vertical scroll bar's): no sideways scroll
        need = area.widget().minimumSizeHint()
        column = (height - 110) * (1.0 if d["explain"] in w.tabifiedDockWidgets(d["controls"]) else 0.58)
        bar = area.verticalScrollBar().sizeHint().width() + 8 if need.height() > column else 0
        controls = need.width() + bar + 2
        left = min(max(int(width * 0.22), controls), int(width * 0.34))
        w.resizeDocks([d["controls"], d["context"]], [left, width - left], Qt.Horizontal)
        # Context and Candidates first: presentation's bigger type needs Context's lines to stay several
        shares = (0.22, 0.46, 0.32) if self.appearance.presentation else \
            (0.25, 0.5, 0.25) if height < 800 else (0.16, 0.48, 0.36)
        w.resizeDocks([d["context"], d["candidates"], d["kv"]], [int(height * s) for s in shares], Qt.Vertical)
        right = width - left
        tabbed = {t for key in ("candidates", "kv", "controls") for t in w.tabifiedDockWidgets(d[key])}
        if d["stop"] not in tabbed:
            # its own width where that leaves Candidates 60 % (else it scrolls sideways)
            stop = min(max(int(right * 0.28), d["stop"].widget().widget().minimumSizeHint().width() + 4),
                       int(right * 0.4))
            w.resizeDocks([d["candidates"], d["stop"]], [right - stop, stop], Qt.Horizontal)
        if d["timing"] not in tabbed:
            # Timing holds two plots (per step, and the timeline to scale): it needs more than a third
            w.resizeDocks([d["kv"], d["timing"]], [int(right * 0.64), int(right * 0.36)], Qt.Horizontal)
        if d["explain"] not in tabbed:
            w.resizeDocks([d["controls"], d["explain"]], [int(height * 0.58), int(height * 0.42)], Qt.Vertical)

    def set_presentation(self, on: bool) -> None:
        """Bigger type needs room: presentation mode stacks the secondary docks as tabs (Explain behind
        Controls; Stop and Timing behind the KV cache), so Candidates and the KV cache get the whole
        width; leaving it puts back the layout from before."""
        # Deferred: the action's triggered slot, which resizes the type, runs after this (toggled) one.
        QTimer.singleShot(0, lambda: self._apply_presentation(on))

    def _apply_presentation(self, on: bool) -> None:
        d, w = self.docks, self.window
        if on:
            self._state_before_presentation = w.saveState(LAYOUT_VERSION)
            for key in ("controls", "explain"):
                if d[key].isFloating():
                    d[key].setFloating(False)
            w.tabifyDockWidget(d["controls"], d["explain"])
            d["controls"].raise_()
            # Stop and Timing, and what is tabbed with them (it would stay beside Candidates)
            self._tab_behind_kv(("stop", "timing", "compare", "attention", "lens"))
            self.proportion()
            return
        state, self._state_before_presentation = self._state_before_presentation, None
        if state is None or not self._restore_state(state):
            self._restore_state(self.default_state)
            self._compacted = False
            self.proportion()

    def _tab_behind_kv(self, keys) -> None:
        d, w = self.docks, self.window
        tabbed = w.tabifiedDockWidgets(d["kv"])
        if all(d[key] in tabbed for key in keys):
            return
        for key in ("kv", *keys):
            if d[key].isFloating():
                d[key].setFloating(False)
        for key in keys:
            w.tabifyDockWidget(d["kv"], d[key])
        d["kv"].raise_()
        self._hide_tab_bars()

    def restore(self, available: QRect | None = None) -> bool:
        """Restore the saved layout when its version matches and it fits `available` (the screen's free area
        by default); otherwise keep the default one, sized to fit."""
        if int(self.settings.value("layout/version", 0) or 0) != LAYOUT_VERSION:
            return False
        geometry = self.settings.value("layout/geometry")
        state = self.settings.value("layout/state")
        if available is None and self.window.screen() is not None:
            available = self.window.screen().availableGeometry()
        if isinstance(geometry, QByteArray):
            self.window.restoreGeometry(geometry)
        saved = self.settings.value("layout/size")  # restoreGeometry fits the window to the screen itself
        saved = saved if isinstance(saved, QSize) else self.window.size()
        if available is not None:  # saved on a larger screen: the window at most this one's size
            self.window.resize(self.window.size().boundedTo(available.size()))
        # its docks' pixel sizes were for a larger window: they must still fit this one
        shrunk = saved.width() > self.window.width() or saved.height() > self.window.height()
        if isinstance(state, QByteArray) and self._restore_state(state) and (not shrunk or self.fits(available)):
            return True
        self._restore_state(self.default_state)
        self._compacted = False
        for key, dock in self.docks.items():
            dock.setVisible(key not in HIDDEN_AT_FIRST)
        if available is not None:
            size = self.window.size().boundedTo(available.size())
            self.window.setGeometry(QRect(available.topLeft(), size))
        self.window.layout().activate()
        self.proportion()
        return False

    def fits(self, available: QRect | None) -> bool:
        """The restored layout fits: the window inside the screen, each dock at least its minimum size, and
        Candidates and Context at a readable share (a layout saved on a larger screen keeps sizes in pixels)."""
        w = self.window
        if available is not None:
            if w.minimumSizeHint().width() > available.width() or w.minimumSizeHint().height() > available.height():
                return False
        w.layout().activate()
        for dock in self.docks.values():
            if dock.isFloating() and available is not None and not available.intersects(dock.geometry()):
                return False
        return not self.squeezed()

    def squeezed(self) -> bool:
        """A docked dock smaller than its minimum size, or Candidates below its share (also before the window
        is shown: isHidden, not isVisible, says whether a dock is in the layout)."""
        for dock in self.docks.values():
            if not dock.isHidden() and not dock.isFloating():
                hint, size = dock.minimumSizeHint(), dock.size()
                if size.width() < hint.width() or size.height() < hint.height():
                    return True
        candidates, w = self.docks["candidates"], self.window
        if candidates.isHidden() or candidates.isFloating():
            return False
        return candidates.height() < SQUEEZED * w.height() or candidates.width() < 0.4 * w.width()

    def eventFilter(self, watched, event) -> bool:
        if watched is self.window and event.type() == QEvent.Resize:
            self._recheck.start()
        return False

    def heal(self) -> None:
        """After a resize: when it left a dock below its minimum or Candidates squeezed (a small window
        first, then a large one: the docks that shrank do not grow back), give back the default shares."""
        small = self.window.width() < 1200 or self.window.height() < 760
        moved = self._compacted != small and not self.appearance.presentation  # across 1200x760
        if self.window.isVisible() and (self.squeezed() or moved):
            self.proportion()

    def save(self) -> None:
        self.settings.setValue("layout/version", LAYOUT_VERSION)
        self.settings.setValue("layout/geometry", self.window.saveGeometry())
        self.settings.setValue("layout/size", self.window.size())
        # Presentation mode's tabbed layout is temporary: keep the one it will return to.
        state = self._state_before_presentation or self.window.saveState(LAYOUT_VERSION)
        self.settings.setValue("layout/state", state)
        self.settings.sync()

    def reset(self) -> None:
        self._restore_state(self.default_state)
        self._compacted = False
        for key, dock in self.docks.items():
            dock.setVisible(key not in HIDDEN_AT_FIRST)
        if self._state_before_presentation is not None:
            self._apply_presentation(True)  # the default layout, as presentation mode shows it
        else:
            self.proportion()
