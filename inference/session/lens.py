"""The logit lens: what the model would predict were it to stop after layer i.

For the position being predicted (the last one of the pass that produced the pending logits), the residual
stream after each layer goes through the final norm and the head, exactly as the stream after the last
layer does for the real prediction: one distribution over the whole vocabulary per layer. The decoder hands
the stream to a `ResidualRows` on every route (model.ResidualCapture), the fused decode layers of the own
kernels included (each returns the stream it leaves), so capturing never falls back to a slower path on any
backend or dtype. Its cost is one head product of n_layers - 1 rows per step (the last layer's logits are
the step's own), paid only while `Session.capture_lens` is on.

What is kept, and why: p(chosen) is known only after the draw, but the draw may come much later (a rewind
makes step k pending again, and another token may be taken there). Keeping each layer's full-vocabulary
row per step would cost n_layers x V floats (5.9 MB a step on the default model: the 256 MB budget of kept
logits spent in 43 steps). So the *residual rows* (n_layers - 1, C) are held instead, for exactly as long
as the pending logits they came with are kept (69 KB a step there, 35 % on top of the kept logits): the
log-probabilities are computed from them once per pending step and cached while it stays pending (one
(n_layers, V) array); a step's event keeps only each layer's top k and p(chosen).
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import numpy as np
import torch

from inference.events import LogitLens, StepDistribution


class ResidualRows:
    """A model.ResidualCapture that keeps the last position's residual stream after every layer but the last."""

    def __init__(self, n_layers: int):
        self.rows: list[torch.Tensor | None] = [None] * (n_layers - 1)

    def record(self, layer: int, x: torch.Tensor) -> None:
        if layer < len(self.rows):
            self.rows[layer] = x[-1].clone()  # (C,): the fused route may reuse its buffers

    def tensor(self) -> torch.Tensor | None:
        """(n_layers - 1, C); None when the source did not hand the stream over."""
        if any(row is None for row in self.rows):
            return None
        return torch.stack(self.rows) if self.rows else torch.empty(0)


def lens_log_probs(head_logits, residuals: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """(n_layers, V) float64 log-softmax per layer: `residuals` through `head_logits` (the decoder's final
    norm and head), then the step's own `logits` (V,) for the last layer, so that it equals the step."""
    rows = [head_logits(residuals).to("cpu", torch.float64)] if residuals.numel() else []
    return torch.cat([*rows, logits.to("cpu", torch.float64)[None]]).log_softmax(-1)


def lens_report(log_probs: torch.Tensor, k: int, text_of, chosen: int | None) -> LogitLens:
    """Each layer's top k tokens with p (and p of `chosen` when the step has taken it)."""
    top = torch.topk(log_probs, min(k, log_probs.shape[1]), dim=-1)
    ids = top.indices.numpy().astype(np.int64)  # (layers, k)
    texts: dict[int, str] = {}
    for i in np.unique(ids):
        texts[int(i)] = text_of(int(i))
    p_chosen = None if chosen is None else log_probs[:, chosen].exp().numpy()
    return LogitLens(ids=ids, p=top.values.exp().numpy(), texts=tuple(tuple(texts[int(i)] for i in row) for row in ids),
                     p_chosen=p_chosen)


class LensCapture:
    """The session's part of the lens (mixed into session.Session, whose state it reads).

    Residual rows are held by the identity of the logits tensor they came with (`_forward`): only a
    distribution of those very logits gets a lens (a verify pass's rows, or logits kept from before the lens
    was on, have none), and the rows go when those logits do (dropped from the kept ones, a new prompt).
    """

    capture_lens = False
    _lens_log_probs: tuple[torch.Tensor, torch.Tensor] | None = None  # (residuals, log-probs) of the newest

    def _forward(self, ids: list[int], start: int, capture=None, lens: bool = True) -> torch.Tensor:
        """source.forward; while the lens is captured, a pass whose last position is predicted (`lens`) also
        hands the source a ResidualRows (a source that cannot give the stream, a server, is never asked)."""
        if not (lens and self.capture_lens):
            return self.source.forward(ids, start, capture)
        rows = ResidualRows(self.model.config.n_layers)
        logits = self.source.forward(ids, start, capture, residuals=rows)
        self._hold_residuals(logits, rows.tensor())
        return logits

    def _hold_residuals(self, logits: torch.Tensor, residuals: torch.Tensor | None) -> None:
        held = self.__dict__.setdefault("_lens_residuals", {})  # id(logits) -> (weak logits, residuals)
        if residuals is not None:
            held[id(logits)] = (weakref.ref(logits), residuals)
            weakref.finalize(logits, held.pop, id(logits), None)

    def _with_lens(self, summary: StepDistribution, logits: torch.Tensor, chosen: int | None) -> StepDistribution:
        """`summary` of `logits` with its lens, when captured for these logits."""
        held = self.__dict__.get("_lens_residuals", {}).get(id(logits))
        if not self.capture_lens or held is None or held[0]() is not logits:
            return summary
        residuals = held[1]
        if self._lens_log_probs is None or self._lens_log_probs[0] is not residuals:
            self._lens_log_probs = (residuals, lens_log_probs(self.source.head_logits, residuals, logits))
        lens = lens_report(self._lens_log_probs[1], self.settings.top_n, self._stream.peek, chosen)
        return replace(summary, lens=lens)

    def set_capture_lens(self, on: bool) -> bool:
        """Capture the lens from the next forward pass on (off: no cost at all). Turned on while a pending
        step has none, its position is read again (one forward pass of one token, the cache cropped by one
        first) so that its lens shows at once. Returns whether that pass ran."""
        self.capture_lens = on
        pending = self._pending
        held = self.__dict__.get("_lens_residuals", {}).get(id(pending))
        if not on or self.running or pending is None or (held is not None and held[0]() is pending):
            return False
        n = self.n_context
        rows = ResidualRows(self.model.config.n_layers)
        self.source.crop(n - 1)
        self.source.forward([(self.prompt + self.generated)[-1]], n - 1, residuals=rows)
        self._hold_residuals(pending, rows.tensor())
        return True
