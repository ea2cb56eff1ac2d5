"""When the views redraw: at most ~30 times a second however fast reports arrive, and, during a Run on
CPU, within a share of a core for the frames.

Every redraw redraws every visible view from the same state, so that all of them show the same step in
every frame (a recording must never contradict itself: Candidates at step 20 beside KV at step 10). During
Run the engine uses every core, so each ms the GUI spends drawing is decode time lost: a run's redraws
(frames) come less often, each only while the frames stay within their CPU share (a token bucket paid with each
frame's refresh and paint), and a change that comes meanwhile waits for the next frame. Measured on 2 cores
(benchmarks/gui_probe.py, AMD EPYC): a frame's refresh and paint together cost ~13-15 ms of GUI CPU.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, QTimer, Signal, Slot

from gui.widgets.frame_paint import paint_together, paint_windows

FRAME_PAINT = QEvent.Type(QEvent.registerEventType())  # a frame's held paint, delivered to the scheduler

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second while stepping by hand
# A paced playback reveals a step per period and each must get its own frame: at 30 tokens/s a reveal every
# 33 ms met a 33 ms throttle and two steps often shared a frame (22 frames/s measured, gui_probe --paced 30)
PACED_REDRAW_INTERVAL_MS = 15
# A fast Run draws at most 15 frames a second (issue 40: >= 15 during a Run, once a frame is cheap)...
RUN_REDRAW_INTERVAL_MS = int(os.environ.get("TOKENSTEP_RUN_REDRAW_MS", 66))
# ...while its frames (each frame's refresh and the window's paint that follows) have used less than this share
# of one core (a token bucket over their GUI-thread CPU: a costly frame postpones the next ones). Only the
# frames are paid for: the GUI thread's work at each step (the worker's replies, ~0.6 ms a step on 2 cores) is
# done whether frames are drawn or not. Until this the bucket paid for all of it at 2.5 % of a core, which the
# steps alone used up: a fast Run drew one frame a second, however cheap a frame (benchmarks/RESULTS.md).
RUN_GUI_CPU_SHARE = 0.08
# On a machine of SMALL_MACHINE_CORES or fewer the engine's threads take every core during a Run, so a ms of
# GUI CPU is a ms of decode lost (and more: the engine's other thread waits for the one the GUI displaced);
# there a Run's frames get half the share: 4 % of a core. Measured there (gui_probe, AMD EPYC, 2 vCPUs, frames of
# 20-30 ms): at 12 % (4-5 frames a second) decode fell to 0.77-0.97 of headless, median 0.85, at 6 % (2-3 a second)
# to 0.87-1.03, median 0.87, against 0.88-0.99 at one frame a second: about 0.01 of the ratio per % of a core. So
# the frames a Run gets follow what a frame costs: 5 a second at 8 ms, 15 at under 3 ms.
SMALL_MACHINE_CORES = 2
SMALL_MACHINE_SHARE = RUN_GUI_CPU_SHARE / 2
# ...but never fewer frames than one per this many seconds, whatever they cost; a frame's debt beyond it is
# forgiven (one second of the share at most).
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
        self._wall_mark = self._last_turn = 0.0
        self._paint_windows: list = []  # the windows whose paint of the last frame is still to come

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
        """Redraw every view now; during a run on CPU only when the frames' CPU share allows one (else the
        change waits for the next interval), unless `force` (a recorder's frame)."""
        running = self.is_running() and not self.paced
        if not force and not self._frame_allowed(running):
            self._due = True
            self._throttle.start(RUN_REDRAW_INTERVAL_MS)
            return
        started, cpu_started = time.perf_counter(), self.cpu_clock()
        self.frames += 1
        self.redraw.emit()
        self._hold_paint(paint_together())  # the frame on screen in one paint: no label a step ahead of its plot
        self.redraw_ms.append((time.perf_counter() - started) * 1000)
        cpu = self.cpu_clock() - cpu_started
        self.redraw_cpu_ms.append(cpu * 1000)
        self._pay(cpu)
        self._throttle.start(RUN_REDRAW_INTERVAL_MS if running else
                             PACED_REDRAW_INTERVAL_MS if self.paced else REDRAW_INTERVAL_MS)

    def _hold_paint(self, windows: list) -> None:
        """The windows paint the frame later, as Qt would have (a low-priority event: what is queued first is
        handled first), here, where their paint's CPU is paid for with the frame's."""
        if not windows:
            return
        if not self._paint_windows:
            QCoreApplication.postEvent(self, QEvent(FRAME_PAINT), Qt.LowEventPriority.value)
        self._paint_windows += [w for w in windows if w not in self._paint_windows]

    def event(self, event) -> bool:
        if event.type() == FRAME_PAINT:
            windows, self._paint_windows = self._paint_windows, []
            started = self.cpu_clock()
            paint_windows(windows)
            self._pay(self.cpu_clock() - started)
            return True
        return super().event(event)

    def _pay(self, cpu_s: float) -> None:
        """A frame's CPU (its refresh, then its paint) out of the run's allowance; a debt beyond a second of
        the share is forgiven (that second's frame comes anyway, RUN_MIN_TURN_S)."""
        self._cpu_allowance = max(self._cpu_allowance - cpu_s, -self.cpu_share * self.min_turn_s)

    def _frame_allowed(self, running: bool) -> bool:
        wall = self.wall_clock()
        if not running:
            self._cpu_allowance, self._wall_mark, self._last_turn = 0.0, wall, wall
            return True
        if not self.on_cpu():
            return True
        # earn the share of the wall time since the last look (the frames paid as they were drawn); savings
        # kept within one redraw interval's worth
        earned = self.cpu_share * (wall - self._wall_mark)
        self._cpu_allowance = min(self._cpu_allowance + earned, self.cpu_share * RUN_REDRAW_INTERVAL_MS / 1000)
        self._wall_mark = wall
        if self._cpu_allowance <= 0 and wall - self._last_turn < self.min_turn_s:
            return False
        self.turns_taken += 1
        self._last_turn = wall
        return True
