"""Where a session's logits come from: the `LogitsSource` seam.

The session asks a source for the logits after a run of token ids at given positions, and for what
its KV cache holds; it never touches a decoder or a cache itself. The sources: this process's own decoder
(`local.LocalDecoder`), the same without a cache (`nocache.NoCacheDecoder`), and an inference server stepped
one token per request (`remote.RemoteSource`: its cache is the server's, so it reports 0 bytes; its logits
are the server's top-N log-probabilities, and it overrides `note_of(logits)` and `widen(...)`).

What a source can do is said by its type, never asked with hasattr: `remote`, `note_of` and `widen` have
defaults here (a source in this process: no server, nothing to say about its logits, nothing to widen).
A model (store.loading.LoadedModel, store.remote_model.RemoteModel) says the same of itself through
`ModelKind`: `remote`, and `logits_source()`, the source a session on it starts with.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from inference.events import ServerNote
from inference.settings import SamplerSettings


class LogitsSource:
    """The base of every source: the calls a session makes, with defaults where a source in this process needs
    nothing of its own."""

    remote: ClassVar[bool] = False  # the logits come from a server: no weights, attention or lens here
    forward_count: int = 0  # forward passes run so far (a preview runs none)

    def start(self, capacity: int) -> None:
        """Forget everything; a fresh cache for about `capacity` positions (it may grow)."""
        raise NotImplementedError

    def forward(self, ids: list[int], start: int, capture=None, all_logits: bool = False,
                residuals=None) -> torch.Tensor:
        """Read `ids` at positions start.. (their K/V join the cache); the last one's logits, (V,) on CPU
        (every position's, (T, V), with `all_logits`).

        `capture` (see model.AttentionCapture) receives each layer's attention weights, `residuals`
        (model.ResidualCapture) the residual stream after each layer, where supported."""
        raise NotImplementedError

    def head_logits(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of a residual stream `residuals` received, through the final norm and the head: (rows, V)."""
        raise NotImplementedError

    def crop(self, n_positions: int) -> None:
        """Keep the cache of the first `n_positions` positions only."""
        raise NotImplementedError

    def take_outside_ms(self) -> float:
        """Milliseconds of forward passes that computed this source's rows outside its `forward` calls since last
        asked, then 0 until more run (a batch's scheduler runs its requests' passes: session/batch.py); the session
        counts them as the time of the prefill or step those rows served. A source that computes in `forward`: 0."""
        return 0.0

    def note_of(self, logits: torch.Tensor) -> ServerNote | None:
        """What the server said with these very logits (its tail); None: logits computed here."""
        return None

    def widen(self, logits: torch.Tensor, sampler: SamplerSettings, context: list[int]) -> torch.Tensor:
        """`logits`, or the same step asked again with more of the vocabulary while what was left out could matter
        to a draw under `sampler` (`context`: the ids those logits followed). Logits computed here are whole."""
        return logits

    @property
    def kv_used_bytes(self) -> int:
        raise NotImplementedError

    @property
    def kv_bytes_per_token(self) -> int:
        raise NotImplementedError

    @property
    def kv_allocated_bytes(self) -> int:
        raise NotImplementedError


class KeepsNoKv(LogitsSource):
    """For a source that holds no KV bytes in this process (nothing kept between passes, or a server's cache
    whose size is not known here): the three byte counts read 0."""

    kv_used_bytes = kv_allocated_bytes = kv_bytes_per_token = 0


class ModelKind:
    """What a loaded model (store.loading.LoadedModel) and a server's model (store.remote_model.RemoteModel)
    declare alike, so that a session, the engine and `trace` never ask which one they hold."""

    remote: ClassVar[bool] = False  # a server's model: this process only draws (no weights, attention, lens)

    def logits_source(self) -> LogitsSource:
        """A new source a session on this model starts with."""
        raise NotImplementedError

    def stop_waiting_when(self, asked) -> None:
        """`asked()` is called every few tens of milliseconds, from another thread, while a request to a server
        waits; True stops it. A model in this process waits on no server: nothing to watch."""
