"""The logit lens: what the model would predict were it to stop after layer i.

For the position being predicted (the last one of the pass that produced the pending logits), the residual
stream after each layer goes through the final norm and the head, exactly as the stream after the last
layer does for the real prediction: one distribution over the whole vocabulary per layer. The decoder hands
the stream to a `ResidualRows` on every route (model.ResidualCapture), the fused decode layers of the own
kernels included (each returns the stream it leaves), so capturing never falls back to a slower path on any
backend or dtype. Its cost is one head product of n_layers - 1 rows per step (the last layer's logits are
the step's own), paid only while `Session.capture_lens` is on (the session's `Recorder` asks for the rows).

What is kept, and why: p(chosen) is known only after the draw, but the draw may come much later (a rewind
makes step k pending again, and another token may be taken there). Keeping each layer's full-vocabulary
row per step would cost n_layers x V floats (5.9 MB a step on the default model: the 256 MB budget of kept
logits spent in 43 steps). So the *residual rows* (n_layers - 1, C) are held instead, as a field of the pending
step they came with (`PendingStep.residuals`), kept exactly as long as it is (69 KB a step there, 35 % on top
of the kept logits): the log-probabilities are computed from them once per pending step and cached while it
stays pending (one (n_layers, V) array); a step's event keeps only each layer's top k and p(chosen).
"""

from __future__ import annotations

import numpy as np
import torch

from inference.events import LogitLens


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
    """(n_layers, V) float64 log-softmax per layer, on the step's device: `residuals` through `head_logits` (the
    decoder's final norm and head), then the step's own `logits` (V,) for the last layer, so that it equals the
    step. It stays where it was computed (issue 43: on a GPU, 30 layers x 49,152 float64 were 11.8 MB copied to the
    host every step); lens_report copies back only what the view draws."""
    last = logits.to(torch.float64).reshape(1, -1)
    rows = [head_logits(residuals).to(last.device, torch.float64)] if residuals.numel() else []
    return torch.cat([*rows, last]).log_softmax(-1)


def lens_report(log_probs: torch.Tensor, k: int, text_of, chosen: int | None) -> LogitLens:
    """Each layer's top k tokens with p (and p of `chosen` when the step has taken it): ranked where log_probs
    are, and only those (layers x k, and a column) copied to the host."""
    top = torch.topk(log_probs, min(k, log_probs.shape[1]), dim=-1)
    ids = top.indices.cpu().numpy().astype(np.int64)  # (layers, k)
    texts: dict[int, str] = {}
    for i in np.unique(ids):
        texts[int(i)] = text_of(int(i))
    p_chosen = None if chosen is None else log_probs[:, chosen].exp().cpu().numpy()
    return LogitLens(ids=ids, p=top.values.exp().cpu().numpy(),
                     texts=tuple(tuple(texts[int(i)] for i in row) for row in ids), p_chosen=p_chosen)
