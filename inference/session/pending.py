"""A pending step (the logits the next draw reads, and what their forward pass recorded), and the pending
steps kept per node of the branch tree.

The session holds the pending step of its current node. `KeptSteps` keeps the pending step *after* each node
(the distribution of the step that follows it), so that a rewind shows step k's distribution again without
a forward pass. They are kept up to a byte budget, oldest dropped first (the prompt's are never dropped); a
dropped one costs one forward pass when it is needed again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

KEPT_BYTES = 256 * 2**20  # ~1300 steps of a 49k vocabulary, ~400 of a 152k one


@dataclass(frozen=True)
class PendingStep:
    logits: torch.Tensor  # (V,) on CPU
    attention: np.ndarray | None  # (layers, heads, n): the newest query's row, while attention is recorded
    forward_ms: float  # of the pass that computed the logits (0 for a row of a verify pass after its first)
    # (n_layers - 1, C): the residual stream after each layer but the last at the predicted position, for
    # the logit lens (lens.py); None when the pass did not record it
    residuals: torch.Tensor | None = None


class KeptSteps:
    """The pending step after each node, within `budget` bytes of logits and attention rows. A step's
    residual rows ride along uncounted: ~35 % on top of its logits on the default model (lens.py)."""

    def __init__(self, budget_bytes: int = KEPT_BYTES):
        self.budget = budget_bytes
        self._kept: dict[int, PendingStep] = {}  # oldest first
        self.bytes = 0

    @staticmethod
    def _size(step: PendingStep) -> int:
        extra = step.attention.nbytes if step.attention is not None else 0
        return step.logits.numel() * step.logits.element_size() + extra

    def put(self, node: int, step: PendingStep) -> None:
        """Keep `step` as the newest; drop the oldest (never the prompt's, nor this one) over the budget."""
        self.drop(node)
        self._kept[node] = step
        self.bytes += self._size(step)
        for old in list(self._kept):
            if self.bytes <= self.budget:
                break
            if old not in (0, node):
                self.drop(old)

    def update(self, node: int, step: PendingStep) -> None:
        """Replace the step kept for `node` (when one is) by `step`, of the same size, in the same place."""
        if node in self._kept:
            self._kept[node] = step

    def get(self, node: int) -> PendingStep | None:
        return self._kept.get(node)

    def drop(self, node: int) -> None:
        step = self._kept.pop(node, None)
        if step is not None:
            self.bytes -= self._size(step)

    def keep_only_prompt(self) -> None:
        """Let every step go but the prompt's."""
        for node in [n for n in self._kept if n != 0]:
            self.drop(node)
