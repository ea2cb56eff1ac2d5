"""The inference worker: a QObject in its own QThread, the GUI's one door to the engine.

The model and the session live in an engine process (`inference.remote`), so decode never waits for
the GUI's redraws to give back the GIL, nor the GUI for decode. The worker starts that process, turns
its slots into commands down one pipe, and turns the events coming up the other pipe into signals that
carry the session's frozen dataclasses (numpy arrays and Python scalars). Every event is tagged with the
`epoch` of the request that started its generation, so the GUI can drop answers to a prompt it has
since replaced. Every failure in the engine arrives as `failed`; if the engine process itself dies,
`engine_lost` says so and a fresh one is started.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal, Slot

from inference.remote import serve
from inference.settings import GenerationSettings

POLL_MS = 5  # where pipes cannot be watched by the event loop (Windows), look this often
RESTART_AFTER_S = 10.0  # an engine that dies sooner than this after starting is not restarted


class InferenceWorker(QObject):
    ready = Signal(object)  # {"cuda": bool}: the engine is up (torch imported)
    model_loaded = Signal(object, int)  # ModelInfo, epoch
    load_failed = Signal(str)  # message ("" when cancelled)
    progress = Signal(str, int, int)  # stage, done, total (download / dequantise / write / load / prefill)
    prefilled = Signal(object, int)  # PrefillDone, epoch
    stepped = Signal(object, int)  # StepDone, epoch
    stepped_many = Signal(object, int)  # [StepDone, ...] of a Run, epoch
    pending = Signal(object, int)  # Pending (the next step's distribution), epoch
    stopped = Signal(object, int)  # Stopped, epoch
    running = Signal(bool, int)  # Run started / ended, epoch
    failed = Signal(str, str, bool)  # message, traceback, expected (bad input) or a bug
    cancelled = Signal()
    finished = Signal(str, int, int)  # a command is fully answered: name, epoch, forward passes so far
    engine_lost = Signal(str)

    def __init__(self):
        super().__init__()
        self._send_lock = threading.Lock()  # slots send from the worker thread, cancel/shutdown from the GUI's
        self.process = None
        self._started_at = 0.0
        self._commands = self._events = None
        self._watch = None
        self._closing = False

    @Slot()
    def start(self) -> None:
        """Start the engine process (runs in the worker thread once it starts)."""
        # The engine's OpenMP threads share two cores with this process: let them spin only briefly at a
        # barrier before sleeping, so a redraw does not find both cores taken by spinning (measured: worst
        # event-loop lateness 63-82 ms at the default spin count, 45-47 ms at 1000; decode speed unchanged).
        os.environ.setdefault("GOMP_SPINCOUNT", "1000")
        context = multiprocessing.get_context("spawn")  # never fork a process that runs Qt
        command_reader, command_writer = context.Pipe(duplex=False)
        event_reader, event_writer = context.Pipe(duplex=False)
        self.process = context.Process(target=serve, args=(command_reader, event_writer), daemon=True,
                                       name="tokenstep-engine")
        self._started_at = time.monotonic()
        try:
            self.process.start()
        except Exception as e:  # noqa: BLE001 - e.g. a script without an `if __name__ == "__main__"` guard
            self.process = None
            self.engine_lost.emit(f"the inference engine could not start: {str(e).strip().splitlines()[0]}")
            return
        command_reader.close()  # the engine's ends; ours are the writer of commands and reader of events
        event_writer.close()
        self._commands, self._events = command_writer, event_reader
        if os.name == "posix":
            self._watch = QSocketNotifier(event_reader.fileno(), QSocketNotifier.Read, self)
            self._watch.activated.connect(self._drain)
        else:
            self._watch = QTimer(self)
            self._watch.timeout.connect(self._drain)
            self._watch.start(POLL_MS)

    def _send(self, *command) -> None:
        with self._send_lock:
            if self._commands is not None and not self._closing:
                self._commands.send(command)

    def _drain(self) -> None:
        """Relay every event that has arrived."""
        try:
            while self._events.poll():
                kind, *payload = self._events.recv()
                getattr(self, kind).emit(*payload)
        except (EOFError, OSError):
            self._lost()

    def _lost(self) -> None:
        if self._closing:
            return
        if isinstance(self._watch, QSocketNotifier):
            self._watch.setEnabled(False)
        else:
            self._watch.stop()
        self.process.join(1)
        code = self.process.exitcode
        with self._send_lock:
            self._commands.close()
        self._events.close()
        if time.monotonic() - self._started_at < RESTART_AFTER_S:  # it dies at start: restarting won't help
            self.engine_lost.emit(f"the inference engine failed to start (exit code {code})")
            return
        self.engine_lost.emit(f"the inference engine stopped (exit code {code}); it was restarted, "
                              "load the model again")
        self.start()

    # --- slots: one command each ----------------------------------------------------------------------
    @Slot(str, str, str, int)
    def load_model(self, spec: str, device: str, dtype: str, epoch: int) -> None:
        self._send("load", spec, device, dtype, epoch)

    @Slot(str, bool, str, int)
    def prefill(self, prompt: str, chat: bool, system: str, epoch: int) -> None:
        self._send("prefill", prompt, chat, system, epoch)

    @Slot()
    def step(self) -> None:
        self._send("step")

    @Slot(int)
    def run(self, n_steps: int) -> None:
        self._send("run", n_steps)

    @Slot()
    def pause(self) -> None:
        self._send("pause")

    @Slot()
    def abort(self) -> None:
        self._send("abort")

    @Slot(int)
    def reset(self, epoch: int) -> None:
        self._send("reset", epoch)

    @Slot(object)
    def set_settings(self, settings: GenerationSettings) -> None:
        self._send("settings", settings)

    @Slot(bool)
    def set_capture_attention(self, on: bool) -> None:
        self._send("capture", on)

    # --- thread-safe, called from the GUI thread ------------------------------------------------------
    def cancel(self) -> None:
        """Cancel a download, conversion or long prefill in progress."""
        self._send("cancel")

    def shutdown(self, timeout_s: float) -> None:
        """Ask the engine to quit; if it is inside a long step, end the process."""
        if self.process is None:
            return
        with self._send_lock:
            self._closing = True  # from here on, the end of the event pipe is expected, not a crash
            try:
                self._commands.send(("quit",))
            except OSError:
                pass  # the engine is already gone
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(0.5)
