"""Attention weights as the session reports them (numpy only: the GUI reads these without torch).

A decode step's attention is one query row per layer and head, (layers, heads, n). The prefill's is the
whole prompt x prompt triangle of every layer and head: all of it comes out of ONE parallel pass, which is
what the attention view shows. That is layers x heads x T^2 numbers, so it is kept as float16, only the
lower triangle (the upper one is the causal mask: nothing to store), and for at most the first
`n_positions` prompt positions: a complete top-left square, so every kept row still sums to 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MAX_PROMPT_POSITIONS = 1024
MAX_PROMPT_BYTES = 192 * 2**20  # the default model (30 layers x 9 heads) keeps ~860 positions under this


def kept_positions(n_layers: int, n_heads: int, n_prompt: int) -> int:
    """How many prompt positions the prefill's matrices keep: all, up to the position and byte caps."""
    per_cell = n_layers * n_heads * 2  # float16 per layer and head
    limit = int((np.sqrt(1 + 8 * MAX_PROMPT_BYTES / per_cell) - 1) / 2)  # P (P + 1) / 2 cells fit
    return max(1, min(n_prompt, MAX_PROMPT_POSITIONS, limit))


@lru_cache(maxsize=4)
def _lower(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tril_indices(n)


@dataclass(frozen=True, eq=False)
class PromptAttention:
    """The prefill's attention: row q (a query position) over keys 0..q, for every layer and head."""

    packed: np.ndarray  # (layers, heads, P (P + 1) / 2) float16, rows one after another; NaN = masked
    n_positions: int  # P: the first P prompt positions are kept
    n_prompt: int  # positions in the prompt

    @property
    def capped(self) -> bool:
        return self.n_positions < self.n_prompt

    def matrix(self, layer: int, head: int | None = None) -> np.ndarray:
        """(P, P) float32: rows are queries, columns keys; NaN where the mask hid a key (above the
        diagonal, or outside a sliding window). head None: the mean over the heads."""
        row = self.packed[layer, head] if head is not None else self.packed[layer].astype(np.float32).mean(0)
        out = np.full((self.n_positions, self.n_positions), np.nan, dtype=np.float32)
        out[_lower(self.n_positions)] = row
        return out


@dataclass(frozen=True, eq=False)
class AttentionOf:
    """Attention recomputed on request for a node of the branch tree (the pass that fed its token; node 0:
    the prefill), for a view opened after that pass ran without recording it."""

    node: int
    attention: np.ndarray  # (layers, heads, n) the last query's row
    prompt: PromptAttention | None  # node 0 only


def kv_groups(n_heads: int, n_kv_heads: int) -> list[list[int]]:
    """Which query heads share each K/V head (grouped-query attention): consecutive runs of n_heads / n_kv."""
    group = n_heads // max(1, n_kv_heads)
    return [list(range(k * group, (k + 1) * group)) for k in range(n_kv_heads)]
