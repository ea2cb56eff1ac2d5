"""A small JSON-over-HTTP client for the inference servers (standard library only, one connection per call).

Every failure a person can act on (refused connection, timeout, a server that went away mid-reply, an
HTTP error, a reply that is not JSON) is a `ServerError`: an OSError, so the front-ends show it as one
expected line and the session keeps its state.

What a server sends is not trusted: a call ends at its deadline however slowly the server dribbles its reply
(a watcher thread shuts the socket down), a reply larger than MAX_REPLY_BYTES is refused by its Content-Length or while
it is read, JSON nested deeper than the parser's stack or holding a number beyond float range (`1e400`,
`Infinity`, `NaN`) is refused, and a redirect is never followed: inference APIs do not redirect, and following
one would carry the API key to wherever it points.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Callable

from inference.errors import Cancelled
from inference.messages import say

MAX_REPLY_BYTES = 64 << 20  # the largest reply read: a step's top-N logprobs or a model's props are far smaller
WATCH_S = 0.05  # how often a waiting request asks `Http.watch` whether to stop
REDIRECTS = (301, 302, 303, 307, 308)


class ServerError(ConnectionError):
    """The server could not be reached, timed out, failed or answered something unreadable."""


class Interrupted(ServerError, Cancelled):
    """The request was stopped from this side (Abort, Cancel) while it waited for the server: cancelled on purpose,
    as the engine answers it."""


class NotFound(ServerError):
    """HTTP 404: the server does not have this endpoint (dialect detection reads it as 'not me')."""


class RemoteUnsupported(ValueError):
    """A view or setting that needs the model's weights in this process (attention, logit lens)."""


class _NotFinite(ValueError):
    """A JSON number beyond float range, or a NaN / Infinity literal."""


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotFinite(text)
    return value


def _no_constant(name: str):
    raise _NotFinite(name)


