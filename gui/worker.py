"""The inference worker: a QObject living in its own QThread that owns the model and the session.

The GUI talks to it only through queued signals; it answers with signals carrying the session's frozen
event dataclasses (numpy arrays and Python scalars, never tensors), each tagged with the `epoch` of the
request that started its generation so the GUI can drop answers to a prompt it has since replaced.
Every exception becomes a `failed` signal: the thread never dies. Run is a chain of single steps through
the event loop, so pause / stop / new settings are handled between any two steps.
"""

from __future__ import annotations

import threading
import traceback
from functools import wraps

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from inference.errors import Cancelled, ModelFormatError
from inference.settings import GenerationSettings


def _guarded(method):
    """Run a slot; turn any exception into a `failed` signal instead of a dead thread."""

    @wraps(method)
    def run(self, *args):
        try:
            method(self, *args)
        except Cancelled:
            self._running = False
            self.running.emit(False, self._epoch)
            self.cancelled.emit()
        except Exception as e:  # noqa: BLE001 - the whole point is to catch everything
            self._running = False
            self.running.emit(False, self._epoch)
            expected = isinstance(e, (ModelFormatError, ValueError, RuntimeError))
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.failed.emit(message if expected else f"{type(e).__name__}: {message}",
                             traceback.format_exc(), expected)
        finally:
            self.finished.emit(method.__name__, self._epoch)
    return run


class InferenceWorker(QObject):
    model_loaded = Signal(object, int)  # ModelInfo, epoch
    load_failed = Signal(str)
    progress = Signal(str, int, int)  # stage, done, total (download / dequantise / write / load / prefill)
    prefilled = Signal(object, int)  # PrefillDone, epoch
    stepped = Signal(object, int)  # StepDone, epoch
    pending = Signal(object, int)  # Pending (the next step's distribution), epoch
    stopped = Signal(object, int)  # Stopped, epoch
    running = Signal(bool, int)  # Run started / ended, epoch
    failed = Signal(str, str, bool)  # message, traceback, expected (bad input) or a bug
    cancelled = Signal()
    finished = Signal(str, int)  # a request (slot name) is fully answered, epoch

    def __init__(self, cancel: threading.Event):
        super().__init__()
        self._cancel = cancel  # set by the GUI thread to cancel a download, conversion or long prefill
        self.model = None
        self.session = None
        self.settings = GenerationSettings()
        self.capture_attention = False
        self._epoch = 0
        self._running = False
        self._run_left: int | None = None

    # --- model ----------------------------------------------------------------------------------------
    def _progress(self, stage: str, done: int, total: int) -> None:
        if self._cancel.is_set():
            raise Cancelled(stage)
        self.progress.emit(stage, done, total)

    @Slot(str, str, str, int)
    def load_model(self, spec: str, device: str, dtype: str, epoch: int) -> None:
        """Load a model; on any failure the previous model and session stay as they were."""
        self._cancel.clear()
        try:
            from inference.loading import load_model  # imports torch, here in the worker thread
            from inference.session import Session

            model = load_model(spec, device=device, dtype=dtype, progress=self._progress)
            session = Session(model, self.settings, capture_attention=self.capture_attention)
        except Cancelled:
            self.load_failed.emit("")  # an empty message: cancelled on purpose
            return
        except Exception as e:  # noqa: BLE001 - a bad model must never take the app down
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.load_failed.emit(message if isinstance(e, (ModelFormatError, OSError, ValueError))
                                  else f"{type(e).__name__}: {message}")
            return
        self._running = False
        self.model, self.session, self._epoch = model, session, epoch
        self.model_loaded.emit(model.info(), epoch)

    # --- generation -----------------------------------------------------------------------------------
    @Slot(str, bool, str, int)
    @_guarded
    def prefill(self, prompt: str, chat: bool, system: str, epoch: int) -> None:
        from inference.session import prompt_ids

        self._need_session()
        self._running = False
        self._epoch = epoch
        self._cancel.clear()
        ids, text = prompt_ids(self.model, prompt, chat=chat, system=system or None)
        self.session.update_settings(self.settings)
        event = self.session.prefill(ids, text, progress=self._prefill_progress)
        self.prefilled.emit(event, epoch)
        if self.session.stopped is not None:
            self.stopped.emit(self.session.stopped, epoch)

    def _prefill_progress(self, stage: str, done: int, total: int) -> None:
        if self._cancel.is_set():
            self.session.abort()  # the session raises Cancelled before its next chunk
        self.progress.emit(stage, done, total)

    @Slot()
    @_guarded
    def step(self) -> None:
        self._need_prefill()
        if not self._running:
            self._one_step(preview=True)

    @Slot(int)
    @_guarded
    def run(self, n_steps: int) -> None:
        """Step until a stop rule fires, Pause or Stop arrives, or `n_steps` were taken (0 = no limit)."""
        self._need_prefill()
        if self._running:
            return
        self._running = True
        self._run_left = n_steps or None
        self.running.emit(True, self._epoch)
        QTimer.singleShot(0, self._run_next)

    @_guarded
    def _run_next(self) -> None:
        if not self._running:
            return
        self._one_step(preview=False)
        if self._run_left is not None:
            self._run_left -= 1
        if self.session.stopped is not None or self._run_left == 0:
            self._end_run()
        else:
            QTimer.singleShot(0, self._run_next)

    def _end_run(self) -> None:
        self._running = False
        self.running.emit(False, self._epoch)
        self._emit_preview()

    def _one_step(self, preview: bool) -> None:
        epoch = self._epoch
        for event in self.session.step():
            (self.stopped if hasattr(event, "reason") else self.stepped).emit(event, epoch)
        if preview:  # during Run the next StepDone shows the distribution anyway
            self._emit_preview()

    def _emit_preview(self) -> None:
        s = self.session
        if s is not None and s.prefilled and (s.stopped is None or s.stopped.reason == "aborted"):
            self.pending.emit(s.preview(self.settings.sampler), self._epoch)

    @Slot()
    @_guarded
    def pause(self) -> None:
        if self._running:
            self._end_run()

    @Slot()
    @_guarded
    def abort(self) -> None:
        """Stop: end this generation as aborted (Reset or Prefill starts again)."""
        was_running = self._running
        self._running = False
        if self.session is not None and self.session.prefilled and self.session.stopped is None:
            self.stopped.emit(self.session.abort_now(), self._epoch)
        if was_running:
            self.running.emit(False, self._epoch)

    @Slot(int)
    @_guarded
    def reset(self, epoch: int) -> None:
        self._need_prefill()
        self._running = False
        self._epoch = epoch
        self.session.update_settings(self.settings)
        self.session.reset()
        self._emit_preview()

    @Slot(object)
    @_guarded
    def set_settings(self, settings: GenerationSettings) -> None:
        """New settings apply to the next draw; the pending distribution is redrawn at once (no forward)."""
        settings.validate()
        self.settings = settings
        if self.session is not None:
            self.session.update_settings(settings)
            if not self._running:
                self._emit_preview()

    @Slot(bool)
    def set_capture_attention(self, on: bool) -> None:
        self.capture_attention = on
        if self.session is not None:
            self.session.capture_attention = on

    def _need_session(self) -> None:
        if self.session is None:
            raise RuntimeError("no model is loaded yet")

    def _need_prefill(self) -> None:
        self._need_session()
        if not self.session.prefilled:
            raise RuntimeError("prefill the prompt first")
