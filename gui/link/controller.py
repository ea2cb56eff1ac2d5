"""User intents -> engine commands; engine replies -> the history the views draw.

The controller owns the worker thread (the one door to the engine) and holds no copy of engine state:
every reply goes to the Qt-free `History.apply`, which keeps what the engine reported (the model, the
session's events and status) and says what changed; the controller turns that into signals. Of its own it
keeps only facts about the link: whether a load or a request (`in_flight`, a command class) is on its way,
what the user asked for last (settings, the prompt, the captures), and a lost engine's restore.
"""

from __future__ import annotations

import atexit
import weakref
from dataclasses import replace

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from inference.engine import protocol as p
from inference.settings import GenerationSettings
from inference.lessons.trace import trace_lines

from gui.state.engine_words import word
from gui.state.history import Change, History, Shown
from gui.state.i18n import translate
from gui.state.serving import Serving
from gui.link.playback import Clock, Pacer
from gui.link.branch_intents import BranchIntents
from gui.link.engine_restore import EngineRestore
from gui.link.heap import HeapTidy
from gui.link.redraw import RedrawScheduler
from gui.link.worker import InferenceWorker

# During Run the engine sends its steps in batches this far apart: the views redraw less often than that
# (at most 4 frames a second, redraw.py), and each batch wakes the GUI's two threads, which on 2 cores
# displace a thread of the engine's decode step.
RUN_BATCH_S = 0.1


