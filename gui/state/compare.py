"""What two branches are compared by, Qt-free: how likely the model found each path, and where they part.

- log-prob of a path: the sum of ln p_raw of the tokens it took (the model's own probability, before any
  temperature or truncation, so that drawn and forced tokens are measured alike);
- perplexity: exp(−mean ln p_raw), the "how many equally likely choices per token" a path looks like;
- where two paths part: the first step whose node differs.
The Branches view's edge probability (p_final for a drawn token, p_raw for a forced or greedy one) lives here
too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from inference.events import StepDone


def chosen_p(step: StepDone, kind: str = "p_raw") -> float:
    """The probability (p_raw, p_temp or p_final) the step's distribution gave the token it took.

    The candidates always hold the chosen token (the top-N by logit, plus the chosen one when outside)."""
    candidates = step.dist.candidates
    at = [int(i) for i in candidates.ids].index(step.token.id)
    return float(getattr(candidates, kind)[at])


def chosen_logit(step: StepDone) -> float:
    candidates = step.dist.candidates
    return float(candidates.logits[[int(i) for i in candidates.ids].index(step.token.id)])


def edge_p(step: StepDone) -> tuple[float, str]:
    """The probability drawn on a step's edge and which one it is: p_final, the distribution the draw used.
    A step without a draw shows the model's p_raw instead: a forced token (its p_final may be 0, truncated
    away) and a greedy one (its p_final is 1 by definition, which says nothing)."""
    no_draw = getattr(step, "forced", False) or step.dist.settings.is_greedy
    kind = "p_raw" if no_draw else "p_final"
    return chosen_p(step, kind), kind


def log_prob(steps: Sequence[StepDone]) -> float:
    """Sum of ln p_raw of the chosen tokens (0 for no steps; −inf when one had probability 0)."""
    total = 0.0
    for step in steps:
        p = chosen_p(step)
        if p <= 0.0:
            return -math.inf
        total += math.log(p)
    return total


def perplexity(steps: Sequence[StepDone]) -> float:
    """exp(−mean ln p_raw) of the chosen tokens; nan for no steps."""
    if not steps:
        return math.nan
    return math.exp(-log_prob(steps) / len(steps))


def shared_prefix(a: Sequence, b: Sequence) -> int:
    """How many leading items two paths share (the paths part at step shared_prefix + 1)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def default_other(chosen: int | None, tips: Sequence[int]) -> int | None:
    """The branch to compare with `chosen` by default: the most recently made other tip (tips in the order
    they were made), or None when there is no other."""
    others = [tip for tip in tips if tip != chosen]
    return others[-1] if others else None


def path_text(steps: Sequence[StepDone]) -> str:
    """The generated text of a path (the prompt excluded)."""
    return "".join(step.token.text for step in steps)


@dataclass(frozen=True)
class BranchStats:
    n_steps: int
    text: str
    log_prob: float
    perplexity: float
    entropies: tuple[float, ...]  # per step, nats, of p_raw


def same_length_log_probs(a: Sequence[StepDone], b: Sequence[StepDone]) -> tuple[int, float, float]:
    """log p of two paths over the steps both have (their first min(len) steps): a sum of ln p grows more
    negative with every step, so paths of different lengths compare by it only over the same number of steps."""
    n = min(len(a), len(b))
    return n, log_prob(a[:n]), log_prob(b[:n])


def branch_stats(steps: Sequence[StepDone]) -> BranchStats:
    return BranchStats(len(steps), path_text(steps), log_prob(steps), perplexity(steps),
                       tuple(float(s.dist.entropy) for s in steps))


def step_key(step: StepDone) -> tuple:
    """What identifies a step on a path: its node id in the session's tree (two siblings are different
    nodes even when they took the same token), with the token id as a fallback for node-less steps."""
    node = getattr(step, "node", 0)
    return (step.index, node) if node else (step.index, step.token.id)


def parting_step(a: Sequence[StepDone], b: Sequence[StepDone]) -> int | None:
    """The step index where two paths part (their first different step), or None when one is the other or
    continues it."""
    shared = shared_prefix([step_key(s) for s in a], [step_key(s) for s in b])
    return a[shared].index if shared < min(len(a), len(b)) else None
