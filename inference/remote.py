"""A session served to a front-end over a pair of pipes, in a process of its own.

Why a process: the decode loop issues hundreds of small torch calls per token, each of which takes the
GIL back when it returns. In the GUI's process every redraw held the GIL and stalled decode for as long
as it ran (measured: a Run at 5 redraws/s decoded at 0.7x the headless speed; the same redraws in
another process left decode untouched). So the GUI's worker thread only relays: commands go down
`commands`, events come back up `events`, as picklable tuples of the session's frozen dataclasses.

Commands: ("load", spec, device, dtype, epoch), ("prefill", prompt, chat, system, epoch), ("step",),
("run", n_steps), ("pause",), ("abort",), ("reset", epoch), ("settings", GenerationSettings),
("capture", on), ("cancel",) and ("quit",).
Events: ("ready", {"cuda": bool}), ("model_loaded", ModelInfo, epoch), ("load_failed", message),
("progress", stage, done, total), ("prefilled" | "stepped" | "pending" | "stopped", event, epoch),
("stepped_many", [StepDone, ...], epoch) (a Run's steps, sent BATCH_S apart: one wake-up of the GUI for
several tokens),
("running", on, epoch), ("failed", message, traceback, expected), ("cancelled",) and
("finished", command, epoch, forward_count) once a command is fully answered.
"""

from __future__ import annotations

import os
import time
import traceback
from collections import deque

from .errors import Cancelled, ModelFormatError
from .settings import GenerationSettings

BATCH_S = 0.05  # during Run, steps reach the front-end in batches this far apart (it redraws less often)
# The engine runs this much nicer than the front-end: when both want a core, the GUI's short paints and
# input handling go first instead of waiting behind a decode step. The GUI takes at most a few % of a
# core during Run (gui/controller.py), so decode loses only that; on an idle core nothing changes.
ENGINE_NICENESS = 5


def serve(commands, events) -> None:
    """Process entry point: answer commands until ("quit",) or the front-end goes away."""
    import torch

    if hasattr(os, "nice"):
        os.nice(ENGINE_NICENESS)
    try:
        with torch.inference_mode():  # the whole engine: sampling and previews too, not just forwards
            _Server(commands, events).loop()
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass  # the front-end closed its ends of the pipes: nothing left to answer


