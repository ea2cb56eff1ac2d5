"""Decoding without a KV cache: every forward pass re-reads the whole prefix from position 0.

What the cache saves, made visible: with it a step projects K and V for ONE new position and reads the
cached ones; without it every step projects all of them again, so its cost grows with the context while
the cached step stays nearly flat. The logits are the same (within float rounding).
"""

from __future__ import annotations

import torch

from inference.sources import KeepsNoKv, LogitsSource
from inference.sources.local import LocalDecoder


class NoCacheDecoder(KeepsNoKv):
    def __init__(self, decoder):
        self.decoder = decoder
        self.tokens: list[int] = []  # the context so far: each pass reads all of it

    @property
    def forward_count(self) -> int:
        return self.decoder.forward_count

    def start(self, capacity: int) -> None:
        self.tokens = []

    def forward(self, ids: list[int], start: int, capture=None, all_logits: bool = False,
                residuals=None) -> torch.Tensor:
        self.tokens = self.tokens[:start] + list(ids)
        with torch.inference_mode():
            cache = self.decoder.new_cache(len(self.tokens))  # scratch for this pass only, then dropped
            tensor = torch.tensor(self.tokens, device=self.decoder.device)
            logits = self.decoder.forward(tensor, 0, cache, capture=capture, all_logits=all_logits,
                                          residuals=residuals)
        return (logits[-len(ids):] if all_logits else logits[0]).to("cpu")

    def head_logits(self, rows: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.decoder.head_logits(rows)

    def crop(self, n_positions: int) -> None:
        del self.tokens[n_positions:]


def fresh_source(decoder, kv_cache: bool, context: list[int], capacity: int) -> LogitsSource:
    """A new source that holds `context` already: a cached one reads it in one parallel pass."""
    source = LocalDecoder(decoder) if kv_cache else NoCacheDecoder(decoder)
    source.start(max(capacity, len(context)))
    if kv_cache and context:
        source.forward(context, 0)
    elif context:
        source.tokens = list(context)
    return source
