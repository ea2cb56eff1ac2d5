"""The inference worker: a QObject in its own QThread, the GUI's one door to the engine process.

The model and the session live in an engine process (`inference.engine.engine`, started through the
torch-free `inference.engine.process`: this process never imports torch), so decode never waits for the
GUI's redraws to give back the GIL, nor the GUI for decode. The worker starts that process, sends the
protocol commands it is given down one pipe, and relays every reply coming up the other pipe as one
`replied` signal (frozen dataclasses of numpy arrays and Python scalars). If the engine process dies,
`engine_lost` says so; `restart` starts a fresh one (the controller asks at the user's next action).
"""

from __future__ import annotations

import multiprocessing
import os
import threading

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal, Slot

from inference.engine import protocol
from inference.engine.process import run_engine

from gui.state.i18n import translate

POLL_MS = 5  # where pipes cannot be watched by the event loop (Windows), look this often
# The engine runs this much nicer than the GUI: when both want a core, the GUI's short paints and input
# handling go first instead of waiting behind a decode step. The GUI takes at most a few % of a core
# during Run (redraw.py), so decode loses only that; on an idle core nothing changes.
ENGINE_NICENESS = 5


class InferenceWorker(QObject):
    replied = Signal(object)  # a protocol.Reply, in the order the engine sent them
    engine_lost = Signal(str)

    def __init__(self):
        super().__init__()
        self._send_lock = threading.Lock()  # `send` runs in the worker thread, cancel/shutdown in the GUI's
        self.process = None
        self._answered = False  # the running engine has sent a reply: it started
        self._commands = self._replies = None
        self._watch = None
        self._closing = False

    @Slot()
    def start(self) -> None:
        """Start the engine process (runs in the worker thread once it starts)."""
        context = multiprocessing.get_context("spawn")  # never fork a process that runs Qt
        command_reader, command_writer = context.Pipe(duplex=False)
        reply_reader, reply_writer = context.Pipe(duplex=False)
        self.process = context.Process(target=run_engine, args=(command_reader, reply_writer, ENGINE_NICENESS),
                                       daemon=True, name="tokenstep-engine")
        self._answered = False
        try:
            self.process.start()
        except Exception as e:  # noqa: BLE001 - e.g. a script without an `if __name__ == "__main__"` guard
            self.process = None
            self.engine_lost.emit(translate("Engine", "the inference engine could not start: {error}").format(
                error=str(e).strip().splitlines()[0]))
            return
        command_reader.close()  # the engine's ends; ours are the writer of commands and reader of replies
        reply_writer.close()
        self._commands, self._replies = command_writer, reply_reader
        if self._watch is not None:  # the dead engine's
            self._watch.deleteLater()
        if os.name == "posix":
            self._watch = QSocketNotifier(reply_reader.fileno(), QSocketNotifier.Read, self)
            self._watch.activated.connect(self._drain)
        else:
            self._watch = QTimer(self)
            self._watch.timeout.connect(self._drain)
            self._watch.start(POLL_MS)

    @Slot()
    def restart(self) -> None:
        """Start a fresh engine process if the last one is gone (a slot: queued before the next command)."""
        if not self._closing and (self.process is None or not self.process.is_alive()):
            self.start()

    @Slot(object)
    def send(self, command: protocol.Command) -> None:
        """Send one command (a slot: queued from the GUI thread; also safe to call from it directly)."""
        with self._send_lock:
            if self._commands is not None and not self._closing:
                self._commands.send(protocol.wrap(command))

    def cancel(self) -> None:
        """Cancel a download, conversion or long prefill in progress (from any thread, at once)."""
        self.send(protocol.Cancel())

    def _drain(self) -> None:
        """Relay every reply that has arrived."""
        try:
            while self._replies.poll():
                self._answered = True
                try:
                    reply = protocol.receive(self._replies, protocol.Reply)
                except ValueError as e:
                    reply = protocol.Failed(translate("Engine", "the engine sent a message this app cannot read: "
                                                      "{error}").format(error=e), "", False)
                self.replied.emit(reply)
        except (EOFError, OSError):
            self._lost()
        except Exception as e:  # noqa: BLE001 - bytes that are no message at all: the pipe cannot be trusted
            self._lost(translate("Engine", "the inference engine sent bytes this app cannot read ({error}) and was "
                                 "stopped").format(error=type(e).__name__))

    def _lost(self, why: str = "") -> None:
        if self._closing:
            return
        if why and self.process.is_alive():
            self.process.kill()  # it may go on writing: this pipe is done
        if isinstance(self._watch, QSocketNotifier):
            self._watch.setEnabled(False)
        else:
            self._watch.stop()
        self.process.join(1)
        code = self.process.exitcode
        with self._send_lock:
            self._commands.close()
            self._commands = None  # commands sent before `restart` go nowhere
        self._replies.close()
        if why:
            self.engine_lost.emit(why)
            return
        self.engine_lost.emit(  # dead before its first word: it failed to start
            (translate("Engine", "the inference engine stopped (exit code {code})") if self._answered else
             translate("Engine", "the inference engine failed to start (exit code {code})")).format(code=code))

    def shutdown(self, timeout_s: float) -> None:
        """Ask the engine to quit (from the GUI thread); if it is inside a long step, end the process."""
        if self.process is None:
            return
        with self._send_lock:
            self._closing = True  # from here on, the end of the reply pipe is expected, not a crash
            try:
                if self._commands is not None:
                    self._commands.send(protocol.wrap(protocol.Quit()))
            except OSError:
                pass  # the engine is already gone
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(0.5)
