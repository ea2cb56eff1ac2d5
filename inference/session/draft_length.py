"""How many tokens to draft (issue 38): the length that maximises expected tokens per unit of time.

A verify pass over M positions costs cost(M) one-position steps and, with a draft of n tokens (M = n + 1: the
newest token is read with it), yields E(n) = 1 + sum over k = 1..n of P(the first k drafts are kept) tokens.
A plain step yields 1 token for cost(1) = 1. The chooser drafts the n <= the user's maximum with the highest
E(n) / cost(n + 1), and nothing (a plain step) when no n beats 1. After a plain step the newest token is in the
cache and its step's distribution known: a draft whose first token that draw rejects costs no pass (a plain step
takes it), so the pass is priced P(first kept) cost(n + 1) + P(first rejected) 1. (It reads n positions then,
and leaves its last token to be read with the next draft: n + 1 positions all told.)

Acceptance: per draft position i, the chance the draw keeps draft token i once tokens 0..i-1 were kept, an
exponentially weighted average over the drafts watched, whose first observations are a running mean with the prior
as one (a weight of 1 / (count + 1), never below ACCEPTANCE_WEIGHT): a text the drafts match is drafted after two or
three watched drafts, not after the ten plain steps an average from 0.5 at a weight of 0.25 took. A watched draft is prompt lookup's draft of the user's
maximum length, compared with the tokens generated after it whether a pass read it or plain steps took them: so
acceptance is still measured while the chooser drafts nothing (and it can grow back), and beyond the length
it drafted. It depends on the tokens alone: the same run watches the same drafts.

Cost: measured online on this machine, per M, from the verify passes' forward ms against the plain steps' (the
median of the last few of each: a first step's one-off costs or another process's burst do not price every later
pass). An M timed fewer than MEASURED_AT times is the prior scaled by the median of measured / prior over every M
timed (one noisy pass at M = 6 once priced every longer pass from it alone); before any plain step is timed, the
prior: 1.07 + 0.12 (M - 1) steps for M >= 2 (fitted to the 2-vCPU AMD EPYC with AVX-512 where this was written,
float32 default model at 16 positions, a pass of M positions in one kernels call, csrc/rows.h: M = 2, 4, 5, 8, 16 took
1.19, 1.41, 1.63, 1.84, 2.86 times the fused 1-position step). Timings vary from run to run, and so would
the lengths chosen (never the tokens): $TOKENSTEP_VERIFY_COSTS pins the table (tests do), as one number, the
slope s of cost(M) = 1 + s (M - 1), or a comma-separated list of cost(2), cost(3), ... (the last slope
extends it).
"""

from __future__ import annotations

import os
import statistics
from collections import deque
from typing import NamedTuple

ENV = "TOKENSTEP_VERIFY_COSTS"
PRIOR_FIXED, PRIOR_SLOPE = 0.07, 0.12  # cost(M) = 1 + 0.07 + 0.12 (M - 1) steps for M >= 2 until measured
PRIOR_ACCEPTANCE = 0.5  # a draft position never watched: as likely kept as not
ACCEPTANCE_WEIGHT = 0.25  # the newest observation's weight, once a few were seen: about the last four drafts count
TIMINGS_KEPT = 9  # the latest passes of each kind whose median is the cost
MEASURED_AT = 3  # timings of an M from which its own median is its cost


class Choice(NamedTuple):
    """What the chooser decided before a pass (or a plain step): the draft length and why."""

    n: int  # tokens to draft (0: a plain step)
    n_max: int  # the most it could draft (the user's maximum, or the room left)
    acceptance: tuple[float, ...]  # per draft position, the estimated chance it is kept (its predecessors kept)
    expected_tokens: float  # E(n): tokens the pass is expected to decide
    cost_steps: float  # the pass's expected time in one-position steps (cost(n + 1), less after a plain step)
    step_ms: float | None  # the measured one-position step the costs are multiples of (None: pinned or unmeasured)


def prior(m: int) -> float:
    return 1.0 if m <= 1 else 1 + PRIOR_FIXED + PRIOR_SLOPE * (m - 1)