class _Server:
    def __init__(self, commands, events):
        import torch  # imported here, once, in the engine process: the front-end never needs it

        self.commands, self.events = commands, events
        self.deferred: deque = deque()  # commands that arrived while a load or prefill checked for cancel
        self.model = None
        self.session = None
        self.settings = GenerationSettings()
        self.capture_attention = False
        self.epoch = 0
        self.running = False
        self.run_left: int | None = None
        self.batch: list = []  # a Run's StepDone events not yet sent
        self.batch_epoch = 0
        self.batch_started = 0.0
        self.send("ready", {"cuda": torch.cuda.is_available()})

    def send(self, *message) -> None:
        self.flush()
        self.events.send(message)

    def send_step(self, event, epoch: int) -> None:
        """A step's event: at once when stepping by hand, batched during Run (order kept either way)."""
        if not self.running:
            self.send("stepped", event, epoch)
            return
        if not self.batch:
            self.batch_started, self.batch_epoch = time.monotonic(), epoch
        self.batch.append(event)
        if time.monotonic() - self.batch_started >= BATCH_S:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            batch, self.batch = self.batch, []
            self.events.send(("stepped_many", batch, self.batch_epoch))

    def loop(self) -> None:
        while True:
            if self.deferred:
                command = self.deferred.popleft()
            elif self.running and not self.commands.poll():
                self.handle(("_run_next",))
                continue
            else:
                self.flush()  # nothing is sent late while waiting for the next command
                command = self.commands.recv()
            if command[0] == "quit":
                return
            self.handle(command)

    def handle(self, command) -> None:
        name, args = command[0], command[1:]
        try:
            getattr(self, "do_" + name.lstrip("_"))(*args)
        except Cancelled:
            self.stop_running()
            self.send("cancelled")
        except Exception as e:  # noqa: BLE001 - every failure becomes an event, never a dead engine
            self.stop_running()
            expected = isinstance(e, (ModelFormatError, ValueError, RuntimeError))
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.send("failed", message if expected else f"{type(e).__name__}: {message}", traceback.format_exc(),
                      expected)
        finally:
            if name != "_run_next":
                count = self.model.decoder.forward_count if self.model is not None else 0
                self.send("finished", name, self.epoch, count)

    def cancel_requested(self) -> bool:
        """Look for ("cancel",) among waiting commands without losing the others."""
        while self.commands.poll():
            command = self.commands.recv()
            if command[0] == "cancel":
                return True
            self.deferred.append(command)
        return False

    def stop_running(self) -> None:
        if self.running:
            self.running = False
            self.send("running", False, self.epoch)

    # --- model ----------------------------------------------------------------------------------------
    def _load_progress(self, stage: str, done: int, total: int) -> None:
        if self.cancel_requested():
            raise Cancelled(stage)
        self.send("progress", stage, done, total)

    def do_load(self, spec: str, device: str, dtype: str, epoch: int) -> None:
        """Load a model; on any failure the previous model and session stay as they were."""
        from .loading import load_model
        from .session import Session

        try:
            model = load_model(spec, device=device, dtype=dtype, progress=self._load_progress)
            session = Session(model, self.settings, capture_attention=self.capture_attention)
        except Cancelled:
            self.send("load_failed", "")  # an empty message: cancelled on purpose
            return
        except Exception as e:  # noqa: BLE001 - a bad model must never take the engine down
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.send("load_failed", message if isinstance(e, (ModelFormatError, OSError, ValueError))
                      else f"{type(e).__name__}: {message}")
            return
        self.stop_running()
        self.model, self.session, self.epoch = model, session, epoch
        self.send("model_loaded", model.info(), epoch)

    def do_cancel(self) -> None:
        """A cancel that arrived when nothing was cancellable: nothing to do."""

    # --- generation -----------------------------------------------------------------------------------
    def do_prefill(self, prompt: str, chat: bool, system: str, epoch: int) -> None:
        from .session import prompt_ids

        self.need_session()
        self.stop_running()
        self.epoch = epoch
        ids, text = prompt_ids(self.model, prompt, chat=chat, system=system or None)
        self.session.update_settings(self.settings)
        event = self.session.prefill(ids, text, progress=self._prefill_progress)
        self.send("prefilled", event, epoch)
        if self.session.stopped is not None:
            self.send("stopped", self.session.stopped, epoch)

    def _prefill_progress(self, stage: str, done: int, total: int) -> None:
        if self.cancel_requested():
            self.session.abort()  # the session raises Cancelled before its next chunk
        self.send("progress", stage, done, total)

    def do_step(self) -> None:
        self.need_prefill()
        if not self.running:
            self.one_step(preview=True)

    def do_run(self, n_steps: int) -> None:
        """Step until a stop rule fires, Pause or Stop arrives, or `n_steps` were taken (0 = no limit)."""
        self.need_prefill()
        if self.running:
            return
        self.running = True
        self.run_left = n_steps or None
        self.send("running", True, self.epoch)

    def do_run_next(self) -> None:
        self.one_step(preview=False)
        if self.run_left is not None:
            self.run_left -= 1
        if self.session.stopped is not None or self.run_left == 0:
            self.end_run()

    def end_run(self) -> None:
        self.stop_running()
        self.send_preview()

    def one_step(self, preview: bool) -> None:
        epoch = self.epoch
        for event in self.session.step():
            if hasattr(event, "reason"):
                self.send("stopped", event, epoch)
            else:
                self.send_step(event, epoch)
        if preview:  # during Run the next StepDone shows the distribution anyway
            self.send_preview()

    def send_preview(self) -> None:
        s = self.session
        if s is not None and s.prefilled and (s.stopped is None or s.stopped.reason == "aborted"):
            self.send("pending", s.preview(self.settings.sampler), self.epoch)

    def do_pause(self) -> None:
        if self.running:
            self.end_run()

    def do_abort(self) -> None:
        """Stop: end this generation as aborted (Reset or Prefill starts again)."""
        was_running = self.running
        self.running = False
        if self.session is not None and self.session.prefilled and self.session.stopped is None:
            self.send("stopped", self.session.abort_now(), self.epoch)
        if was_running:
            self.send("running", False, self.epoch)

    def do_reset(self, epoch: int) -> None:
        self.need_prefill()
        self.stop_running()
        self.epoch = epoch
        self.session.update_settings(self.settings)
        self.session.reset()
        self.send_preview()

    def do_settings(self, settings: GenerationSettings) -> None:
        """New settings apply to the next draw; the pending distribution is redrawn at once (no forward)."""
        settings.validate()
        self.settings = settings
        if self.session is not None:
            self.session.update_settings(settings)
            if not self.running:
                self.send_preview()

    def do_capture(self, on: bool) -> None:
        self.capture_attention = on
        if self.session is not None:
            self.session.capture_attention = on

    def need_session(self) -> None:
        if self.session is None:
            raise RuntimeError("no model is loaded yet")

    def need_prefill(self) -> None:
        self.need_session()
        if not self.session.prefilled:
            raise RuntimeError("prefill the prompt first")
