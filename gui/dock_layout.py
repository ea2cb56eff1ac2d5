"""The docks: where each one starts and its share of the window, the arrangements for small and large
windows and for presentation mode, and the layout saved between sessions (versioned: a layout saved by an
older dock set falls back to the default; so does one saved on a screen of another size, or one that does
not fit the screen it is restored on).

Three arrangements, chosen by the window's size (and F5):
- large (from 1200x860, e.g. 1600x1000 or a 1920x1080 screen): Controls over Explain on the left; Context
  (Branches behind it) on top; Candidates with Stop (Compare) beside it; the KV cache (Logit lens) with
  Timing (Attention) beside it at the bottom. Every main view is on screen at once.
- compact (below it, e.g. 1280x720, the default --record size and a common projector, or 1024x700): the
  window has no room for three rows, so Explain goes behind Controls, and the KV cache, Stop, Timing,
  Compare, Branches (Attention, Logit lens) behind Candidates, as tabs under Context: each tab gets the
  whole height under Context (a plot, not two lines of text), one click away. Context, alone on top, shows
  no title bar: its summary line says what it is.
- presentation (F5, large window): the bigger type keeps Context, Candidates and the KV cache in rows, and
  tabs Explain behind Controls and Stop, Timing, Compare behind the KV cache; in a compact window F5 uses
  the compact arrangement, so the window stays within the screen.
A dock in a tab group shows no title bar of its own: its tab names it (the title bar's 27 px are what kept
a compact presentation window taller than a 720 px screen); a floated dock gets its title back.

Secondary docks' contents scroll rather than hold the window open (their minimum sizes stay honoured inside
the scroll area); Candidates and Context do not scroll and get the larger shares; a window resize that
leaves them squeezed below their share gives back the default proportions, and one across the compact
threshold changes the arrangement."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QEvent, QObject, QRect, QSettings, QSize, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea, QTabBar, QTabWidget, QWidget

from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.theme import Appearance
from gui.widgets.layout_gate import LayoutGate

LAYOUT_VERSION = 10  # bump when docks change: an older saved layout then falls back to the default
TITLES = {"controls": QT_TRANSLATE_NOOP("Docks", "Controls"), "context": QT_TRANSLATE_NOOP("Docks", "Context"),
          "candidates": QT_TRANSLATE_NOOP("Docks", "Candidates"), "kv": QT_TRANSLATE_NOOP("Docks", "KV cache"),
          "stop": QT_TRANSLATE_NOOP("Docks", "Stop", "the dock of the stop rules"),
          "timing": QT_TRANSLATE_NOOP("Docks", "Timing"), "explain": QT_TRANSLATE_NOOP("Docks", "Explain"),
          "attention": QT_TRANSLATE_NOOP("Docks", "Attention"),
          "lens": QT_TRANSLATE_NOOP("Docks", "Logit lens"),
          "branches": QT_TRANSLATE_NOOP("Docks", "Branches"), "compare": QT_TRANSLATE_NOOP("Docks", "Compare"),
          "serving": QT_TRANSLATE_NOOP("Docks", "Serving", "the dock of many requests served at once")}
TITLE_NOTES = {"stop": "the dock of the stop rules", "serving": "the dock of many requests served at once"}  # the disambiguation of a title marked with one
LEFT = ("controls", "explain")
HIDDEN_AT_FIRST = ("attention", "lens",  # they slow every step (each is recorded while it is shown)
                   "serving")  # shown when requests are served (behind the KV cache, beside Timing)
PRIORITY = ("context", "candidates")  # never scrolled, never squeezed below their minimum (behind a LayoutGate:
# their labels change at every frame, and their layout requests reach the dock only when their size hints do)
SQUEEZED = 0.28  # Candidates below this share of the window's height (or 0.4 of its width): re-proportion
COMPACT_BELOW = QSize(1200, 860)  # a window narrower or lower than this gets the compact arrangement
SECONDARY = ("kv", "stop", "timing", "compare", "attention", "lens", "serving")
# Which docks go behind which as tabs, per arrangement (the large one is the default as built)
GROUPS = {"large": {},
          "compact": {"controls": ("explain",), "candidates": SECONDARY + ("branches",)},
          "presentation": {"controls": ("explain",), "kv": ("stop", "timing", "compare", "attention", "lens",
                                                           "serving")}}
SIMILAR_SCREEN = 0.1  # a saved layout is reused on a screen within 10 % of the size it was saved on


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
        self._retitle = QTimer(self, singleShot=True, interval=0)  # once the docks moved: which show a title
        self._retitle.timeout.connect(self._titles)
        self.docks: dict[str, QDockWidget] = {key: self._dock(key, widgets[key]) for key in TITLES}
        self._arrange()
        self.arrangement = "large"  # as built; proportion() picks the one for the window's size
        self.default_state = QByteArray()
        self._before_presentation: tuple[QByteArray, str] | None = None  # the layout F5 returns to
        self._recheck = QTimer(self, singleShot=True, interval=150)  # once a resize has settled
        self._recheck.timeout.connect(self.heal)
        window.installEventFilter(self)

    def _dock(self, key: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(translate("Docks", TITLES[key], TITLE_NOTES.get(key)), self.window)
        dock.setObjectName(f"dock_{key}")
        dock.setWidget(LayoutGate(widget) if key in PRIORITY else scrolled(widget))
        dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable |
                         QDockWidget.DockWidgetClosable)
        area = Qt.LeftDockWidgetArea if key in LEFT else Qt.RightDockWidgetArea
        self.window.addDockWidget(area, dock)
        dock.topLevelChanged.connect(self._retitle.start)
        dock.visibilityChanged.connect(self._retitle.start)
        return dock

    def retranslate(self) -> None:
        """The docks' titles (and so their tabs and View menu entries) in the app's language."""
        for key, dock in self.docks.items():
            dock.setWindowTitle(translate("Docks", TITLES[key], TITLE_NOTES.get(key)))

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
        w.tabifyDockWidget(d["kv"], d["serving"])  # the bottom row's wide part: rows, blocks and numbers
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

    def _titles(self) -> None:
        """A docked dock in a tab group with another shown dock has no title bar (its tab names it), nor has
        Context in the compact arrangement (its summary line says what it shows); any other dock has its
        own."""
        w = self.window
        for key, dock in self.docks.items():
            tabbed = not dock.isFloating() and any(
                not other.isHidden() for other in w.tabifiedDockWidgets(dock)) and not dock.isHidden()
            tabbed = tabbed or (key == "context" and self.arrangement == "compact" and not dock.isFloating())
            bare = dock.titleBarWidget() is not None
            if tabbed and not bare:
                empty = QWidget(dock)
                empty.setObjectName(f"{dock.objectName()}_tab_title")  # no title: the tab says it
                dock.setTitleBarWidget(empty)
            elif not tabbed and bare:
                old = dock.titleBarWidget()
                dock.setTitleBarWidget(None)
                old.deleteLater()

    def _restore_state(self, state: QByteArray) -> bool:
        self._hide_tab_bars()
        restored = self.window.restoreState(state, LAYOUT_VERSION)
        self._titles()
        return restored

    def remember_default(self) -> None:
        """Keep the layout as built as the default; called once the toolbar is in, so that it is part of it."""
        self._titles()
        self.default_state = self.window.saveState(LAYOUT_VERSION)

    def compact(self, size: QSize | None = None) -> bool:
        """A window of this size (the window's own by default) is too small for the large arrangement."""
        size = size or self.window.size()
        return size.width() < COMPACT_BELOW.width() or size.height() < COMPACT_BELOW.height()

    def wanted(self, size: QSize | None = None) -> str:
        if self.compact(size):
            return "compact"
        return "presentation" if self.appearance.presentation else "large"

    def resize_window(self, size: QSize) -> None:
        """The window at this size in the arrangement for it: arranged first, since the arrangement of a
        larger window may need more than `size` (presentation's three rows need ~730 px of a 720 px screen)."""
        if self.wanted(size) != self.arrangement:
            self._arrange_as(self.wanted(size))
        self.window.resize(size)
        self.proportion()

    def _arrange_as(self, arrangement: str) -> None:
        """The default layout, then the arrangement's tab groups; the docks shown stay shown, floating ones
        are docked again (a tab group needs them in it)."""
        d, w = self.docks, self.window
        shown = {key for key, dock in d.items() if not dock.isHidden()}
        for dock in d.values():
            if dock.isFloating():
                dock.setFloating(False)
        self._restore_state(self.default_state)
        for key, dock in d.items():
            if dock.isHidden() == (key in shown):
                dock.setVisible(key in shown)
        for head, members in GROUPS[arrangement].items():
            for key in members:
                w.tabifyDockWidget(d[head], d[key])
            d[head].raise_()
        if arrangement == "compact":
            d["context"].raise_()
        self.arrangement = arrangement
        self._hide_tab_bars()
        self._titles()

    def proportion(self, compact: bool = True) -> None:
        """The arrangement for the window's size, and the default share of the window for each dock (also
        after the type size changes). `compact=False` keeps the arrangement (the window's size is not
        known yet)."""
        d, w = self.docks, self.window
        size = w.size()
        if compact and self.wanted() != self.arrangement:
            self._arrange_as(self.wanted())
            self.keep_on_screen(size)  # moving the docks may have grown the window for a moment
        width = w.width() if w.width() >= 1000 else 1280  # before the window has its size: a typical one
        height = w.height() if w.height() >= 680 else 720
        area = d["controls"].widget()  # its minimum width (and a vertical scroll bar's): no sideways scroll
        need = area.widget().minimumSizeHint()
        column = (height - 110) * (1.0 if d["explain"] in w.tabifiedDockWidgets(d["controls"]) else 0.58)
        bar = area.verticalScrollBar().sizeHint().width() + 8 if need.height() > column else 0
        controls = need.width() + bar + 2
        # the width where its forms keep labels beside fields, where that is at most 30 % of the window
        preferred = min(area.widget().sizeHint().width() + bar + 2, int(width * 0.3))
        left = min(max(int(width * 0.22), controls, preferred), int(width * 0.36))
        w.resizeDocks([d["controls"], d["context"]], [left, width - left], Qt.Horizontal)
        right = width - left
        if self.arrangement == "compact":
            # Context a few lines of chips; the tab group (Candidates first) the rest of the height
            share = 0.3 if self.appearance.presentation else 0.28
            w.resizeDocks([d["context"], d["candidates"]], [int(height * share), int(height * (1 - share))],
                          Qt.Vertical)
            return
        # Context and Candidates first: presentation's bigger type needs Context's lines to stay several
        shares = (0.22, 0.46, 0.32) if self.appearance.presentation else (0.16, 0.48, 0.36)
        w.resizeDocks([d["context"], d["candidates"], d["kv"]], [int(height * s) for s in shares], Qt.Vertical)
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

    def bring_forward(self, key: str, share: float = 0.5) -> None:
        """Show a dock and raise its tab. In the large and presentation arrangements (there it is behind the KV
        cache; the compact one gives it the height under Context already) its row gets `share` of the window's
        height: the Serving dock's rows, blocks and numbers need more than the KV cache's row; Context and
        Candidates keep the rest, as a request clicked there shows its steps in them."""
        d, w = self.docks, self.window
        dock = d[key]
        dock.show()
        dock.raise_()
        if self.arrangement == "compact" or dock.isFloating() or dock not in w.tabifiedDockWidgets(d["kv"]):
            return
        height = w.height()
        w.resizeDocks([d["context"], d["candidates"], dock],
                      [int(height * 0.15), int(height * (0.85 - share)), int(height * share)], Qt.Vertical)

    def set_presentation(self, on: bool) -> None:
        """Bigger type needs room: presentation mode tabs the secondary docks (see the module's docstring);
        leaving it puts back the layout from before."""
        # Deferred: the action's triggered slot, which resizes the type, runs after this (toggled) one.
        QTimer.singleShot(0, lambda: self._apply_presentation(on))

    def _apply_presentation(self, on: bool) -> None:
        size = self.window.size()
        if on:
            if self._before_presentation is None:
                self._before_presentation = (self.window.saveState(LAYOUT_VERSION), self.arrangement)
            self._arrange_as(self.wanted())
            self.proportion()
        else:
            before, self._before_presentation = self._before_presentation, None
            if before is not None and before[1] == self.wanted() and self._restore_state(before[0]):
                self.arrangement = before[1]
                self._titles()
            else:
                self._arrange_as(self.wanted())
                self.proportion()
        self.keep_on_screen(size)

    def keep_on_screen(self, before: QSize) -> None:
        """A window that grew while the docks moved (bigger type raises their minimum sizes for a moment)
        back to its size `before`, and within its screen's free area where that size was."""
        w = self.window
        if w.isMaximized() or w.isFullScreen():
            return
        w.layout().activate()
        screen = w.screen()
        if screen is None:
            if w.size() != w.size().boundedTo(before):
                w.resize(w.size().boundedTo(before))
            return
        free = screen.availableGeometry()
        frame = w.frameGeometry()
        extra = QSize(frame.width() - w.width(), frame.height() - w.height())
        room = free.size() - extra
        fitted = before.width() <= room.width() and before.height() <= room.height()
        size = w.size().boundedTo(before.boundedTo(room) if fitted else before)
        if size != w.size():
            w.resize(size)
        frame = w.frameGeometry()
        if w.isVisible() and not free.contains(frame) and free.width() >= frame.width() \
                and free.height() >= frame.height():
            w.move(min(max(frame.x(), free.x()), free.right() + 1 - frame.width()),
                   min(max(frame.y(), free.y()), free.bottom() + 1 - frame.height()))

    def restore(self, available: QRect | None = None) -> bool:
        """Restore the saved layout when its version matches, it was saved on a screen of about this size
        (`available`, the screen's free area by default) and it fits; otherwise keep the default one, sized
        to fit."""
        if available is None and self.window.screen() is not None:
            available = self.window.screen().availableGeometry()
        if int(self.settings.value("layout/version", 0) or 0) == LAYOUT_VERSION and self._same_screen(available):
            geometry = self.settings.value("layout/geometry")
            state = self.settings.value("layout/state")
            if isinstance(geometry, QByteArray):
                self.window.restoreGeometry(geometry)
            saved = self.settings.value("layout/size")  # restoreGeometry fits the window to the screen itself
            saved = saved if isinstance(saved, QSize) else self.window.size()
            if available is not None:  # the window at most the screen's size
                self.window.resize(self.window.size().boundedTo(available.size()))
            # its docks' pixel sizes were for a larger window: they must still fit this one
            shrunk = saved.width() > self.window.width() or saved.height() > self.window.height()
            if isinstance(state, QByteArray) and self._restore_state(state):
                self.arrangement = str(self.settings.value("layout/arrangement", "large"))
                if self.arrangement not in GROUPS:
                    self.arrangement = "large"
                self._titles()
                if not shrunk or self.fits(available):
                    return True
        self._restore_state(self.default_state)
        self.arrangement = "large"
        for key, dock in self.docks.items():
            dock.setVisible(key not in HIDDEN_AT_FIRST)
        if available is not None:
            size = self.window.size().boundedTo(available.size())
            self.window.setGeometry(QRect(available.topLeft(), size))
        self.window.layout().activate()
        self.proportion()
        return False

    def _same_screen(self, available: QRect | None) -> bool:
        """The saved layout was saved on a screen of about this size: one from a much smaller screen (a 600 px
        Controls column, a 640 px window) or a much larger one is not reused."""
        saved = self.settings.value("layout/screen")
        if available is None or not isinstance(saved, QSize) or saved.isEmpty():
            return available is None
        return (abs(saved.width() - available.width()) <= SIMILAR_SCREEN * available.width()
                and abs(saved.height() - available.height()) <= SIMILAR_SCREEN * available.height())

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
        # shown too: a window resized while hidden (sized to the screen, then by its caller) is checked once
        # it is on screen
        if watched is self.window and event.type() in (QEvent.Resize, QEvent.Show):
            self._recheck.start()
        return False

    def heal(self) -> None:
        """After a resize: across the compact threshold, the arrangement for the new size; else, when it
        left a dock below its minimum or Candidates squeezed (a small window first, then a large one: the
        docks that shrank do not grow back), the default shares."""
        if self.window.isVisible() and (self.squeezed() or self.wanted() != self.arrangement):
            self.proportion()

    def save(self, available: QRect | None = None) -> None:
        if available is None and self.window.screen() is not None:
            available = self.window.screen().availableGeometry()
        self.settings.setValue("layout/version", LAYOUT_VERSION)
        self.settings.setValue("layout/geometry", self.window.saveGeometry())
        self.settings.setValue("layout/size", self.window.size())
        if available is not None:
            self.settings.setValue("layout/screen", available.size())
        # Presentation mode's tabbed layout is temporary: keep the one it will return to.
        state, arrangement = self._before_presentation or (self.window.saveState(LAYOUT_VERSION), self.arrangement)
        self.settings.setValue("layout/state", state)
        self.settings.setValue("layout/arrangement", arrangement)
        self.settings.sync()

    def reset(self) -> None:
        """The default layout for the window's size (and F5); leaving F5 then gives the default too."""
        for key, dock in self.docks.items():
            dock.setVisible(key not in HIDDEN_AT_FIRST)  # _arrange_as keeps the docks shown
        if self._before_presentation is not None:
            self._before_presentation = (self.default_state, "large")
        self._arrange_as(self.wanted())
        self.proportion()