class PassCosts:
    """cost(M): a forward pass over M positions in one-position steps, measured or pinned."""

    def __init__(self, pinned: list[float] | None = None):
        self.pinned = pinned  # cost(2), cost(3), ...; None: measured
        self._steps: deque[float] = deque(maxlen=TIMINGS_KEPT)
        self._passes: dict[int, deque[float]] = {}

    @property
    def step_ms(self) -> float | None:
        """The plain one-position step's ms (the median of the latest; None: none timed, or pinned costs)."""
        return statistics.median(self._steps) if self._steps else None

    @property
    def pass_ms(self) -> dict[int, float]:
        """A verify pass's ms by the positions it read (the median of the latest of each)."""
        return {m: statistics.median(times) for m, times in self._passes.items()}

    @classmethod
    def from_env(cls) -> PassCosts:
        text = os.environ.get(ENV, "").strip()
        if not text:
            return cls()
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"{ENV} must be a slope or a comma-separated list of costs, got {text!r}") from None
        return cls([1 + values[0]] if len(values) == 1 else values)

    def cost(self, m: int) -> float:
        if m <= 1:
            return 1.0
        if self.pinned is not None:
            table = self.pinned
            if m - 2 < len(table):
                return table[m - 2]
            slope = table[-1] - (table[-2] if len(table) > 1 else 1.0)
            return table[-1] + slope * (m - 1 - len(table))
        step_ms = self.step_ms
        if step_ms is None or not self._passes:
            return prior(m)
        if len(self._passes.get(m, ())) >= MEASURED_AT:
            return max(1.0, statistics.median(self._passes[m]) / step_ms)
        scale = statistics.median(statistics.median(times) / step_ms / prior(k) for k, times in self._passes.items())
        return max(1.0, prior(m) * scale)

    def timed_step(self, ms: float) -> None:
        """A plain one-position pass took `ms`."""
        if ms > 0 and self.pinned is None:
            self._steps.append(ms)

    def timed_pass(self, m: int, ms: float) -> None:
        """A verify pass over `m` positions took `ms`."""
        if ms > 0 and m > 1 and self.pinned is None:
            self._passes.setdefault(m, deque(maxlen=TIMINGS_KEPT)).append(ms)


class DraftLength:
    """The running acceptance estimate and the cost table; `choose` gives the draft length."""

    def __init__(self, costs: PassCosts | None = None):
        self.costs = costs if costs is not None else PassCosts.from_env()
        self.begin()

    def begin(self) -> None:
        """A new prompt (or a reset to it): acceptance back to its prior; the costs stay (they are the machine's)."""
        self.acceptance: list[float] = []
        self.seen: list[int] = []  # observations per draft position
        self.lost_track()

    def lost_track(self) -> None:
        """The generated tokens changed under the watch (a rewind, a branch switch): the watched draft ends."""
        self._draft: list[int] = []
        self._at = self._checked = 0

    @property
    def watching(self) -> bool:
        return bool(self._draft)

    def watch(self, draft: list[int], at: int) -> None:
        """Compare `draft` with the tokens generated from index `at` on (0-based, into the generated tokens)."""
        self._draft, self._at, self._checked = list(draft), at, 0

    def saw(self, generated: list[int]) -> None:
        """The generated tokens so far: each new one against the watched draft, until the first that differs."""
        while self._draft and self._checked < len(self._draft) and self._at + self._checked < len(generated):
            i = self._checked
            kept = generated[self._at + i] == self._draft[i]
            self._observe(i, kept)
            self._checked += 1
            if not kept:
                self.lost_track()
        if self._draft and self._checked >= len(self._draft):
            self.lost_track()

    def _observe(self, i: int, kept: bool) -> None:
        while len(self.acceptance) <= i:
            self.acceptance.append(PRIOR_ACCEPTANCE)
            self.seen.append(0)
        self.seen[i] += 1
        weight = max(ACCEPTANCE_WEIGHT, 1 / (self.seen[i] + 1))  # the prior counts as one observation
        self.acceptance[i] += weight * (float(kept) - self.acceptance[i])

    def estimate(self, i: int) -> float:
        return self.acceptance[i] if i < len(self.acceptance) else PRIOR_ACCEPTANCE

    def expect(self, n: int, positions: int) -> tuple[float, float]:
        """(E(n), cost(positions)): what a pass of an n-token draft over `positions` positions is expected to give
        and cost. (The chooser prices every pass at n + 1 positions: after a plain step its newest token is in
        the cache already and the pass reads n, a little cheaper than priced.)"""
        reach = expected = 1.0
        for i in range(n):
            reach *= self.estimate(i)
            expected += reach
        return expected, self.costs.cost(positions)

    def choose(self, n_max: int, fed: bool = False) -> Choice:
        """The draft length n <= n_max with the most expected tokens per step of time; 0 unless it beats a plain
        step (ties: the shorter draft). `fed`: after a plain step (the first draft token is checked for free)."""
        n_max = max(n_max, 0)
        acceptance = tuple(self.estimate(i) for i in range(n_max))
        best = (0, 1.0, 1.0)  # (n, E(n), the expected cost)
        for n in range(1, n_max + 1):
            expected, cost = self.expect(n, n + 1)
            if fed:
                cost = acceptance[0] * cost + (1 - acceptance[0])
            if expected / cost > best[1] / best[2] * (1 + 1e-9):
                best = (n, expected, cost)
        return Choice(best[0], n_max, acceptance, best[1], best[2], self.costs.step_ms)
