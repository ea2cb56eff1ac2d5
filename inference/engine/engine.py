"""The engine process: reads protocol commands (protocol.py) from a pipe and drives one Session.

Why a process of its own: the decode loop issues hundreds of small torch calls per token, each of which
takes the GIL back when it returns. In the GUI's process every redraw held the GIL and stalled decode for
as long as it ran (measured: a Run at 5 redraws/s decoded at 0.7x the headless speed; the same redraws in
another process left decode untouched).

The engine keeps no generation state of its own: the loaded model, the Session (which owns the state),
the tag of the generation it serves, and the commands that arrived while a long job was busy. A Run is
`Session.run()`; between its steps the engine reads waiting commands (Pause, Abort and new settings act
at once; anything else ends the run and is served next). Every failure becomes a `Failed` reply, a
malformed message included: the engine never dies of a bad request.
"""

from __future__ import annotations

import os
import time
import traceback
from collections import deque

import torch

from inference import cache_dir
from inference.engine import protocol as p
from inference.engine.backend_switch import start_build, switch_if_built
from inference.errors import Cancelled, NotReady, is_expected, one_line

from inference.messages import Message, said, say
from inference.events import StepDone, Stopped
from inference.session import batch_curve
from inference.session.batch import BatchRequest, Scheduler, blocks_for_all
from inference.session.session import Session, prompt_ids
from inference.store.loading import load_model


def serve(commands, replies, niceness: int = 0) -> None:
    """Process entry point: answer commands until Quit or the front-end goes away.

    `niceness` is the front-end's choice: a GUI runs the engine nicer than itself so that its paints go
    first when both want a core."""
    cache_dir.exit_on_sigterm()  # the front-end's terminate() mid-conversion leaves no partial folder
    if niceness and hasattr(os, "nice"):
        os.nice(niceness)
    try:
        with torch.inference_mode():  # the whole engine: sampling and previews too, not just forwards
            Engine(commands, replies, cuda=torch.cuda.is_available()).loop()
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass  # the front-end closed its ends of the pipes: nothing left to answer


WAIT_FOR_A_JOB = (p.Configure, p.CaptureAttention, p.CaptureLens, p.KvCache, p.CheckWeights)  # they do not end
# a Serve or a MeasureBatch: they are served once it ends


