"""When the views redraw: at most ~30 times a second however fast reports arrive, and, during a Run on
CPU, within a small share of the GUI thread's time.

Every redraw redraws every visible view from the same state, so that all of them show the same step in
every frame (a recording must never contradict itself: Candidates at step 20 beside KV at step 10). During
Run the engine uses every core, so each ms the GUI spends drawing is decode time lost: a run's redraws
(frames) come less often, each only while the GUI thread stays within its CPU share (a token bucket), and
a change that comes meanwhile waits for the next frame. Measured on 2 cores (benchmarks/gui_probe.py): a
plot view's refresh and paint cost 3-11 ms of GUI CPU, all of them together ~28 ms.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from gui.widgets.frame_paint import paint_together

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second while stepping by hand
# A paced playback reveals a step per period and each must get its own frame: at 30 tokens/s a reveal every
# 33 ms met a 33 ms throttle and two steps often shared a frame (22 frames/s measured, gui_probe --paced 30)
PACED_REDRAW_INTERVAL_MS = 15
RUN_REDRAW_INTERVAL_MS = int(os.environ.get("TOKENSTEP_RUN_REDRAW_MS", 250))
# A frame is drawn during a run only while the GUI thread has used less than this share of one core (a
# token bucket over its CPU time: a slow paint postpones the next frames)...
RUN_GUI_CPU_SHARE = 0.05
# On a machine of SMALL_MACHINE_CORES or fewer the engine's threads take every core during a Run, so a ms of
# GUI CPU is a ms of decode lost (and more: the engine's other thread waits for the one the GUI displaced).
# Measured on 2 cores (benchmarks/gui_probe.py): frames cost 17-28 ms of GUI CPU each and took ~7 % of a core
# at 5 %, decode ran at 0.86-0.92 of headless; there a Run draws within half that share.
SMALL_MACHINE_CORES = 2
SMALL_MACHINE_SHARE = RUN_GUI_CPU_SHARE / 2
# ...but never fewer frames than one per this many seconds: where the GUI thread's own event handling
# already takes the share (measured 1.8-3.5 ms of GUI CPU per step on an AVX2 machine at ~30 steps/s),
# the views would otherwise stand still for a whole run. One frame a second costs ~3 % of a core.
RUN_MIN_TURN_S = 1.0


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else all of them)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_cpu_share(cores: int) -> float:
    """The share of one core a Run's frames may take on a machine with `cores` cores."""
    return SMALL_MACHINE_SHARE if cores <= SMALL_MACHINE_CORES else RUN_GUI_CPU_SHARE


class RedrawScheduler(QObject):
    redraw = Signal()  # read the state and draw: every view, from the same state

    def __init__(self, is_running: Callable[[], bool], on_cpu: Callable[[], bool], parent: QObject | None = None,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 wall_clock: Callable[[], float] = time.perf_counter):
        super().__init__(parent)
        self.is_running, self.on_cpu = is_running, on_cpu
        self.cpu_clock, self.wall_clock = cpu_clock, wall_clock
        self.cpu_share, self.min_turn_s = run_cpu_share(usable_cores()), RUN_MIN_TURN_S
        self._throttle = QTimer(self, singleShot=True, interval=REDRAW_INTERVAL_MS)
        self._throttle.timeout.connect(self._on_throttle)
        self._due = False
        self.redraw_ms: deque[float] = deque(maxlen=2000)  # what every view's redraw cost, for the probe
        self.redraw_cpu_ms: deque[float] = deque(maxlen=2000)  # the same in GUI-thread CPU (the paint comes later)
        self.paced = False  # a paced playback (playback.py) draws a frame per revealed step, CPU or not
        self.turns_taken = 0  # frames drawn during runs on CPU (each one redraws every view)
        self.frames = 0  # redraws emitted: the number a view's `frame` is compared with
        self._cpu_allowance = 0.0  # seconds of GUI-thread CPU the frames may still spend in this run
        self._cpu_mark = self._wall_mark = self._last_turn = 0.0

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

    def redraw_now(self, force: bool = False) -> None:
        """Redraw every view now; during a run on CPU only when the GUI's CPU share allows a frame (else
        the change waits for the next interval), unless `force` (a recorder's frame)."""
        running = self.is_running() and not self.paced
        if not force and not self._frame_allowed(running):
            self._due = True
            self._throttle.start(RUN_REDRAW_INTERVAL_MS)
            return
        started, cpu_started = time.perf_counter(), time.thread_time()
        self.frames += 1
        self.redraw.emit()
        paint_together()  # the frame on screen in one paint: no label a step ahead of its plot
        self.redraw_ms.append((time.perf_counter() - started) * 1000)
        self.redraw_cpu_ms.append((time.thread_time() - cpu_started) * 1000)
        self._throttle.start(RUN_REDRAW_INTERVAL_MS if running else
                             PACED_REDRAW_INTERVAL_MS if self.paced else REDRAW_INTERVAL_MS)

    def _frame_allowed(self, running: bool) -> bool:
        cpu, wall = self.cpu_clock(), self.wall_clock()
        if not running:
            self._cpu_allowance, self._cpu_mark, self._wall_mark, self._last_turn = 0.0, cpu, wall, wall
            return True
        if not self.on_cpu():
            return True
        # earn the share of the wall time since the last look, pay what the GUI thread used in it (the
        # last frame's paint included); kept within one redraw interval's worth either way
        earned = self.cpu_share * (wall - self._wall_mark) - (cpu - self._cpu_mark)
        limit = self.cpu_share * RUN_REDRAW_INTERVAL_MS / 1000
        self._cpu_allowance = min(max(self._cpu_allowance + earned, -limit), limit)
        self._cpu_mark, self._wall_mark = cpu, wall
        if self._cpu_allowance <= 0 and wall - self._last_turn < self.min_turn_s:
            return False
        self.turns_taken += 1
        self._last_turn = wall
        return True
