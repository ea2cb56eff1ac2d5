"""Paced playback: a Run shown at a chosen pace (tokens per second), every view at the same step.

The engine runs as fast as it can; the history holds back what it reported (`History.hold`) and the pacer
reveals one step per period, so that every frame shows one step in every view, as a viewer can follow it.
When the engine has ended and the last step is revealed, the history shows everything again. Pause and
Stop freeze the playback at the step on screen: the engine is told to end there and takes back the steps
it ran ahead, which nobody saw (`freeze`, protocol `Retracted`). A pace of 0 is "as fast as possible": each
frame shows the newest step (redraw.py decides how often a frame comes).

Time comes from a `Clock`: the real one, or a recorder's virtual one (recorder.py), which advances only
frame by frame, so a recorded lesson reveals its steps at the same frames every time.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QTimer, Signal

from inference.engine import protocol as p

PACES = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0)  # tokens per second the Controls offer; 0: as fast as possible
DEFAULT_PACE = 4.0  # the pace of presentation mode and of the P toggle
POLL_MS = 10  # how often the pacer looks whether a step is due


class Clock:
    """Seconds, monotonic. `live`: real time (a virtual clock moves only when told)."""

    live = True

    def now(self) -> float:
        return time.monotonic()


class VirtualClock(Clock):
    live = False

    def __init__(self):
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Pacer(QObject):
    pace_changed = Signal(float)
    paces = PACES

    def __init__(self, controller):
        super().__init__(controller)
        self.controller = controller
        self.tokens_per_s = 0.0
        self.last_pace = DEFAULT_PACE  # what the P toggle returns to
        self.next_due = 0.0
        self.frozen = False  # paused or stopped at the step on screen: nothing more is revealed
        self._timer = QTimer(self, interval=POLL_MS)
        self._timer.timeout.connect(self.tick)

    @property
    def clock(self) -> Clock:
        return self.controller.clock

    @property
    def paced(self) -> bool:
        return self.tokens_per_s > 0

    @property
    def period(self) -> float:
        return 1.0 / self.tokens_per_s if self.paced else 0.0

    def batch_s(self, longest: float) -> float:
        """How far apart a Run's steps may come in batches, at most `longest`: a paced playback reveals a step per
        period, so its steps come at least twice a period (a step due on screen is never held in a batch)."""
        return min(longest, self.period / 2) if self.paced else longest

    @property
    def active(self) -> bool:
        """A paced playback is under way (revealing, or waiting for the engine's next step)."""
        return self.controller.history.horizon is not None

    def set_pace(self, tokens_per_s: float) -> None:
        tokens_per_s = max(0.0, float(tokens_per_s))
        if tokens_per_s == self.tokens_per_s:
            return
        self.tokens_per_s = tokens_per_s
        if tokens_per_s:
            self.last_pace = tokens_per_s
            if not self.active and self.engine_running():
                self.start_run()  # paced from the step shown now on
            else:
                self.next_due = min(self.next_due, self.clock.now() + self.period)
        elif self.active:
            self.release()  # as fast as possible from now: show everything reported
        self.pace_changed.emit(tokens_per_s)

    def toggle(self) -> None:
        self.set_pace(0.0 if self.paced else self.last_pace)

    def start_run(self) -> None:
        """A Run starts: hold its steps back and reveal them at the pace (nothing to do when unpaced)."""
        if not self.paced:
            return
        self.frozen = False
        self.controller.history.hold()
        self.controller.scheduler.paced = True
        self.next_due = self.clock.now() + self.period
        self._timer.start()

    def freeze(self) -> int | None:
        """Pause or stop asked during a playback: reveal nothing more. The step on screen (the engine is told
        to end there: the steps it took beyond were never shown and are taken back), or None when no
        playback is under way or nothing is held back (the engine may end wherever it is)."""
        h = self.controller.history
        if not self.active:
            return None
        if not h.behind and not self.engine_running():
            self.release()
            return None
        self.frozen = True
        return h.horizon

    def waiting_on_clock(self) -> bool:
        """Only time passing moves the playback on: its next step is there and due later. False while it
        waits for the engine (its next step or its end may come at any time: a recorder waits for it rather
        than film a frame that depends on when it came) or has a step to reveal now."""
        return (self.active and not self.frozen and self.controller.history.behind
                and self.clock.now() < self.next_due)

    def engine_running(self) -> bool:
        """The engine may still report steps of this Run."""
        c = self.controller
        return (c.history.status is not None and c.history.status.running) or c.in_flight is p.Run

    def tick(self) -> None:
        c = self.controller
        h = c.history
        if h.horizon is None:
            self._stop()
            return
        now = self.clock.now()
        revealed = False
        while h.behind and now >= self.next_due and not self.frozen:
            h.reveal(h.horizon + 1)
            revealed = True
            self.next_due += self.period
            if self.clock.live:  # late (a slow engine, a busy GUI): no burst to catch up
                self.next_due = max(self.next_due, now + self.period / 2)
        if revealed:
            c.scheduler.dirty()
            if not h.behind:
                c.state_changed.emit()  # the last step reported is shown: the buttons may change
        if not h.behind and not self.engine_running():
            self.release()
        elif not h.behind and self.clock.live:
            self.next_due = max(self.next_due, now)  # waiting for the engine: its next step comes at once

    def release(self) -> None:
        """Show everything the engine reported (the playback caught up, or was paused or stopped)."""
        c = self.controller
        was = c.history.horizon is not None
        c.history.release()
        self._stop()
        if was:
            c.state_changed.emit()
            c.scheduler.dirty()

    def _stop(self) -> None:
        self.frozen = False
        self._timer.stop()
        self.controller.scheduler.paced = False