class Engine:
    def __init__(self, commands, replies, cuda: bool):
        self.commands, self.replies = commands, replies
        self.deferred: deque = deque()  # commands that arrived while a load, prefill or run was busy
        self.model = None
        self.session = None
        self.kernels_build = None  # a Future: the decode kernels compiling while the model runs on stock ops
        self.capture_attention = False  # asked for before any session exists; each new session gets it
        self.capture_lens = False  # likewise
        self.use_kv_cache = True
        self.tag = 0
        self.batch: list = []  # a Run's StepDone events (or a Serve's events) not yet sent
        self.batch_reply = p.Stepped  # what carries them
        self.batch_s = 0.0
        self.batch_started = 0.0
        self.first_at_once = False  # a Run's first step goes at once (its first token is not held batch_s)
        self.announce_run = False
        self.recheck = False  # hash the weights again once the current command is answered
        self.cancelled = False  # a Cancel came while a Serve or a MeasureBatch read the pipe
        self.scheduler: Scheduler | None = None  # the serve under way (its requests' sessions and block pool)
        self.handlers = {p.Load: self.load, p.Prefill: self.prefill, p.Step: self.step, p.Run: self.run,
                         p.Pause: self.pause, p.Abort: self.abort, p.Reset: self.reset,
                         p.Configure: self.configure, p.CaptureAttention: self.capture, p.Cancel: self.cancel,
                         p.CaptureLens: self.capture_logit_lens,
                         p.Rewind: self.rewind, p.Force: self.force, p.Switch: self.switch,
                         p.KvCache: self.kv_cache, p.CheckWeights: self.check_weights, p.Recapture: self.recapture,
                         p.Restore: self.restore, p.Serve: self.serve_requests, p.MeasureBatch: self.measure_batch,
                         p.AddRequests: self.add_requests, p.ServeMore: self.serve_more}
        self.send(p.Ready(cuda=cuda))

    # --- the pipe -------------------------------------------------------------------------------------
    def send(self, reply: p.Reply) -> None:
        self.flush()
        self.replies.send(p.wrap(reply))

    def queue_step(self, event, reply: type = p.Stepped) -> None:
        """A step's event: at once, or batched `batch_s` apart during a Run or a Serve (order kept either way)."""
        if self.batch and reply is not self.batch_reply:
            self.flush()
        self.batch_reply = reply
        if not self.batch:
            self.batch_started = time.monotonic()
        self.batch.append(event)
        first = self.first_at_once and isinstance(event, StepDone)  # with what came before it (a verify pass)
        if first:
            self.first_at_once = False
        if first or time.monotonic() - self.batch_started >= self.batch_s:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            batch, self.batch = tuple(self.batch), []
            self.replies.send(p.wrap(self.batch_reply(batch, self.tag)))

    def receive(self) -> p.Command | None:
        """The next command from the pipe; a malformed one is answered with `Failed` and skipped (None)."""
        try:
            return p.receive(self.commands, p.Command)
        except ValueError as e:
            self.send(p.Failed(f"the engine ignored a message: {e}", "", False))
            return None

    def loop(self) -> None:
        while True:
            if self.deferred:
                command = self.deferred.popleft()
            else:
                self.flush()  # nothing is sent late while waiting for the next command
                while self.kernels_build is not None and not self.commands.poll(0.2):
                    self.switch_backend_if_built()
                command = self.receive()
            self.switch_backend_if_built()
            if isinstance(command, p.Quit):
                return
            if command is not None:
                self.handle(command)

    def handle(self, command: p.Command) -> None:
        try:
            self.handlers[type(command)](command)
        except Cancelled:  # also a request to a server that Cancel or Abort stopped (http.Interrupted)
            self.send(p.Cancelled())
        except Exception as e:  # noqa: BLE001 - every failure becomes a reply, never a dead engine
            self.send(p.Failed(one_line(e), traceback.format_exc(), is_expected(e), said(e)))
        finally:
            self.send_status()
            count = self.session.forward_count if self.session is not None else 0
            self.send(p.Finished(type(command).__name__, self.tag, count))
        if self.recheck and not (self.session is not None and self.session.running):
            # After Finished: the front-end has the run's end (its buttons back) while the weights are hashed
            # (about 0.3 s for 538 MB), time a probe of decode speed once counted as part of the run.
            self.recheck = False
            try:
                self.check_weights(p.CheckWeights())
            except Exception as e:  # noqa: BLE001 - as in handle: a reply, never a dead engine
                self.send(p.Failed(one_line(e), traceback.format_exc(), is_expected(e), said(e)))

    def send_status(self) -> None:
        if self.session is not None:
            self.send(p.Status(self.session.status(), self.tag))

    def commands_waiting(self, stop: tuple[type, ...]) -> bool:
        """Reads the commands waiting in the pipe, without blocking: a Cancel is taken, the others wait in `deferred`
        in arrival order; True when one of them is of a `stop` kind."""
        wanted = False
        while self.commands.poll():
            command = self.receive()
            if command is not None:
                wanted = wanted or isinstance(command, stop)
                self.cancelled = self.cancelled or isinstance(command, p.Cancel)
                if not isinstance(command, p.Cancel):
                    self.deferred.append(command)
        return wanted

    def cancel_requested(self) -> bool:
        """Look for Cancel among waiting commands without losing the others."""
        return self.commands_waiting((p.Cancel,))

    def stop_wanted(self) -> bool:
        """Asked from a request's watcher thread while this one is blocked in a request to a server (the main
        thread reads the pipe again only after the request ended): True on Cancel or Abort. Abort then ends the
        generation as aborted, from `deferred`."""
        return self.commands_waiting((p.Cancel, p.Abort))

    # --- model ----------------------------------------------------------------------------------------
    def _load_progress(self, stage: str, done: int, total: int) -> None:
        if self.cancel_requested():
            raise Cancelled(stage)
        self.send(p.Progress(stage, done, total))

    def load(self, command: p.Load) -> None:
        """Load a model; on any failure the previous model and session stay as they were."""
        try:
            self._open(command.spec, command.device, command.dtype, command.tag)
        except Cancelled:
            self.send(p.LoadFailed(""))  # an empty message: cancelled on purpose
            return
        except Exception as e:  # noqa: BLE001 - a bad model must never take the engine down
            self.send(p.LoadFailed(one_line(e), said(e)))
            return
        self.send(p.ModelLoaded(self.model.info(), command.tag))

    def _open(self, spec: str, device: str, dtype: str, tag: int) -> None:
        """Load `spec` and start a session on it (raises, leaving the previous ones, on any failure)."""
        model = load_model(spec, device=device, dtype=dtype, progress=self._load_progress,
                           kernels_in_background=True)  # float32 on stock ops while the kernels build
        local = not model.remote  # a remote server: no attention, lens or own cache
        session = self._new_session(model)
        model.stop_waiting_when(self.stop_wanted)  # Stop and Cancel reach a request that waits for a server
        self.model, self.session, self.tag = model, session, tag
        self.scheduler = None  # a serve on the previous model is over

        self.kernels_build = start_build(model)

        self.threads = getattr(self, "threads", torch.get_num_threads())  # as the process started
        torch.set_num_threads(self.threads if local else 1)  # remote: see store/remote_model.one_thread

    def _new_session(self, model) -> Session:
        local = not model.remote
        session = Session(model, capture_attention=self.capture_attention and local,
                          capture_lens=self.capture_lens and local)
        session.use_kv_cache(self.use_kv_cache or not local)
        return session

    def restore(self, command: p.Restore) -> None:
        """A restarted engine: the model loaded again and the lost session rebuilt (see protocol.Restore)."""
        self._open(command.spec, command.device, command.dtype, command.tag)
        self.session.update_settings(command.settings)
        if command.ids:  # else there was no prompt yet: the model alone
            self.session.restore(list(command.ids), command.prompt_text, command.nodes, command.node)
            self.send_preview()

    def switch_backend_if_built(self) -> None:
        """Between two forwards: a model on stock ops goes over to the decode kernels once they are built."""
        if self.kernels_build is None:
            return

        if switch_if_built(self.model, self.kernels_build) is not None:
            self.kernels_build = None
            self.send(p.ModelInfoChanged(self.model.info()))

    def cancel(self, command: p.Cancel) -> None:
        """A cancel that arrived when nothing was cancellable: nothing to do."""

    def check_weights(self, command: p.CheckWeights) -> None:
        if self.model is None:
            raise NotReady(say("engine.no_model"))
        started = time.perf_counter()
        now = self.model.current_fingerprint()
        self.send(p.WeightsChecked(self.model.fingerprint, now, (time.perf_counter() - started) * 1000))

    def kv_cache(self, command: p.KvCache) -> None:
        self.use_kv_cache = command.on
        if self.session is not None:
            self.need_session().use_kv_cache(command.on)

    def refuse_remote(self, what: Message, on: bool) -> None:
        """Views that need the weights in this process cannot be turned on for a remote server."""
        if on and self.model is not None and self.model.remote:
            raise ValueError(say("remote.needs_weights", what=what, then=say("remote.off_while", url=self.model.url)))

    def capture(self, command: p.CaptureAttention) -> None:
        self.refuse_remote(say("remote.attention_view"), command.on)
        self.capture_attention = command.on
        if self.session is not None:
            self.session.capture_attention = command.on

    def recapture(self, command: p.Recapture) -> None:
        self.send(p.Recaptured(self.need_session().attention_of(command.node), self.tag))

    def capture_logit_lens(self, command: p.CaptureLens) -> None:
        self.refuse_remote(say("remote.lens"), command.on)
        self.capture_lens = command.on
        if self.session is not None and self.session.set_capture_lens(command.on):
            self.send_preview()  # the pending step's lens, read again for it

    # --- generation -----------------------------------------------------------------------------------
    def prefill(self, command: p.Prefill) -> None:
        session = self.need_session()
        self.tag = command.tag
        session.update_settings(command.settings)
        if command.ids:
            ids, text = list(command.ids), self.model.tokenizer.decode(list(command.ids))
        else:
            ids, text = prompt_ids(self.model, command.prompt, chat=command.chat, system=command.system or None)
        self.send(p.Prefilled(session.prefill(ids, text, progress=self._prefill_progress), self.tag))
        if session.stopped is not None:
            self.send(p.Ended(session.stopped, self.tag))

    def _prefill_progress(self, stage: str, done: int, total: int) -> None:
        if self.cancel_requested():
            self.session.abort()  # the session raises Cancelled before its next chunk
        self.send(p.Progress(stage, done, total))

    def step(self, command: p.Step) -> None:
        for event in self.need_session().step():
            self.send_event(event)
        self.send_preview()

    def force(self, command: p.Force) -> None:
        for event in self.need_session().force(command.token):
            self.send_event(event)
        self.send_preview()

    def rewind(self, command: p.Rewind) -> None:
        self.send(p.RewoundReply(self.need_session().rewind(command.to_step), self.tag))
        self.send_preview()

    def switch(self, command: p.Switch) -> None:
        self.send(p.SwitchedReply(self.need_session().switch(command.node), self.tag))
        self.send_preview()

    def run(self, command: p.Run) -> None:
        session = self.need_session()
        self.batch_s, self.announce_run, self.first_at_once = command.batch_s, True, True
        try:
            for event in session.run(command.max_steps, between=self.between_steps):
                self.send_event(event)
        finally:
            self.batch_s, self.first_at_once = 0.0, False
        self.send_preview()

    def between_steps(self) -> None:
        """Inside a Run, before each step: announce the run once, then serve what has arrived."""
        if self.announce_run:
            self.announce_run = False
            self.send_status()  # running now: the front-end's Step button becomes Pause
        self.switch_backend_if_built()
        while self.commands.poll():
            command = self.receive()
            if command is not None:
                self.deferred.append(command)
        while self.deferred:  # in arrival order, also those that came while the prefill checked for Cancel
            command = self.deferred.popleft()
            if isinstance(command, p.Pause) and command.at_step is None:
                self.session.pause()
            elif isinstance(command, p.Abort) and command.at_step is None:
                self.session.abort()
            elif isinstance(command, (p.Configure, p.CaptureAttention, p.CaptureLens, p.Cancel)):
                self.handle(command)
            else:  # a step, new prompt, reset, run, load, quit, or a Pause/Abort at the step a paced front-end
                # shows (its handler takes back the steps after it): the run ends; it and those after it come next
                self.deferred.appendleft(command)
                self.session.pause()
                return

    # --- many requests at once ------------------------------------------------------------------------
    def serve_requests(self, command: p.Serve) -> None:
        """Run a Serve's requests through the scheduler, step by step, until all finished, `max_steps` were run
        or a stop arrives; the scheduler is kept for AddRequests and ServeMore."""
        self.need_session()
        model = self.model
        if model.remote:
            raise ValueError(say("serve.remote"))
        self.tag = command.tag
        if not 1 <= len(command.requests) <= 64:
            raise ValueError(say("serve.count", high=64, count=len(command.requests)))
        asked = self._asked(command.requests)
        if command.block_tokens < 1 or command.n_blocks < 0:
            raise ValueError(say("serve.pool", block_tokens=command.block_tokens, n_blocks=command.n_blocks))
        n_blocks = command.n_blocks or blocks_for_all(model, asked, command.block_tokens)
        self.scheduler = None
        scheduler = Scheduler(model, asked, n_blocks, command.block_tokens, command.token_budget)
        self.session = self._new_session(model)  # the single session's prompt is gone: a new prompt starts again
        self.scheduler = scheduler
        self.send(p.ServeStarted(tuple(len(a.prompt) for a in asked),
                                 tuple(a.settings.max_new_tokens for a in asked),
                                 tuple(a.arrive_at_step for a in asked), n_blocks, command.block_tokens,
                                 scheduler.pool.block_bytes, self.tag, command.token_budget))
        self._serve_steps(command.max_steps, command.batch_s)

    def _asked(self, requests: tuple[p.ServeRequest, ...]) -> list[BatchRequest]:
        """The requests with their prompts encoded (exact ids where given) as a prefill encodes a prompt."""
        model = self.model
        return [BatchRequest(list(r.ids) if r.ids else prompt_ids(model, r.prompt, chat=r.chat,
                                                                   system=r.system or None)[0],
                             r.settings, r.arrive_at_step) for r in requests]

    def _serving(self) -> Scheduler:
        self.need_session()
        if self.scheduler is None:
            raise NotReady(say("serve.none"))
        return self.scheduler

    def add_requests(self, command: p.AddRequests) -> None:
        scheduler = self._serving()
        first = len(scheduler.requests)
        if not command.requests or first + len(command.requests) > 64:
            raise ValueError(say("serve.full", high=64, count=first))
        added = [scheduler.requests[scheduler.add(asked)].asked for asked in self._asked(command.requests)]
        self.send(p.RequestsAdded(first, tuple(len(a.prompt) for a in added),
                                  tuple(a.settings.max_new_tokens for a in added),
                                  tuple(a.arrive_at_step for a in added), self.tag))

    def serve_more(self, command: p.ServeMore) -> None:
        scheduler = self._serving()
        if scheduler.done:
            raise NotReady(say("serve.finished"))
        self.tag = command.tag
        self._serve_steps(command.max_steps, command.batch_s)

    def _serve_steps(self, max_steps: int, batch_s: float) -> None:
        scheduler, taken = self.scheduler, 0
        self.cancelled = False
        self.batch_s = batch_s
        try:
            while not scheduler.done and (not max_steps or taken < max_steps) and not self.stop_asked():
                for event in scheduler.step():
                    self.queue_step(event, p.Served)
                taken += 1
                self.switch_backend_if_built()
        finally:
            self.flush()
            self.batch_s = 0.0

    def stop_asked(self) -> bool:
        """Between two scheduler steps or measured sizes: a Pause, Abort or Cancel ends the job (and is used up by
        it), and so does any command but a choice that can wait (settings, captures, the KV cache switch, a weights
        check): a new prompt or a load comes next, as after a Run."""
        self.commands_waiting(())
        if all(isinstance(c, WAIT_FOR_A_JOB) for c in self.deferred) and not self.cancelled:
            return False
        self.cancelled = False
        self.deferred = deque(c for c in self.deferred if not isinstance(c, (p.Pause, p.Abort)))
        return True

    def measure_batch(self, command: p.MeasureBatch) -> None:
        """The throughput curve on this machine: the floor first, then each size as it is measured."""
        self.need_session()
        if self.model.remote:
            raise ValueError(say("batch.remote"))
        if not command.sizes or not all(1 <= n <= 16 for n in command.sizes) or not 1 <= command.steps <= 64:
            raise ValueError(say("batch.sizes"))
        self.cancelled = False
        read, gb_per_s, ms = batch_curve.floor_ms(self.model)
        self.send(p.BatchFloor(read, gb_per_s, ms))
        for n in command.sizes:
            if self.stop_asked():
                break
            step_ms = batch_curve.measure(self.model, n, command.steps)
            self.send(p.BatchPoint(n, step_ms, n / (step_ms / 1000)))

    def send_event(self, event) -> None:
        if isinstance(event, Stopped):
            self.send(p.Ended(event, self.tag))
            self.recheck = True  # a generation ended: show that it left the weights as loaded (after Finished)
        else:
            self.queue_step(event)

    def send_preview(self) -> None:
        """The next step's distribution, unless the generation has ended for good."""
        s = self.session
        if s is not None and not s.running and s.prefilled and (s.stopped is None or s.stopped.reason == "aborted"):
            self.send(p.PendingStep(s.preview(), self.tag))

    def pause(self, command: p.Pause) -> None:
        """Outside a run there is nothing to pause, but steps a paced front-end has not shown yet may be
        taken back."""
        if command.at_step is not None and self.session is not None and self.session.prefilled:
            self.end_at_shown(command)
            self.send_preview()

    def abort(self, command: p.Abort) -> None:
        """Stop: end this generation as aborted (Reset or Prefill starts again)."""
        s = self.session
        if s is not None and s.prefilled and command.at_step is not None:
            self.end_at_shown(command)
            self.send_preview()
        elif s is not None and s.prefilled and s.stopped is None:
            self.send_event(s.abort_now())

    def end_at_shown(self, command: p.Pause | p.Abort) -> None:
        """Pause or Abort where a paced front-end is: the steps after `command.at_step` are taken back (it
        never showed them); an Abort then ends the generation there, as aborted."""
        s = self.need_session()
        retracted = s.retract(command.at_step)
        if retracted is not None:
            self.send(p.Retracted(*retracted, self.tag))
        if isinstance(command, p.Abort) and s.stopped is None:
            self.send_event(s.abort_now())

    def reset(self, command: p.Reset) -> None:
        session = self.need_session()
        if not session.prefilled:
            raise NotReady(say("session.prefill_first"))
        self.tag = command.tag
        session.update_settings(command.settings)
        self.send(p.RewoundReply(session.reset(), self.tag))
        self.send_preview()

    def configure(self, command: p.Configure) -> None:
        """New settings apply to the next draw; the pending distribution is redrawn at once (no forward)."""
        command.settings.validate()
        if self.session is not None:
            self.session.update_settings(command.settings)
            self.send_preview()

    def need_session(self):
        if self.session is None:
            raise NotReady(say("engine.no_model"))
        if self.session.running:
            raise NotReady(say("session.running"))
        return self.session
