"""Where a session's logits come from: the `LogitsSource` seam.

The session asks a source for the logits after a run of token ids at given positions, and for what
its KV cache holds; it never touches a decoder or a cache itself. The sources: this process's own decoder
(`local.LocalDecoder`), the same without a cache (`nocache.NoCacheDecoder`), and an inference server stepped
one token per request (`remote.RemoteSource`: its cache is the server's, so it reports 0 bytes; its logits
are the server's top-N log-probabilities, and it adds `note_of(logits)` and `widen(...)`).
"""

from __future__ import annotations

from typing import Protocol

import torch


class LogitsSource(Protocol):
    forward_count: int  # forward passes run so far (a preview runs none)

    def start(self, capacity: int) -> None:
        """Forget everything; a fresh cache for about `capacity` positions (it may grow)."""

    def forward(self, ids: list[int], start: int, capture=None, all_logits: bool = False,
                residuals=None) -> torch.Tensor:
        """Read `ids` at positions start.. (their K/V join the cache); the last one's logits, (V,) on CPU
        (every position's, (T, V), with `all_logits`).

        `capture` (see model.AttentionCapture) receives each layer's attention weights, `residuals`
        (model.ResidualCapture) the residual stream after each layer, where supported."""

    def head_logits(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of a residual stream `residuals` received, through the final norm and the head: (rows, V)."""

    def crop(self, n_positions: int) -> None:
        """Keep the cache of the first `n_positions` positions only."""

    @property
    def kv_used_bytes(self) -> int: ...

    @property
    def kv_bytes_per_token(self) -> int: ...

    @property
    def kv_allocated_bytes(self) -> int: ...


class KeepsNoKv:
    """For a source that holds no KV bytes in this process (nothing kept between passes, or a server's cache
    whose size is not known here): the three byte counts read 0."""

    kv_used_bytes = kv_allocated_bytes = kv_bytes_per_token = 0
