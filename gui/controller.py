"""GUI-side state: the model, the prompt's prefill, the steps so far, what is selected, the settings.

It owns the worker thread, turns user intents into queued requests, keeps every event the worker sends
back, and tells the views to redraw at most ~30 times a second (`redraw`), however fast events arrive.
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
import time
from collections import deque
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, QThreadPool, QTimer, Signal, Slot

from inference.events import ModelInfo, Pending, PrefillDone, StepDistribution, StepDone, Stopped
from inference.settings import GenerationSettings

from .worker import InferenceWorker

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second while stepping by hand
# During Run the engine uses every core, so each ms the GUI spends drawing is decode time lost: a run
# redraws less often, and at each redraw only the cheap views (the context's new tokens, the status)
# plus one of the plot views, in turn (`takes_turn`). Measured on 2 cores (benchmarks/gui_probe.py):
# a plot view's refresh and paint cost 3-11 ms of GUI CPU, all of them together ~28 ms.
RUN_REDRAW_INTERVAL_MS = int(os.environ.get("TOKENSTEP_RUN_REDRAW_MS", 250))
# ...and a plot view gets its turn only while the GUI thread has used less than this share of one core
# during the run (a token bucket over its CPU time: a slow paint postpones the next turns).
RUN_GUI_CPU_SHARE = 0.05
# ...but never fewer turns than one per this many seconds: where the GUI thread's own event handling
# already takes the share (measured 1.8-3.5 ms of GUI CPU per step on an AVX2 machine at ~30 steps/s),
# the plots would otherwise stand still for a whole run. One plot redraw a second costs ~1 % of a core.
RUN_MIN_TURN_S = 1.0
# A waiting thread gets the GIL after this long (Python's default is 5 ms): the worker's next torch op
# need not wait for a whole redraw.
GIL_SWITCH_S = 0.001


@dataclass(frozen=True)
class Shown:
    """The step the views show: a drawn step (with its token) or the pending one (before its draw)."""

    index: int
    dist: StepDistribution
    step: StepDone | None

    @property
    def pending(self) -> bool:
        return self.step is None


class Controller(QObject):
    # requests, queued to the worker thread
    _load = Signal(str, str, str, int)
    _prefill = Signal(str, bool, str, int)
    _step = Signal()
    _run = Signal(int)
    _pause = Signal()
    _abort = Signal()
    _reset = Signal(int)
    _settings = Signal(object)
    _capture = Signal(bool)

    # to the window and the views
    redraw = Signal()  # throttled: read the state and draw
    model_changed = Signal()
    progress = Signal(str, int, int)
    load_finished = Signal(bool, str)  # ok, message ("" when cancelled)
    error = Signal(str, str, bool)  # message, details, expected
    state_changed = Signal()  # what the buttons can do now

    def __init__(self, settings: GenerationSettings = GenerationSettings()):
        super().__init__()
        self.thread = QThread()
        self.thread.setObjectName("inference")
        self.worker = InferenceWorker()
        self.worker.moveToThread(self.thread)
        self.thread.started.connect(self.worker.start)
        w = self.worker
        self._load.connect(w.load_model)
        self._prefill.connect(w.prefill)
        self._step.connect(w.step)
        self._run.connect(w.run)
        self._pause.connect(w.pause)
        self._abort.connect(w.abort)
        self._reset.connect(w.reset)
        self._settings.connect(w.set_settings)
        self._capture.connect(w.set_capture_attention)
        w.model_loaded.connect(self._on_model_loaded)
        w.load_failed.connect(self._on_load_failed)
        w.progress.connect(self.progress)
        w.prefilled.connect(self._on_prefilled)
        w.stepped.connect(self._on_stepped)
        w.stepped_many.connect(self._on_stepped_many)
        w.pending.connect(self._on_pending)
        w.stopped.connect(self._on_stopped)
        w.running.connect(self._on_running)
        w.failed.connect(self._on_failed)
        w.cancelled.connect(self._on_cancelled)
        w.finished.connect(self._on_finished)
        w.ready.connect(self._on_ready)
        w.engine_lost.connect(self._on_engine_lost)
        self.thread.start()
        # A thread still running when Python exits makes Qt abort the process: join it first, however
        # the program ends (a closed window, app.quit, or a script that never closed its window).
        this = weakref.ref(self)
        atexit.register(lambda: this() is not None and this().shutdown())

        self.settings = settings
        self.cuda_available: bool | None = None  # known once the engine is up
        self.forward_count = 0  # forward passes the engine has run: a preview runs none
        self._sent_settings: GenerationSettings | None = None
        self.info: ModelInfo | None = None
        self.loading = False
        self.epoch = 0
        self._clear_generation()
        self.prefilled_prompt: tuple[str, bool, str] | None = None
        self._settings_timer = QTimer(self, singleShot=True, interval=0)
        self._settings_timer.timeout.connect(self._send_settings)
        self._throttle = QTimer(self, singleShot=True, interval=REDRAW_INTERVAL_MS)
        self._throttle.timeout.connect(self._on_throttle)
        self._redraw_due = False
        self.redraw_ms: deque[float] = deque(maxlen=2000)
        self._turn_takers: list[weakref.ref] = []  # plot views that redraw one at a time during Run
        self._turn: QObject | None = None
        self.turns_taken = 0
        self._cpu_allowance = 0.0  # seconds of GUI-thread CPU the plot views may still spend in this run
        self._cpu_mark = self._wall_mark = self._last_turn = 0.0
        sys.setswitchinterval(GIL_SWITCH_S)
        # Qt converts large images (the window's backing store) on its global thread pool, one thread per
        # core: bursts that take both cores from decode. One thread keeps painting off the engine's core.
        QThreadPool.globalInstance().setMaxThreadCount(1)

    # --- state ----------------------------------------------------------------------------------------
    def _clear_generation(self) -> None:
        self.prefill_event: PrefillDone | None = None
        self.steps: list[StepDone] = []
        self.pending: Pending | None = None
        self.stopped: Stopped | None = None
        self.running = False
        self.busy = False  # a prefill or single step is on its way
        self.mode = "pending"  # "latest" (newest drawn step), "pending" (next step) or "step" (a past one)
        self.selected = 0

    @property
    def prefilled(self) -> bool:
        return self.prefill_event is not None

    @property
    def can_step(self) -> bool:
        ended = self.stopped is not None and self.stopped.reason in ("eos", "stop_string", "context_full")
        limit = self.stopped is not None and self.stopped.reason == "max_new_tokens" and \
            len(self.steps) >= self.settings.max_new_tokens
        return self.info is not None and not self.loading and not self.running and not ended and not limit

    def shown(self) -> Shown | None:
        """What the candidate / draw / timing views should show now."""
        if self.mode == "step" and 1 <= self.selected <= len(self.steps):
            step = self.steps[self.selected - 1]
            return Shown(step.index, step.dist, step)
        if self.mode == "latest" and self.steps:
            step = self.steps[-1]
            return Shown(step.index, step.dist, step)
        if self.pending is not None and self.pending.index == len(self.steps) + 1:
            return Shown(self.pending.index, self.pending.dist, None)
        if self.steps:
            step = self.steps[-1]
            return Shown(step.index, step.dist, step)
        return None

    def select(self, index: int | None) -> None:
        """Scrub the history: a step number, or None / one past the last step for the pending step."""
        if index is None or index > len(self.steps):
            self.mode = "pending"
        else:
            self.mode, self.selected = "step", max(1, index)
        self._dirty()

    # --- intents --------------------------------------------------------------------------------------
    def load(self, spec: str = "default", device: str = "auto", dtype: str = "auto") -> None:
        self.loading = True
        self.epoch += 1
        self._load.emit(spec, device, dtype, self.epoch)
        self.state_changed.emit()

    def cancel_load(self) -> None:
        self.worker.cancel()  # thread-safe: goes straight down the pipe, the engine checks it between chunks

    def prefill(self, prompt: str, chat: bool, system: str = "") -> None:
        if self.info is None or self.loading:
            return
        if self.running:
            self._pause.emit()
        self.epoch += 1
        self._clear_generation()
        self.busy = True
        self.prefilled_prompt = (prompt, chat, system)
        self._send_settings()
        self._prefill.emit(prompt, chat, system, self.epoch)
        self.state_changed.emit()
        self._dirty()

    def step(self) -> None:
        if self.can_step and self.prefilled and not self.busy:
            self.busy = True
            self._send_settings()
            self._step.emit()
            self.state_changed.emit()

    def run(self, n_steps: int = 0) -> None:
        if self.can_step and self.prefilled and not self.busy:
            self._send_settings()
            self.running = True
            self.mode = "latest"
            self._run.emit(n_steps)
            self.state_changed.emit()

    def pause(self) -> None:
        if self.running:
            self._pause.emit()

    def stop(self) -> None:
        if self.prefilled and (self.stopped is None or self.running):
            self._abort.emit()

    def reset(self) -> None:
        if not self.prefilled or self.loading:
            return
        self.epoch += 1
        prefill = self.prefill_event
        self._clear_generation()
        self.prefill_event = prefill
        self.busy = True
        self._send_settings()
        self._reset.emit(self.epoch)
        self.state_changed.emit()
        self._dirty()

    def set_settings(self, settings: GenerationSettings) -> None:
        """Takes effect on the next draw; the pending bars redraw from the kept logits (no forward)."""
        sampler_changed = settings.sampler != self.settings.sampler
        self.settings = settings
        if sampler_changed and self.prefilled and not self.running:
            self.mode = "pending"
        if not self._settings_timer.isActive():
            self._settings_timer.start()  # coalesce a slider drag into one request per event-loop turn
        self.state_changed.emit()

    def _send_settings(self) -> None:
        self._settings_timer.stop()
        if self.settings != self._sent_settings:  # an unchanged resend would only trigger a preview
            self._sent_settings = self.settings
            self._settings.emit(self.settings)

    def set_capture_attention(self, on: bool) -> None:
        self._capture.emit(on)

    def trace_lines(self) -> list[str]:
        """The same JSON Lines `main.py trace` writes, for what has happened so far."""
        if self.info is None:
            return []
        lines = [self.info.to_json()]
        if self.prefill_event is not None:
            lines.append(self.prefill_event.to_json())
        lines += [s.to_json() for s in self.steps]
        if self.stopped is not None:
            lines.append(self.stopped.to_json())
        return lines

    def shutdown(self, timeout_ms: int = 2000) -> bool:
        """End the engine process and the worker thread within `timeout_ms`. True when both are gone."""
        if self.thread.isFinished():
            return True
        self.worker.shutdown(timeout_ms / 2000)
        self.thread.quit()
        return self.thread.wait(timeout_ms // 2)

    # --- answers from the worker ----------------------------------------------------------------------
    @Slot(object, int)
    def _on_model_loaded(self, info: ModelInfo, epoch: int) -> None:
        self.info = info
        self.loading = False
        self.epoch = max(self.epoch, epoch)
        self._clear_generation()
        self.prefilled_prompt = None
        self.model_changed.emit()
        self.load_finished.emit(True, "")
        self.state_changed.emit()
        self._dirty()

    @Slot(str)
    def _on_load_failed(self, message: str) -> None:
        self.loading = False
        self.load_finished.emit(False, message)
        self.state_changed.emit()

    @Slot(object, int)
    def _on_prefilled(self, event: PrefillDone, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.prefill_event = event
        self.pending = Pending(1, event.pending) if event.pending is not None else None
        self.mode = "pending"
        self.state_changed.emit()
        self._dirty()

    @Slot(object, int)
    def _on_stepped(self, event: StepDone, epoch: int) -> None:
        self._on_stepped_many([event], epoch)

    @Slot(object, int)
    def _on_stepped_many(self, events: list, epoch: int) -> None:
        """One step taken by hand, or the steps of a Run batched by the engine."""
        if epoch != self.epoch:
            return
        self.steps.extend(events)
        self.pending = None
        if self.mode != "step":
            self.mode = "latest"
        if not self.running:  # during Run no button changes until it ends; the redraw shows the rest
            self.state_changed.emit()
        self._dirty()

    @Slot(object, int)
    def _on_pending(self, event: Pending, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.pending = event
        self.state_changed.emit()
        self._dirty()

    @Slot(object, int)
    def _on_stopped(self, event: Stopped, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.stopped = event
        self.state_changed.emit()
        self._dirty()

    @Slot(bool, int)
    def _on_running(self, running: bool, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.running = running
        if not running:
            self.busy = False
        self.state_changed.emit()
        self._dirty()

    @Slot(str, str, bool)
    def _on_failed(self, message: str, details: str, expected: bool) -> None:
        self.busy = False
        self.running = False
        self.error.emit(message, details, expected)
        self.state_changed.emit()

    @Slot()
    def _on_cancelled(self) -> None:
        self.busy = False
        self.state_changed.emit()

    @Slot(str, int, int)
    def _on_finished(self, request: str, epoch: int, forward_count: int) -> None:
        """A prefill, step or reset is fully answered (events, preview): the next one may be sent."""
        self.forward_count = forward_count
        if epoch == self.epoch and request in ("prefill", "step", "reset"):
            self.busy = False
            self.state_changed.emit()

    @Slot(object)
    def _on_ready(self, environment: dict) -> None:
        self.cuda_available = environment["cuda"]

    @Slot(str)
    def _on_engine_lost(self, message: str) -> None:
        self.info = None
        self.loading = False
        self._sent_settings = None  # the new engine has the default settings
        self._clear_generation()
        self.model_changed.emit()
        self.error.emit(message, "", False)
        self.state_changed.emit()

    # --- throttled redraw -----------------------------------------------------------------------------
    def _dirty(self) -> None:
        if self._throttle.isActive():
            self._redraw_due = True
            return
        self._emit_redraw()

    @Slot()
    def _on_throttle(self) -> None:
        if self._redraw_due:
            self._redraw_due = False
            self._emit_redraw()

    def take_turns(self, view: QObject) -> None:
        """Register a costly View: during Run it redraws only when `takes_turn(view)` says so (every
        other turn when its class sets FIRST)."""
        self._turn_takers.append(weakref.ref(view))

    def takes_turn(self, view: QObject) -> bool:
        """True when `view` should redraw now: always, except during a Run on CPU, where the visible
        costly views take one redraw each in turn (a hidden one has nothing to show, so it is skipped)."""
        on_cpu = self.info is None or self.info.device == "cpu"
        return not self.running or not on_cpu or view is self._turn

    def _next_turn(self) -> None:
        self._turn = None
        cpu, wall = time.thread_time(), time.perf_counter()
        if not self.running:
            self._cpu_allowance, self._cpu_mark, self._wall_mark, self._last_turn = 0.0, cpu, wall, wall
            return
        # earn the share of the wall time since the last redraw, pay what the GUI thread used in it
        # (the last redraw's paint included); kept within one redraw interval's worth either way
        earned = RUN_GUI_CPU_SHARE * (wall - self._wall_mark) - (cpu - self._cpu_mark)
        limit = RUN_GUI_CPU_SHARE * RUN_REDRAW_INTERVAL_MS / 1000
        self._cpu_allowance = min(max(self._cpu_allowance + earned, -limit), limit)
        self._cpu_mark, self._wall_mark = cpu, wall
        if self._cpu_allowance <= 0 and wall - self._last_turn < RUN_MIN_TURN_S:
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

    def _emit_redraw(self) -> None:
        started = time.perf_counter()
        self._next_turn()
        self.redraw.emit()
        self.redraw_ms.append((time.perf_counter() - started) * 1000)  # what every view's redraw cost
        self._throttle.start(RUN_REDRAW_INTERVAL_MS if self.running else REDRAW_INTERVAL_MS)
