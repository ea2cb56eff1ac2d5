"""A small JSON-over-HTTP client for the inference servers (standard library only, one connection per call).

Every failure a person can act on (refused connection, timeout, a server that went away mid-reply, an
HTTP error, a reply that is not JSON) is a `ServerError`: an OSError, so the front-ends show it as one
expected line and the session keeps its state.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request


class ServerError(ConnectionError):
    """The server could not be reached, timed out, failed or answered something unreadable."""


class NotFound(ServerError):
    """HTTP 404: the server does not have this endpoint (dialect detection reads it as 'not me')."""


class RemoteUnsupported(ValueError):
    """A view or setting that needs the model's weights in this process (attention, logit lens)."""


class Http:
    def __init__(self, url: str, timeout: float = 60.0, api_key: str | None = None):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{url!r}: a server address is http://HOST:PORT or https://HOST:PORT")
        self.base = f"{parsed.scheme}://{parsed.netloc}{parsed.path.rstrip('/')}"
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def get(self, path: str, timeout: float | None = None):
        return self._call(urllib.request.Request(self.base + path, headers=self.headers), timeout)

    def get_text(self, path: str, timeout: float | None = None) -> str:
        return self._call(urllib.request.Request(self.base + path, headers=self.headers), timeout, raw=True)

    def post(self, path: str, body: dict, timeout: float | None = None):
        data = json.dumps(body).encode()
        return self._call(urllib.request.Request(self.base + path, data=data, headers=self.headers), timeout)

    def _call(self, request: urllib.request.Request, timeout: float | None, raw: bool = False):
        where = request.full_url
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as reply:
                body = reply.read()
        except urllib.error.HTTPError as e:
            detail = _error_detail(e)
            if e.code == 404:
                raise NotFound(f"{where}: not found (HTTP 404)") from None
            raise ServerError(f"{where}: HTTP {e.code}{': ' + detail if detail else ''}") from None
        except urllib.error.URLError as e:
            reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
            raise ServerError(f"cannot reach the server at {self.base}: {reason}") from None
        except (socket.timeout, TimeoutError):
            raise ServerError(f"the server at {self.base} did not answer within {timeout or self.timeout:g} s") \
                from None
        except (ConnectionError, OSError) as e:  # reset or closed mid-reply (a server that died)
            raise ServerError(f"the server at {self.base} went away: {e.strerror or e}") from None
        if raw:
            return body.decode("utf-8", "replace")
        try:
            return json.loads(body)
        except ValueError:
            raise ServerError(f"{where}: the reply is not JSON") from None


def _error_detail(error: urllib.error.HTTPError) -> str:
    """The message inside a JSON error body (llama.cpp, vLLM and SGLang all send one), cut to one line."""
    try:
        body = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        return ""
    message = body.get("error", body.get("message", body.get("detail", ""))) if isinstance(body, dict) else ""
    if isinstance(message, dict):
        message = message.get("message", "")
    return str(message).splitlines()[0][:200] if message else ""
