"""Driving an engine in tests without the GUI: `Engine.loop()` on a thread of this process, over real pipes."""

from __future__ import annotations

import multiprocessing
import threading
import time

from inference import protocol as p
from inference.engine import Engine


class EngineOverPipes:
    def __init__(self):
        self.commands, self.writer = multiprocessing.Pipe(duplex=False)
        self.reader, replies = multiprocessing.Pipe(duplex=False)
        self.thread = threading.Thread(target=lambda: Engine(self.commands, replies, cuda=False).loop())
        self.thread.start()
        self.replies = []

    def until(self, accept, timeout=60.0):
        """Read replies until one is accepted (a hang guard, not a timing check)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.reader.poll(0.05):
                self.replies.append(p.receive(self.reader, p.Reply))
                if accept(self.replies[-1]):
                    return self.replies[-1]
        raise AssertionError(f"no such reply; got {[type(r).__name__ for r in self.replies]}")

    def send(self, command) -> None:
        self.writer.send(p.wrap(command))

    def ask(self, command):
        self.send(command)
        name = type(command).__name__
        return self.until(lambda r: isinstance(r, p.Finished) and r.command == name)

    def close(self):
        self.send(p.Quit())
        self.thread.join()
