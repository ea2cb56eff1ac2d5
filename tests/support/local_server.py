"""An inference server process on 127.0.0.1 for the remote-source tests: started, asked until it is ready, stopped.

llama_server.py and vllm_server.py say how each server is built and what command, environment and readiness
answer it has; this is the part they share: the port, the log, the wait, the stop and the kill.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def die_with_parent() -> None:
    """In the child, before exec: Linux ends the server when the process that started it dies (a test
    run killed mid-way leaves no server behind)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerDied(RuntimeError):
    """The server process ended before it was ready; `signal` is the one that killed it, if one did."""

    def __init__(self, name: str, returncode: int, log_path: Path):
        self.signal = signal.Signals(-returncode) if returncode < 0 else None
        how = f"died with {self.signal.name} ({signal.strsignal(self.signal).lower()})" if self.signal \
            else f"exited with code {returncode}"
        super().__init__(f"{name} {how} while starting; log: {log_path}")


class LocalServer:
    """One server process on 127.0.0.1; `stop()` and `start()` again keep the same port. A subclass gives its
    `command()`, when a reply of `READY_PATH` means `ready`, and the environment it adds."""

    NAME = "server"
    READY_PATH = "/health"
    STOP_WAIT_S = 10.0  # after SIGTERM, before SIGKILL
    POST_TIMEOUT_S = 60.0
    GROUP = False  # True: the server runs children of its own; signals go to its whole process group
    ENV: dict[str, str] = {}

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = Path(tempfile.gettempdir()) / f"{self.NAME}-{self.port}.log"
        self.start_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self, reply: dict) -> bool:
        raise NotImplementedError

    def start(self, timeout: float = 120.0):
        """Start the server and wait until it is ready (ServerDied if it ends first); returns self."""
        log = open(self.log_path, "ab")
        started = time.monotonic()
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env={**os.environ, **self.ENV}, preexec_fn=die_with_parent,
                                        start_new_session=self.GROUP)
        log.close()
        while time.monotonic() < started + timeout:
            if self.process.poll() is not None:
                code, self.process = self.process.returncode, None
                raise ServerDied(self.NAME, code, self.log_path)
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(self.url + self.READY_PATH, timeout=2) as reply:
                    if self.ready(json.loads(reply.read())):
                        self.start_seconds = time.monotonic() - started
                        return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.NAME} was not ready in {timeout:.0f} s; log: {self.log_path}")

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.GROUP:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(self.STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """Die abruptly (SIGKILL, to its children too where it has them), as a crashed server would."""
        if self.process and self.process.poll() is None:
            self._signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.POST_TIMEOUT_S) as reply:
            return json.loads(reply.read())
