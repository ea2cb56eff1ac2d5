"""Recording attention weights during a forward pass (model.AttentionCapture), for the attention view.

A capture receives, per layer, probs (heads, Tq, n): this call's Tq queries, which are always the LAST Tq
of the n positions read (a cached pass reads positions n - Tq..n - 1 as queries; an uncached one re-reads
everything). `LastRowCapture` keeps the newest query's row; `PromptCapture` also keeps the prefill's
whole triangle (attention.PromptAttention), chunk by chunk. The session's recorder (session/recorder.py)
decides when to record, and recomputes either for any node on a scratch cache.
"""

from __future__ import annotations

import numpy as np
import torch

from inference.attention import PromptAttention, kept_positions
from inference.model.config import ModelConfig


class LastRowCapture:
    """Keeps each layer's attention of the newest query position: (layers, heads, n)."""

    def __init__(self, n_layers: int):
        self.rows: list[np.ndarray | None] = [None] * n_layers

    def record(self, layer: int, probs: torch.Tensor) -> None:
        self.rows[layer] = probs[:, -1, :].float().cpu().numpy()

    def array(self) -> np.ndarray:
        return np.stack(self.rows)


class RowsCapture:
    """Keeps every query row of one pass (a verify pass's draft): row r of Tq queries over n positions sees the
    first n - Tq + r + 1 of them (causal), and `row(r)` is that row of every layer: (layers, heads, its positions)."""

    def __init__(self, n_layers: int):
        self.probs: list[np.ndarray | None] = [None] * n_layers

    def record(self, layer: int, probs: torch.Tensor) -> None:
        self.probs[layer] = probs.float().cpu().numpy()  # (heads, Tq, n)

    def row(self, r: int) -> np.ndarray:
        _, Tq, n = self.probs[0].shape
        return np.stack([p[:, r, :n - Tq + r + 1] for p in self.probs])


class PromptCapture(LastRowCapture):
    """The last row, and the prompt x prompt triangle of every layer and head (first P positions)."""

    def __init__(self, config: ModelConfig, n_prompt: int):
        super().__init__(config.n_layers)
        self.n_prompt = n_prompt
        self.n_positions = P = kept_positions(config.n_layers, config.n_heads, n_prompt)
        self.packed = np.zeros((config.n_layers, config.n_heads, P * (P + 1) // 2), dtype=np.float16)
        q, k = np.arange(P)[:, None], np.arange(P)[None, :]
        windows = [config.window_of(i) for i in range(config.n_layers)]  # per layer (Gemma alternates)
        masks = {w: torch.from_numpy((k <= q) & ((k > q - w) if w else True)) for w in set(windows)}  # (P, P)
        self.allowed = [masks[w] for w in windows]  # one mask per distinct window, shared

    def record(self, layer: int, probs: torch.Tensor) -> None:
        super().record(layer, probs)
        _, Tq, n = probs.shape
        first, end = n - Tq, min(n, self.n_positions)  # the kept query rows this call computed
        if first >= end:
            return
        block = probs[:, :end - first, :end].float().cpu()  # (H, rows, keys)
        allowed = self.allowed[layer][first:end, :end]
        block = block.masked_fill(~allowed, float("nan"))  # a sliding window's hidden keys are masked too
        lower = torch.ones_like(allowed).tril(first)  # (rows, keys): key <= query
        self.packed[layer, :, first * (first + 1) // 2:end * (end + 1) // 2] = block[:, lower].half().numpy()

    def prompt(self) -> PromptAttention:
        return PromptAttention(self.packed, self.n_positions, self.n_prompt)
