"""When the views redraw: at most ~30 times a second however fast reports arrive, and, during a Run on
CPU, within a small share of the GUI thread's time.

During Run the engine uses every core, so each ms the GUI spends drawing is decode time lost: a run
redraws less often, and at each redraw only the cheap views (the context's new tokens, the status) plus
one of the costly plot views, in turn (`takes_turn`). Measured on 2 cores (benchmarks/gui_probe.py): a
plot view's refresh and paint cost 3-11 ms of GUI CPU, all of them together ~28 ms.
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from collections import deque
from typing import Callable

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal, Slot

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second while stepping by hand
RUN_REDRAW_INTERVAL_MS = int(os.environ.get("TOKENSTEP_RUN_REDRAW_MS", 250))
# A plot view gets its turn only while the GUI thread has used less than this share of one core during
# the run (a token bucket over its CPU time: a slow paint postpones the next turns)...
RUN_GUI_CPU_SHARE = 0.05
# ...but never fewer turns than one per this many seconds: where the GUI thread's own event handling
# already takes the share (measured 1.8-3.5 ms of GUI CPU per step on an AVX2 machine at ~30 steps/s),
# the plots would otherwise stand still for a whole run. One plot redraw a second costs ~1 % of a core.
RUN_MIN_TURN_S = 1.0
# A waiting thread gets the GIL after this long (Python's default is 5 ms): the worker thread relaying the
# engine's replies need not wait for a whole redraw.
GIL_SWITCH_S = 0.001


class RedrawScheduler(QObject):
    redraw = Signal()  # read the state and draw

    def __init__(self, is_running: Callable[[], bool], on_cpu: Callable[[], bool], parent: QObject | None = None,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 wall_clock: Callable[[], float] = time.perf_counter):
        super().__init__(parent)
        self.is_running, self.on_cpu = is_running, on_cpu
        self.cpu_clock, self.wall_clock = cpu_clock, wall_clock
        self.cpu_share, self.min_turn_s = RUN_GUI_CPU_SHARE, RUN_MIN_TURN_S
        self._throttle = QTimer(self, singleShot=True, interval=REDRAW_INTERVAL_MS)
        self._throttle.timeout.connect(self._on_throttle)
        self._due = False
        self.redraw_ms: deque[float] = deque(maxlen=2000)  # what every view's redraw cost, for the probe
        self._turn_takers: list[weakref.ref] = []  # costly views that redraw one at a time during Run
        self._turn: QObject | None = None
        self.turns_taken = 0
        self._cpu_allowance = 0.0  # seconds of GUI-thread CPU the plot views may still spend in this run
        self._cpu_mark = self._wall_mark = self._last_turn = 0.0
        sys.setswitchinterval(GIL_SWITCH_S)
        # Qt converts large images (the window's backing store) on its global thread pool, one thread per
        # core: bursts that take both cores from decode. One thread keeps painting off the engine's core.
        QThreadPool.globalInstance().setMaxThreadCount(1)

    @property
    def redraw_due(self) -> bool:
        """A change is waiting for the end of the current interval to be drawn."""
        return self._due

    def dirty(self) -> None:
        """Something changed: redraw now, or at the end of the current interval."""
        if self._throttle.isActive():
            self._due = True
            return
        self.redraw_now()

    @Slot()
    def _on_throttle(self) -> None:
        if self._due:
            self._due = False
            self.redraw_now()

    def redraw_now(self) -> None:
        started = time.perf_counter()
        self._next_turn()
        self.redraw.emit()
        self.redraw_ms.append((time.perf_counter() - started) * 1000)
        self._throttle.start(RUN_REDRAW_INTERVAL_MS if self.is_running() else REDRAW_INTERVAL_MS)

    def take_turns(self, view: QObject) -> None:
        """Register a costly view: during Run it redraws only when `takes_turn(view)` says so (every
        other turn when its class sets FIRST)."""
        self._turn_takers.append(weakref.ref(view))

    def takes_turn(self, view: QObject) -> bool:
        """True when `view` should redraw now: always, except during a Run on CPU, where the visible
        costly views take one redraw each in turn (a hidden one has nothing to show, so it is skipped)."""
        return not self.is_running() or not self.on_cpu() or view is self._turn

    def _next_turn(self) -> None:
        self._turn = None
        cpu, wall = self.cpu_clock(), self.wall_clock()
        if not self.is_running():
            self._cpu_allowance, self._cpu_mark, self._wall_mark, self._last_turn = 0.0, cpu, wall, wall
            return
        # earn the share of the wall time since the last redraw, pay what the GUI thread used in it
        # (the last redraw's paint included); kept within one redraw interval's worth either way
        earned = self.cpu_share * (wall - self._wall_mark) - (cpu - self._cpu_mark)
        limit = self.cpu_share * RUN_REDRAW_INTERVAL_MS / 1000
        self._cpu_allowance = min(max(self._cpu_allowance + earned, -limit), limit)
        self._cpu_mark, self._wall_mark = cpu, wall
        if self._cpu_allowance <= 0 and wall - self._last_turn < self.min_turn_s:
            return
        visible = [view for ref in self._turn_takers if (view := ref()) is not None and view.isVisible()]
        first = [view for view in visible if view.FIRST]
        rest = [view for view in visible if view not in first]
        if first and rest:  # every other turn to the first views, the rest in turn between
            n = self.turns_taken
            self._turn = first[(n // 2) % len(first)] if n % 2 == 0 else rest[(n // 2) % len(rest)]
        elif visible:
            self._turn = visible[self.turns_taken % len(visible)]
        if self._turn is not None:
            self.turns_taken += 1
            self._last_turn = wall