class Http:
    def __init__(self, url: str, timeout: float = 60.0, api_key: str | None = None):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or not parsed.hostname:
            raise ValueError(say("http.address", url=url))
        try:
            port = parsed.port
        except ValueError:
            raise ValueError(say("http.port", url=url)) from None
        self.https = parsed.scheme == "https"
        self.host, self.port = parsed.hostname, port
        self.path = parsed.path.rstrip("/")
        self.base = f"{parsed.scheme}://{parsed.netloc}{self.path}"
        self.timeout = timeout
        # Asked every WATCH_S seconds while a request waits, from another thread (the caller's is blocked in the
        # request): True stops it with Interrupted. The engine reads its command pipe there, so Abort works.
        self.watch: Callable[[], bool] | None = None
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def get(self, path: str, timeout: float | None = None):
        return self._call("GET", path, None, timeout)

    def get_text(self, path: str, timeout: float | None = None) -> str:
        return self._call("GET", path, None, timeout, raw=True)

    def post(self, path: str, body: dict, timeout: float | None = None):
        return self._call("POST", path, json.dumps(body).encode(), timeout)

    def _call(self, method: str, path: str, data: bytes | None, timeout: float | None, raw: bool = False):
        where, limit = self.base + path, timeout or self.timeout
        status, headers, body = self._exchange(method, path, data, limit)
        if status in REDIRECTS:
            target = headers.get("Location", "another address")
            raise ServerError(say("http.redirect", where=where, target=target))
        if status == 404:
            raise NotFound(say("http.not_found", where=where))
        if status >= 400:
            detail = _error_detail(body)
            raise ServerError(say("http.status_detail", where=where, status=status, detail=detail) if detail
                              else say("http.status", where=where, status=status))
        if raw:
            return body.decode("utf-8", "replace")
        try:
            return json.loads(body, parse_float=_finite, parse_constant=_no_constant)
        except _NotFinite as e:
            raise ServerError(say("http.not_finite", where=where, text=str(e)[:40])) from None
        except RecursionError:
            raise ServerError(say("http.nested", where=where)) from None
        except ValueError:
            raise ServerError(say("http.not_json", where=where)) from None

    def _exchange(self, method: str, path: str, data: bytes | None, limit: float):
        """(status, headers, body) of one request, all of it within `limit` seconds."""
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        connection = kind(self.host, self.port, timeout=limit)
        expired, stopped, finished, connected = threading.Event(), threading.Event(), threading.Event(), []

        def end(why: threading.Event):  # a recv blocked on a slow server returns once its socket is shut down
            why.set()
            for sock in connected:  # the socket itself: a reply that closes the connection takes it from `connection`
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        def watch():
            deadline = time.monotonic() + limit
            every = WATCH_S if self.watch is not None else limit  # nothing to ask: wake at the deadline only
            while not finished.wait(max(0.0, min(every, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    return end(expired)
                if self.watch is not None and self.watch():
                    return end(stopped)

        watcher = threading.Thread(target=watch, name="tokenstep-http-watch", daemon=True)
        watcher.start()
        try:
            connection.connect()
            connected.append(connection.sock)
            reply = self._send(connection, method, path, data)
            if expired.is_set() or stopped.is_set():  # the socket was shut down: what was read is not the reply
                raise TimeoutError
            return reply
        except ServerError:
            raise
        except Exception as e:  # noqa: BLE001 - each failure becomes one line naming the server
            if stopped.is_set():
                raise Interrupted(say("http.stopped", url=self.base)) from None
            if expired.is_set() or isinstance(e, (socket.timeout, TimeoutError)):
                raise ServerError(say("http.timeout", url=self.base, seconds=f"{limit:g}")) from None
            raise self._failure(e) from None
        finally:
            finished.set()
            watcher.join()  # the watcher reads the engine's pipe: done before the caller reads it again
            connection.close()

    def _send(self, connection, method: str, path: str, data: bytes | None):
        connection.request(method, self.path + path, body=data, headers=self.headers)
        reply = connection.getresponse()
        size = reply.getheader("Content-Length")
        if size is not None and size.strip().isdigit() and int(size) > MAX_REPLY_BYTES:
            raise ServerError(say("http.too_big", where=self.base + path, size=int(size) / 1e6,
                                  limit=MAX_REPLY_BYTES >> 20))
        chunks, total = [], 0
        while chunk := reply.read1(1 << 16):
            total += len(chunk)
            if total > MAX_REPLY_BYTES:
                raise ServerError(say("http.too_long", where=self.base + path, limit=MAX_REPLY_BYTES >> 20))
            chunks.append(chunk)
        if size is not None and size.strip().isdigit() and total < int(size):
            raise http.client.IncompleteRead(b"", int(size) - total)  # read1 ends at a closed socket quietly
        return reply.status, reply.headers, b"".join(chunks)

    def _failure(self, error: Exception) -> ServerError:
        if isinstance(error, http.client.IncompleteRead):
            return ServerError(say("http.cut_short", url=self.base))
        if isinstance(error, http.client.RemoteDisconnected):
            return ServerError(say("http.closed", url=self.base))
        if isinstance(error, http.client.HTTPException):
            return ServerError(say("http.not_http", url=self.base, error=type(error).__name__))
        if isinstance(error, (ConnectionRefusedError, socket.gaierror)):
            return ServerError(say("http.unreachable", url=self.base, why=error.strerror or str(error)))
        if isinstance(error, OSError):  # reset or closed mid-reply: a server that died
            return ServerError(say("http.went_away", url=self.base, why=error.strerror or str(error)))
        raise error



def _error_detail(body: bytes) -> str:
    """The message inside a JSON error body (llama.cpp, vLLM and SGLang all send one), cut to one line."""
    try:
        reply = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        return ""
    message = reply.get("error", reply.get("message", reply.get("detail", ""))) if isinstance(reply, dict) else ""
    if isinstance(message, dict):
        message = message.get("message", "")
    return str(message).splitlines()[0][:200] if message else ""
