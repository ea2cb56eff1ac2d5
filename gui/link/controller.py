"""User intents -> engine commands; engine replies -> the history the views draw.

The controller owns the worker thread (the one door to the engine) and holds no copy of engine state:
what can be done now comes from the session's last reported `SessionStatus`, what happened from the
reported events kept in the Qt-free `History`. Of its own it keeps only GUI facts: the model the engine
reported, whether a load or a request is on its way, and the tag of the newest generation it asked for
(replies about an older one are dropped).
"""

from __future__ import annotations

import atexit
import weakref

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from inference.engine import protocol as p
from inference.events import ModelInfo
from inference.settings import GenerationSettings
from inference.lessons.trace import trace_lines

from gui.state.history import History, Shown
from gui.link.playback import Clock, Pacer
from gui.link.branch_intents import BranchIntents
from gui.link.engine_restore import EngineRestore
from gui.link.redraw import RedrawScheduler
from gui.link.worker import InferenceWorker

# During Run the engine sends its steps in batches this far apart: the views redraw less often than that
# (at most 4 frames a second, redraw.py), and each batch wakes the GUI's two threads, which on 2 cores
# displace a thread of the engine's decode step.
RUN_BATCH_S = 0.1


class Controller(BranchIntents, QObject):
    _command = Signal(object)  # a protocol.Command, queued to the worker thread
    _restart = Signal()  # start a fresh engine if the last one died (queued before the next command)

    model_changed = Signal()
    progress = Signal(str, int, int)
    load_finished = Signal(bool, str)  # ok, message ("" when cancelled)
    error = Signal(str, str, bool)  # message, details, expected
    state_changed = Signal()  # what the buttons can do now
    weights_checked = Signal()  # the engine hashed the weights again (`weights_check`) or changed `info`

    def __init__(self, settings: GenerationSettings = GenerationSettings()):
        super().__init__()
        self.history = History()
        self.scheduler = RedrawScheduler(lambda: self.running, self._on_cpu, self)
        self.redraw = self.scheduler.redraw
        self.clock, self.pacer = Clock(), Pacer(self)  # paced playback of a Run (a recorder's clock is virtual)
        self.info: ModelInfo | None = None
        self.loading = False
        self.epoch = self._epoch_before_load = 0  # the tag of the newest generation asked for
        self.cuda_available: bool | None = None  # known once the engine is up
        self.forward_count = 0  # forward passes the engine has run: a preview runs none
        self.capture_lens = False  # whether the logit lens is asked for (its dock is shown)
        self.capture_attention = False  # likewise the attention view
        self.restore = EngineRestore()  # a lost engine's session, given back at the next action
        self.in_flight: str | None = None  # a gated request on its way
        self.weights_check: p.WeightsChecked | None = None  # the newest re-hash of the weights
        self.kv_cache = True  # asked of the engine (it keeps the choice for the sessions it makes)
        self.prefilled_prompt: tuple[str, bool, str] | None = None
        self.settings = settings  # what the user last asked for; sent coalesced, at most once per turn
        self._sent_settings: GenerationSettings | None = None
        self._settings_timer = QTimer(self, singleShot=True, interval=0)
        self._settings_timer.timeout.connect(self._send_settings)
        self._handlers = {p.Ready: self._on_ready, p.Progress: self._on_progress, p.ModelLoaded: self._on_model_loaded,
                          p.LoadFailed: self._on_load_failed, p.Prefilled: self._on_prefilled,
                          p.Stepped: self._on_stepped, p.PendingStep: self._on_pending, p.Ended: self._on_ended,
                          p.Status: self._on_status, p.Failed: self._on_failed, p.Cancelled: self._on_cancelled,
                          p.Finished: self._on_finished, p.RewoundReply: self._on_rewound,
                          p.SwitchedReply: self._on_rewound, p.WeightsChecked: self._on_weights_checked,
                          p.Recaptured: self._on_recaptured, p.ModelInfoChanged: self._on_info_changed}
        self._attention_asked: set[tuple[int, int]] = set()  # (epoch, node): each recomputed once
        self._start_worker()

    def _start_worker(self) -> None:
        self.thread = QThread()
        self.thread.setObjectName("inference")
        self.worker = InferenceWorker()
        self.worker.moveToThread(self.thread)
        self.thread.started.connect(self.worker.start)
        self._command.connect(self.worker.send)
        self._restart.connect(self.worker.restart)
        self.worker.replied.connect(self._on_reply)
        self.worker.engine_lost.connect(self._on_engine_lost)
        self.thread.start()
        # A thread still running when Python exits makes Qt abort the process: join it first, however
        # the program ends (a closed window, app.quit, or a script that never closed its window).
        this = weakref.ref(self)
        atexit.register(lambda: this() is not None and this().shutdown())

    # --- what the views read (all of it reported by the engine) -----------------------------------------
    steps = property(lambda self: self.history.steps)
    prefill_event = property(lambda self: self.history.prefill)
    pending = property(lambda self: self.history.pending)
    stopped = property(lambda self: self.history.stopped)

    @property
    def prefilled(self) -> bool:
        return self.history.prefill is not None

    @property
    def running(self) -> bool:
        # the engine runs, or a paced playback has not shown all it reported yet
        return (self.history.status is not None and self.history.status.running) or self.history.behind

    @property
    def run_horizon(self) -> int | None:
        """The number of steps a Run is headed for (its length limit); None when no run is on or the limit is
        already behind (a run then goes on by a context policy's shifts only until it is stopped)."""
        if not self.running:
            return None
        limit = self.settings.max_new_tokens
        return limit if limit >= len(self.steps) else None

    @property
    def busy(self) -> bool:
        """A prefill, step, run or reset is on its way."""
        return self.in_flight is not None

    @property
    def can_step(self) -> bool:
        status = self.history.status
        return (self.info is not None and not self.loading and not self.running
                and (status is None or not status.blocked))

    def shown(self) -> Shown | None:
        return self.history.shown()

    def select(self, index: int | None) -> None:
        self.history.select(index)
        self.scheduler.dirty()

    def _on_cpu(self) -> bool:
        return self.info is None or self.info.device == "cpu"

    # --- intents --------------------------------------------------------------------------------------
    def load(self, spec: str = "default", device: str = "auto", dtype: str = "auto") -> None:
        self.loading = True
        self._epoch_before_load = self.epoch  # a failed load leaves the engine's session (and its tag) as it was
        self.epoch += 1
        self.restore.load_asked(spec, device, dtype)
        self._emit(p.Load(spec, device, dtype, self.epoch))
        self.state_changed.emit()

    def cancel_load(self) -> None:
        self.worker.cancel()  # thread-safe: goes straight down the pipe, the engine checks it between chunks

    def prefill(self, prompt: str, chat: bool, system: str = "", ids: tuple[int, ...] = ()) -> None:
        """Read the prompt (or exactly the token `ids`, when given: a replayed trace)."""
        if self.info is None or self.loading:
            return
        self.epoch += 1
        self.history.clear()
        self.in_flight = "Prefill"
        self.prefilled_prompt = (prompt, chat, system)
        self._sent_settings = self.settings
        self._settings_timer.stop()
        self._emit(p.Prefill(prompt, chat, system, self.settings, self.epoch, tuple(ids)))
        self.state_changed.emit()
        self.scheduler.dirty()

    def step(self) -> None:
        if self.can_step and self.prefilled and not self.busy:
            self._request("Step", p.Step())

    def run(self, n_steps: int = 0) -> None:
        if self.can_step and self.prefilled and not self.busy:
            self.history.follow_latest()
            self._request("Run", p.Run(max_steps=n_steps, batch_s=RUN_BATCH_S))
            self.pacer.start_run()

    def _emit(self, command: p.Command) -> None:
        """Send `command`; after a lost engine, first a fresh engine and the Restore of its session."""
        if self.restore.lost:
            self._restart.emit()
            for choice in (p.CaptureAttention(self.capture_attention), p.CaptureLens(self.capture_lens),
                           p.KvCache(self.kv_cache)):
                self._command.emit(choice)  # a fresh engine starts from the defaults
            restore = self.restore.begin(command, self.history, self.settings, self.epoch)
            if restore is not None:
                self._command.emit(restore)
        if not self.restore.defer(command):
            self._command.emit(command)

    def _request(self, name: str, command: p.Command) -> None:
        self._send_settings()
        self.in_flight = name
        self._emit(command)
        self.state_changed.emit()

    def pause(self) -> None:  # after the current step; a paced playback shows all the engine reported
        if self.history.status is not None and self.history.status.running:
            self._emit(p.Pause())
        self.pacer.release()

    def stop(self) -> None:
        if self.prefilled and (self.stopped is None or self.running):
            self._emit(p.Abort())
            self.pacer.release()

    def reset(self) -> None:
        """Back to the prompt, re-seeded; the branches taken so far stay in the tree."""
        if not self.prefilled or self.loading:
            return
        self.epoch += 1
        self.in_flight = "Reset"
        self._sent_settings = self.settings
        self._settings_timer.stop()
        self._emit(p.Reset(self.settings, self.epoch))
        self.state_changed.emit()
        self.scheduler.dirty()

    def set_settings(self, settings: GenerationSettings) -> None:
        """Takes effect on the next draw; the pending bars redraw from the kept logits (no forward)."""
        if settings.sampler != self.settings.sampler and self.prefilled and not self.running:
            self.history.select(None)
        self.settings = settings
        if not self._settings_timer.isActive():
            self._settings_timer.start()  # coalesce a slider drag into one request per event-loop turn
        self.state_changed.emit()

    def _send_settings(self) -> None:
        self._settings_timer.stop()
        if self.settings != self._sent_settings:  # an unchanged resend would only trigger a preview
            self._sent_settings = self.settings
            self._emit(p.Configure(self.settings))

    def set_kv_cache(self, on: bool) -> None:
        """Decode with the KV cache, or re-read the whole prefix every step (same logits, growing cost)."""
        self.kv_cache = on
        self._emit(p.KvCache(on))
        self.state_changed.emit()

    def check_weights(self) -> None:
        """Hash the weights again in the engine (it also does so whenever a generation ends)."""
        if self.info is not None and not self.loading:
            self._emit(p.CheckWeights())

    def set_capture_attention(self, on: bool) -> None:
        self.capture_attention = on
        self._emit(p.CaptureAttention(on))

    def set_capture_lens(self, on: bool) -> None:
        self.capture_lens = on  # a restarted engine is asked again (_emit)
        self._emit(p.CaptureLens(on))

    def request_attention(self, node: int) -> bool:
        """Ask for the attention of the pass that fed `node` (0: the prefill) when it ran unrecorded (the
        view was closed): recomputed once, on the engine's scratch cache. True once asked (now or before);
        False while it cannot be asked yet (a request or a run on its way): ask again when the state changes."""
        key = (self.epoch, node)
        if key in self._attention_asked:
            return True
        if not self.prefilled or self.running or self.busy or self.loading:
            return False
        self._attention_asked.add(key)
        self._emit(p.Recapture(node))
        return True

    def trace_lines(self) -> list[str]:
        """The same JSON Lines `main.py trace` writes, for what has happened so far."""
        if self.info is None:
            return []
        return trace_lines(self.info, self.history.log, self.settings)

    def shutdown(self, timeout_ms: int = 2000) -> bool:
        """End the engine process and the worker thread within `timeout_ms`. True when both are gone."""
        if self.thread.isFinished():
            return True
        self.worker.shutdown(timeout_ms / 2000)
        self.thread.quit()
        return self.thread.wait(timeout_ms // 2)

    # --- replies from the engine ----------------------------------------------------------------------
    @Slot(object)
    def _on_reply(self, reply: p.Reply) -> None:
        self._handlers[type(reply)](reply)

    def _current(self, reply) -> bool:
        return reply.tag == self.epoch

    def _on_ready(self, reply: p.Ready) -> None:
        self.cuda_available = reply.cuda

    def _on_progress(self, reply: p.Progress) -> None:
        self.progress.emit(reply.stage, reply.done, reply.total)

    def _on_model_loaded(self, reply: p.ModelLoaded) -> None:
        self.restore.load_done()
        self.info = reply.info
        self.weights_check = None
        self.loading = False
        self.epoch = max(self.epoch, reply.tag)
        self.history.clear()
        self.in_flight = None
        self.prefilled_prompt = None
        self._sent_settings = None  # the new session starts from the defaults
        self.model_changed.emit()
        self.load_finished.emit(True, "")
        self.state_changed.emit()
        self.scheduler.dirty()

    def _on_load_failed(self, reply: p.LoadFailed) -> None:
        self.loading = False
        self.epoch = self._epoch_before_load  # the engine kept its session: its replies carry the old tag
        self.load_finished.emit(False, reply.message)
        self.state_changed.emit()

    def _on_prefilled(self, reply: p.Prefilled) -> None:
        if self._current(reply):
            self.history.prefilled(reply.event)
            self.scheduler.dirty()

    def _on_stepped(self, reply: p.Stepped) -> None:
        """One step taken by hand, or the steps of a Run batched by the engine."""
        if self._current(reply):
            self.history.stepped(reply.events)
            if not self.history.behind:  # else the pacer shows them, one at a time
                self.scheduler.dirty()

    def _on_pending(self, reply: p.PendingStep) -> None:
        if self._current(reply):
            self.history.pending = reply.event
            self.scheduler.dirty()

    def _on_rewound(self, reply: p.RewoundReply | p.SwitchedReply) -> None:
        if self._current(reply):  # a rewind, or a branch switch (with its re-read)
            (self.history.rewound if isinstance(reply, p.RewoundReply) else self.history.switched)(reply.event)
            self.scheduler.dirty()

    def _on_recaptured(self, reply: p.Recaptured) -> None:
        if self._current(reply):
            self.history.attention[reply.event.node] = reply.event
            self.scheduler.dirty()

    def _on_ended(self, reply: p.Ended) -> None:
        if self._current(reply):
            self.history.ended(reply.event)
            self.state_changed.emit()  # the status line names the reason
            self.scheduler.dirty()

    def _on_status(self, reply: p.Status) -> None:
        if self._current(reply) and reply.status != self.history.status:
            self.history.status = reply.status
            self.state_changed.emit()
            self.scheduler.dirty()

    def _on_weights_checked(self, reply: p.WeightsChecked) -> None:
        self.weights_check = reply
        self.weights_checked.emit()

    def _on_info_changed(self, reply: p.ModelInfoChanged) -> None:  # e.g. decode went over to the kernels
        self.info = reply.info
        self.weights_checked.emit()
        self.scheduler.dirty()  # Explain says how decode runs when it runs on stock ops

    def _on_failed(self, reply: p.Failed) -> None:
        self.in_flight = None
        if self.restore.restoring:
            self.restore.failed = True
            reply = p.Failed(f"the model could not be loaded again: {reply.message}", reply.details, True)
        self.error.emit(reply.message, reply.details, reply.expected)
        self.state_changed.emit()

    def _on_cancelled(self, reply: p.Cancelled) -> None:
        self.in_flight = None
        self.state_changed.emit()

    def _on_finished(self, reply: p.Finished) -> None:
        """A request is fully answered (events, preview, status): the next one may be sent."""
        self.forward_count = reply.forward_count
        if reply.command == "Restore":
            for command in self.restore.finished():
                self._command.emit(command)
        if self._current(reply) and reply.command == self.in_flight:
            self.in_flight = None
            self.state_changed.emit()

    @Slot(str)
    def _on_engine_lost(self, message: str) -> None:
        """The steps stay; the next action restarts the engine and restores the session (engine_restore.py)."""
        message += self.restore.engine_lost(self.loading)
        if self.restore.loaded is None:
            self.info = None
            self.model_changed.emit()
        self.in_flight = None
        self._sent_settings = None  # the new engine has the default settings
        self.history.status = None  # not running, not blocked: the next action may come
        self.pacer.release()
        if self.loading:  # the loader closes its progress and says it
            self.loading = False
            self.load_finished.emit(False, message)
        else:
            self.error.emit(message, "", False)
        self.state_changed.emit()
        self.scheduler.dirty()
