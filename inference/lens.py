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
row per step would cost n_layers x V floats (5.9 MB a step on the default model, a 256 MB budget spent in
43 steps). So the *residual rows* (n_layers - 1, C) are kept with the pending logits instead (69 KB a step
there, in `KeptLogits`): the log-probabilities are computed from them once per pending step, cached while
it stays pending (one (n_layers, V) array), and a step's event keeps only each layer's top k and p(chosen).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from .events import LogitLens


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


def forward_with(source, ids: list[int], start: int, capture, residuals: ResidualRows | None) -> torch.Tensor:
    """source.forward, handing it `residuals` only when the lens is captured: a source that cannot give the
    stream (a server) still serves a session that does not ask for it."""
    if residuals is None:
        return source.forward(ids, start, capture)
    return source.forward(ids, start, capture, residuals=residuals)


class LensCapture:
    """The session's part of the lens (mixed into session.Session, whose state it reads): what to hand the
    source, what to keep, and the lens each reported distribution carries."""

    def _init_lens(self, on: bool) -> None:
        self.capture_lens = on
        self._lens_rows: tuple[torch.Tensor, torch.Tensor] | None = None  # (pending logits, their residuals)
        self._lens_log_probs: tuple[torch.Tensor, torch.Tensor] | None = None  # (residuals, log-probs)

    def _residual_capture(self) -> ResidualRows | None:
        return ResidualRows(self.model.config.n_layers) if self.capture_lens else None

    def _hold_lens(self, logits: torch.Tensor | None, residuals: torch.Tensor | None) -> None:
        """The residual rows of the pending `logits`: only a distribution of these very logits gets a lens,
        so a pending step that came another way (a verify pass, a kept one from before) has none."""
        self._lens_rows = (logits, residuals) if logits is not None and residuals is not None else None

    def _lens(self, logits: torch.Tensor, chosen: int | None) -> LogitLens | None:
        held = self._lens_rows
        if not self.capture_lens or held is None or held[0] is not logits:
            return None
        residuals = held[1]
        if self._lens_log_probs is None or self._lens_log_probs[0] is not residuals:
            self._lens_log_probs = (residuals, lens_log_probs(self.source.head_logits, residuals, logits))
        return lens_report(self._lens_log_probs[1], self.settings.top_n, self._stream.peek, chosen)

    def set_capture_lens(self, on: bool) -> bool:
        """Capture the lens from the next forward pass on (off: no cost at all). Turned on while a pending
        step has none, its position is read again (one forward pass of one token, the cache cropped by one
        first) so that its lens shows at once. Returns whether that pass ran."""
        self.capture_lens = on
        held = self._lens_rows
        if not on or self.running or self._pending is None or (held is not None and held[0] is self._pending):
            return False
        n = self.n_context
        capture = self._residual_capture()
        self.source.crop(n - 1)
        forward_with(self.source, [(self.prompt + self.generated)[-1]], n - 1, None, capture)
        residuals = capture.tensor()
        self._hold_lens(self._pending, residuals)
        kept = self.kept.get(self.node)
        if kept is not None and kept.logits is self._pending:
            self.kept.put(self.node, replace(kept, residuals=residuals))
        return True
