"""Driving an engine in tests without the GUI: `Engine.loop()` on a thread of this process, over real pipes: a
conversation (EngineOverPipes), or a queue of commands answered at once (serve)."""

from __future__ import annotations

import multiprocessing
import threading
import time

from inference.engine import protocol as p
from inference.engine.engine import Engine


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


def serve(commands, finished: int):
    """Queue `commands` (raw objects: envelopes or not) at once, so the engine finds them all waiting; once
    `finished` of them are answered, Quit. The engine's replies."""
    command_reader, command_writer = multiprocessing.Pipe(duplex=False)
    reply_reader, reply_writer = multiprocessing.Pipe(duplex=False)
    for command in commands:
        command_writer.send(command)
    thread = threading.Thread(target=lambda: Engine(command_reader, reply_writer, cuda=False).loop())
    thread.start()
    replies = []
    while thread.is_alive() or reply_reader.poll():
        if reply_reader.poll(0.05):
            replies.append(p.receive(reply_reader, p.Reply))
            if isinstance(replies[-1], p.Finished) and len(of(replies, p.Finished)) == finished:
                command_writer.send(p.wrap(p.Quit()))
    thread.join()
    return replies


def of(replies, kind):
    return [r for r in replies if isinstance(r, kind)]


def steps(replies):
    return [e for r in of(replies, p.Stepped) for e in r.events]
