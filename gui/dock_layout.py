"""The docks: where each one starts and its share of the window, presentation mode's tabbed arrangement, and
the layout saved between sessions (versioned: a layout saved by an older dock set falls back to the default)."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabWidget, QWidget

from .theme import Appearance

LAYOUT_VERSION = 7  # bump when docks change: an older saved layout then falls back to the default
TITLES = {"controls": "Controls", "context": "Context", "candidates": "Candidates", "kv": "KV cache",
          "stop": "Stop", "timing": "Timing", "explain": "Explain", "attention": "Attention",
          "lens": "Logit lens",
          "branches": "Branches", "compare": "Compare"}
LEFT = ("controls", "explain")
HIDDEN_AT_FIRST = ("attention", "lens")  # they slow every step (each is recorded while it is shown)


class DockLayout:
    def __init__(self, window: QMainWindow, widgets: dict[str, QWidget], appearance: Appearance,
                 settings: QSettings):
        self.window, self.appearance, self.settings = window, appearance, settings
        placeholder = QWidget()
        placeholder.setMaximumSize(0, 0)
        window.setCentralWidget(placeholder)
        window.setDockNestingEnabled(True)
        window.setTabPosition(Qt.AllDockWidgetAreas, QTabWidget.TabPosition.North)  # tabs read like titles
        self.docks: dict[str, QDockWidget] = {key: self._dock(key, widgets[key]) for key in TITLES}
        self._arrange()
        self.proportion()
        self.default_state = QByteArray()
        self._state_before_presentation: QByteArray | None = None

    def _dock(self, key: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(TITLES[key], self.window)
        dock.setObjectName(f"dock_{key}")
        dock.setWidget(widget)
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

    def remember_default(self) -> None:
        """Keep the layout as built as the default; called once the toolbar is in, so that it is part of it."""
        self.default_state = self.window.saveState(LAYOUT_VERSION)

    def proportion(self) -> None:
        """The default share of the window for each dock (also after the type size changes)."""
        d, w = self.docks, self.window
        width, height = max(w.width(), 1280), max(w.height(), 720)
        left = int(width * 0.22)
        w.resizeDocks([d["controls"], d["context"]], [left, width - left], Qt.Horizontal)
        shares = (0.13, 0.45, 0.42) if self.appearance.presentation else (0.14, 0.47, 0.35)
        w.resizeDocks([d["context"], d["candidates"], d["kv"]], [int(height * s) for s in shares], Qt.Vertical)
        right = width - left
        tabbed = {t for key in ("candidates", "kv", "controls") for t in w.tabifiedDockWidgets(d[key])}
        if d["stop"] not in tabbed:
            w.resizeDocks([d["candidates"], d["stop"]], [int(right * 0.72), int(right * 0.28)], Qt.Horizontal)
        if d["timing"] not in tabbed:
            w.resizeDocks([d["kv"], d["timing"]], [int(right * 0.70), int(right * 0.30)], Qt.Horizontal)
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
            # Stop and Timing, and what is tabbed with them (it would stay beside Candidates)
            behind_kv = ("stop", "timing", "compare", "attention", "lens")
            for key in ("controls", "explain", "kv", *behind_kv):
                if d[key].isFloating():
                    d[key].setFloating(False)
            w.tabifyDockWidget(d["controls"], d["explain"])
            for key in behind_kv:
                w.tabifyDockWidget(d["kv"], d[key])
            d["controls"].raise_()
            d["kv"].raise_()
            self.proportion()
            return
        state, self._state_before_presentation = self._state_before_presentation, None
        if state is None or not w.restoreState(state, LAYOUT_VERSION):
            w.restoreState(self.default_state, LAYOUT_VERSION)
            self.proportion()

    def restore(self) -> bool:
        """Restore the saved layout when its version matches; otherwise keep the default one."""
        if int(self.settings.value("layout/version", 0) or 0) != LAYOUT_VERSION:
            return False
        geometry = self.settings.value("layout/geometry")
        state = self.settings.value("layout/state")
        if isinstance(geometry, QByteArray):
            self.window.restoreGeometry(geometry)
        if not isinstance(state, QByteArray) or not self.window.restoreState(state, LAYOUT_VERSION):
            self.window.restoreState(self.default_state, LAYOUT_VERSION)
            return False
        return True

    def save(self) -> None:
        self.settings.setValue("layout/version", LAYOUT_VERSION)
        self.settings.setValue("layout/geometry", self.window.saveGeometry())
        # Presentation mode's tabbed layout is temporary: keep the one it will return to.
        state = self._state_before_presentation or self.window.saveState(LAYOUT_VERSION)
        self.settings.setValue("layout/state", state)
        self.settings.sync()

    def reset(self) -> None:
        self.window.restoreState(self.default_state, LAYOUT_VERSION)
        for key, dock in self.docks.items():
            dock.setVisible(key not in HIDDEN_AT_FIRST)
        if self._state_before_presentation is not None:
            self._apply_presentation(True)  # the default layout, as presentation mode shows it
        else:
            self.proportion()