class Controller(QObject):
    _command = Signal(object)  # a protocol.Command, queued to the worker thread
    _restart = Signal()  # start a fresh engine if the last one died (queued before the next command)

    model_changed = Signal()
    progress = Signal(str, int, int)
    load_finished = Signal(bool, str)  # ok, message ("" when cancelled)
    error = Signal(str, str, bool)  # message, details, expected
    state_changed = Signal()  # what the buttons can do now
    weights_checked = Signal()  # the engine hashed the weights again (`weights_check`) or changed `info`
    serving_started = Signal()  # a serve's requests were accepted: the Serving view comes forward

    def __init__(self, settings: GenerationSettings = GenerationSettings()):
        super().__init__()
        self.history = History()
        self.serving = Serving()  # many requests at once (a Serve), and the measured batch curve
        self.showing_request: int | None = None  # the served request the history holds (its steps, not a session's)
        self.scheduler = RedrawScheduler(lambda: self.running, self._on_cpu, self)
        self.redraw = self.scheduler.redraw
        self.clock, self.pacer = Clock(), Pacer(self)  # paced playback of a Run (a recorder's clock is virtual)
        self.heap = HeapTidy(lambda: self.busy or self.running or self.loading, self)  # no full collection in a Run
        self.state_changed.connect(self.heap.changed)
        self.loading = False
        self.capture_lens = False  # whether the logit lens is asked for (its dock is shown)
        self.capture_attention = False  # likewise the attention view
        self.restore = EngineRestore()  # a lost engine's session, given back at the next action
        self.in_flight: type[p.Command] | None = None  # the class of a gated request on its way
        self.kv_cache = True  # asked of the engine (it keeps the choice for the sessions it makes)
        self.prefilled_prompt: tuple[str, bool, str] | None = None
        self.settings = settings  # what the user last asked for; sent coalesced, at most once per turn
        self._sent_settings: GenerationSettings | None = None
        self._settings_timer = QTimer(self, singleShot=True, interval=0)
        self._settings_timer.timeout.connect(self._send_settings)
        self.branches = BranchIntents(self)  # rewind, take another token, switch branch
        self.take, self.force, self.rewind = self.branches.take, self.branches.force, self.branches.rewind
        self.backspace, self.switch = self.branches.backspace, self.branches.switch
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
    info = property(lambda self: self.history.info)
    epoch = property(lambda self: self.history.tag)  # the newest generation asked for
    cuda_available = property(lambda self: self.history.cuda_available)
    forward_count = property(lambda self: self.history.forward_count)
    weights_check = property(lambda self: self.history.weights_check)
    can_move = property(lambda self: self.branches.can_move)
    steps = property(lambda self: self.history.steps)
    prefill_event = property(lambda self: self.history.prefill)
    pending = property(lambda self: self.history.pending)
    stopped = property(lambda self: self.history.stopped)

    @property
    def prefilled(self) -> bool:
        return self.history.prefill is not None

    @property
    def running(self) -> bool:
        # the engine runs (one generation, or many requests), or a paced playback has not shown all it reported yet
        return ((self.history.status is not None and self.history.status.running) or self.history.behind
                or self.serving.running)

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
    def prefilling(self) -> bool:
        """The prompt is being read."""
        return self.in_flight is p.Prefill

    @property
    def can_step(self) -> bool:
        status = self.history.status
        return (self.info is not None and not self.loading and not self.running and self.showing_request is None
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
        tag = self.history.load_asked()
        self.restore.load_asked(spec, device, dtype)
        self._emit(p.Load(spec, device, dtype, tag))
        self.state_changed.emit()

    def cancel_load(self) -> None:
        self.worker.cancel()  # thread-safe: goes straight down the pipe, the engine checks it between chunks

    def prefill(self, prompt: str, chat: bool, system: str = "", ids: tuple[int, ...] = ()) -> None:
        """Read the prompt (or exactly the token `ids`, when given: a replayed trace)."""
        if self.info is None or self.loading:
            return
        self.history.next_generation()
        self.history.clear()
        self.showing_request = None
        self.in_flight = p.Prefill
        self.prefilled_prompt = (prompt, chat, system)
        self._sent_settings = self.settings
        self._settings_timer.stop()
        self._emit(p.Prefill(prompt, chat, system, self.settings, self.epoch, tuple(ids)))
        self.state_changed.emit()
        self.scheduler.dirty()

    def step(self) -> None:
        if self.can_step and self.prefilled and not self.busy:
            self._request(p.Step())

    def run(self, n_steps: int = 0) -> None:
        if self.can_step and self.prefilled and not self.busy:
            self.history.follow_latest()
            self._request(p.Run(max_steps=n_steps, batch_s=self.pacer.batch_s(RUN_BATCH_S)))
            self.pacer.start_run()

    # --- many requests at once -----------------------------------------------------------------------
    def serve(self, requests: tuple[p.ServeRequest, ...], block_tokens: int, n_blocks: int,
              token_budget: int, max_steps: int = 0) -> bool:
        """Serve these requests together (the engine's scheduler); the single generation shown is left. False
        when it cannot start now (no model, or something else on its way)."""
        if self.info is None or self.loading or self.busy or self.running:
            return False
        tag = self.history.next_generation()
        self.history.clear()
        self.serving.clear()
        self.showing_request = None
        self.prefilled_prompt = None
        self.in_flight = p.Serve
        self._emit(p.Serve(tuple(requests), tag, block_tokens, n_blocks, token_budget, RUN_BATCH_S, max_steps))
        self.state_changed.emit()
        self.scheduler.dirty()
        return True

    @property
    def can_serve_more(self) -> bool:
        """The serve shown can go on: it is the newest generation, stopped before all its requests finished."""
        s = self.serving
        return (s.active and s.tag == self.history.tag and not s.done and not s.running and not self.busy
                and not self.loading)

    def serve_more(self, max_steps: int = 0) -> bool:
        """Go on with the serve shown: `max_steps` scheduler steps (0: until every request has finished)."""
        if not self.can_serve_more:
            return False
        self.serving.running = True
        self.in_flight = p.ServeMore
        self._emit(p.ServeMore(self.serving.tag, max_steps, RUN_BATCH_S))
        self.state_changed.emit()
        return True

    def add_requests(self, requests: tuple[p.ServeRequest, ...]) -> bool:
        """More requests join the serve shown, at its next scheduler step."""
        s = self.serving
        if not (s.active and s.tag == self.history.tag and not s.running and not self.busy):
            return False
        self.in_flight = p.AddRequests
        self._emit(p.AddRequests(tuple(requests)))
        self.state_changed.emit()
        return True

    def measure_batch(self, sizes: tuple[int, ...] = (1, 2, 4, 8, 16), steps: int = 6) -> bool:
        """Time decode at each batch size on this machine (the Serving dock's curve)."""
        if self.info is None or self.loading or self.busy or self.running:
            return False
        self.serving.measure_asked(sizes)
        self.in_flight = p.MeasureBatch
        self._emit(p.MeasureBatch(tuple(sizes), steps))
        self.state_changed.emit()
        self.scheduler.dirty()
        return True

    def stop_serving(self) -> None:
        """End a serve or a measurement between two scheduler steps."""
        if self.serving.running or self.in_flight is p.MeasureBatch:
            self._emit(p.Abort())

    def show_request(self, index: int | None, scheduler_step: int | None = None) -> None:
        """The other views show this served request's own steps (its prefill, steps and stop), as the history of a
        generation of its own; None: nothing selected. With a scheduler step: the block grid shows the pool then,
        and the other views the request's step drawn by then."""
        self.serving.selected = index
        self.serving.grid_step = scheduler_step
        track = self.serving.track(index)
        status = self.history.status  # the engine's session's, which a served request's history does not change
        self.history.clear()
        self.history.status = status
        self.showing_request = None
        if track is not None and track.prefill is not None:
            self._load_request(track)
            if scheduler_step is not None:
                self.history.select(max(1, self.serving.step_of(track, scheduler_step)))
        self.state_changed.emit()
        self.scheduler.dirty()

    def _load_request(self, track) -> None:
        h = self.history
        mode, selected, status = h.mode, h.selected, h.status
        h.clear()
        h.status = status
        h.prefilled(track.prefill)
        if track.steps:
            h.stepped(track.steps)
        if track.stopped is not None:
            h.ended(track.stopped)
        if mode == "step" and selected <= len(track.steps):
            h.mode, h.selected = mode, selected
        self.showing_request = track.index

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

    def _request(self, command: p.Command) -> None:
        """Send a gated request: no other may go until the engine has answered it (`Finished`)."""
        self._send_settings()
        self.in_flight = type(command)
        self._emit(command)
        self.state_changed.emit()

    def pause(self) -> None:
        """After the current step; during a paced playback at the step on screen: the engine takes back the
        steps it ran ahead (p.Retracted), and the view stays where the class is. A serve ends between two steps."""
        if self.serving.running:
            self.stop_serving()
            return
        at = self.pacer.freeze()
        if at is not None:
            self._emit(p.Pause(at_step=at))
        elif self.history.status is not None and self.history.status.running:
            self._emit(p.Pause())

    def stop(self) -> None:
        """End the generation as aborted: at the step on screen (as pause), else where the engine is."""
        if self.serving.running or self.in_flight is p.MeasureBatch:
            self.stop_serving()
            return
        if self.prefilled and (self.stopped is None or self.running):
            self._emit(p.Abort(at_step=self.pacer.freeze()))

    def reset(self) -> None:
        """Back to the prompt, re-seeded; the branches taken so far stay in the tree."""
        if not self.prefilled or self.loading or self.showing_request is not None:
            return
        self.history.next_generation()
        self.in_flight = p.Reset
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
        self.heap.release()
        if self.thread.isFinished():
            return True
        self.worker.shutdown(timeout_ms / 2000)
        self.thread.quit()
        return self.thread.wait(timeout_ms // 2)

    # --- replies from the engine ----------------------------------------------------------------------
    @Slot(object)
    def _on_reply(self, reply: p.Reply) -> None:
        """The history takes in what the reply reports; here, only what it means for the link (a request
        answered, a load done, an error to show) and the signals that say what changed."""
        change = self.history.apply(reply)
        if self.serving.apply(reply, self.history.tag):
            change |= Change.VIEWS | (Change.NONE if isinstance(reply, p.Served) else Change.STATE)
            if isinstance(reply, p.ServeStarted):
                self.serving_started.emit()
            track = self.serving.track(self.serving.selected)
            if track is not None and track.prefill is not None:
                self._load_request(track)  # the selected request's new steps, in the views that show one
        if Change.MODEL in change:
            self.restore.load_done()
            self.serving.clear()
            self.showing_request = None
            self.loading = False
            self.in_flight = None
            self.prefilled_prompt = None
            self._sent_settings = None  # the new session starts from the defaults
            self.model_changed.emit()
            self.load_finished.emit(True, "")
        match reply:
            case p.Progress():
                self.progress.emit(reply.stage, reply.done, reply.total)
            case p.LoadFailed():  # the engine's sentence worded here, once, for every view that shows it
                self.loading = False
                self.load_finished.emit(False, word(reply.said, reply.message))
            case p.Failed():
                self.in_flight = None
                self.pacer.release()  # e.g. a pause that could not take back the steps not shown: show them
                message = word(reply.said, reply.message)
                if self.restore.restoring:
                    self.restore.failed = True
                    message = translate("Engine", "the model could not be loaded again: {message}").format(
                        message=message)
                self.error.emit(message, reply.details, reply.expected or self.restore.restoring)
                change |= Change.STATE
            case p.Cancelled():
                self.in_flight = None
                change |= Change.STATE
            case p.Finished():  # a request is fully answered (events, preview, status): the next one may go
                if reply.command == p.Restore.__name__:
                    for command in self.restore.finished():
                        self._command.emit(command)
                if (reply.tag == self.epoch and self.in_flight is not None
                        and reply.command == self.in_flight.__name__):
                    self.in_flight = None
                    change |= Change.STATE
        if Change.WEIGHTS in change:
            self.weights_checked.emit()
        if Change.STATE in change:
            self.state_changed.emit()
        if Change.VIEWS in change:
            self.scheduler.dirty()

    @Slot(str)
    def _on_engine_lost(self, message: str) -> None:
        """The steps stay; the next action restarts the engine and restores the session (engine_restore.py)."""
        message += self.restore.engine_lost(self.loading)
        self.history.engine_lost(model_kept=self.restore.loaded is not None)
        if self.restore.loaded is None:
            self.model_changed.emit()
        self.in_flight = None
        self._sent_settings = None  # the new engine has the default settings
        self.serving.running = False  # a serve is not restored: what it reported stays on show, not to go on
        self.serving.tag = -1
        self.serving.curve = replace(self.serving.curve, measuring=False)
        self.pacer.release()
        if self.loading:  # the loader closes its progress and says it
            self.loading = False
            self.load_finished.emit(False, message)
        else:
            self.error.emit(message, "", False)
        self.state_changed.emit()
        self.scheduler.dirty()
