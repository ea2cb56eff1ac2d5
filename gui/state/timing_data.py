"""What Timing draws, read from the history's log: the forward passes in the order they ran (the timeline),
forward ms by context position per cache mode, and the per-step work of each mode from the formula.

Qt-free, like `history.py`. The log holds every event since the prompt was read, so a run with the cache,
a reset and a run without it on the same prompt both stay there (the tree keeps only the newest step of a
node). A step's forward pass ran just before its draw, except where its logits came from an earlier pass:
step 1 draws from the prefill's, a step after a rewind from the kept (or recomputed) logits, a step after a
branch switch from the switch's re-read, a step of a verify pass from that one pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.ma  # noqa: F401  np.median imports it at its first call: 11 ms idle, 45-180 ms in a Run's first frame

from inference.events import ModelInfo, PrefillDone, Rewound, StepDone, Switched, Verified

# what a block of the timeline is: it says which colour and which words it gets
PREFILL, REREAD, CACHED, NO_CACHE, VERIFY, SAMPLE, RECOMPUTE = (
    "prefill", "reread", "cached", "no_cache", "verify", "sample", "recompute")


@dataclass(frozen=True)
class Block:
    """One stretch of engine time: a forward pass (with the draw that followed it) or a draw alone."""

    kind: str
    start_ms: float
    ms: float
    label: str  # the token drawn, "prefill", "re-read 12"...
    step: StepDone | None = None  # the (first) step it drew
    positions: int = 0  # positions the pass read
    cost_steps: float | None = None  # a verify pass's ms in one-position steps (None: no step measured yet)


class Folded:
    """A fold over the log that reads only the events it has not read yet.

    The history's log only grows until a new prompt starts another one (a paced playback shows a prefix of it),
    and Timing reads it at every frame: folding all of it again cost ~2.5 ms a frame at 300 steps, growing
    with the run. While the log still starts and goes on with the events already folded, only the new ones
    are; otherwise (a new prompt, a shorter prefix) it starts over."""

    def __init__(self, start, step):
        self._start, self._step = start, step  # start() -> a new state; step(state, event) folds one event in
        self._state, self._n, self._first, self._last = start(), 0, None, None

    def __call__(self, log):
        n = self._n
        if not (n and len(log) >= n and log[0] is self._first and log[n - 1] is self._last):
            self._state, n = self._start(), 0
        for i in range(n, len(log)):
            self._step(self._state, log[i])
        self._n, self._first, self._last = len(log), log[0] if log else None, log[-1] if log else None
        return self._state


class _Fresh:
    def __init__(self):
        self.out: list[tuple[StepDone, bool]] = []
        self.fed = False


def _fresh_step(state: _Fresh, event) -> None:
    if isinstance(event, (PrefillDone, Rewound, Switched, Verified)):
        state.fed = False  # the next step's logits came from this event's pass (or were kept)
    elif isinstance(event, StepDone):
        state.out.append((event, state.fed and not event.verified_by))
        state.fed = True


_fresh = Folded(_Fresh, _fresh_step)


def fresh(log) -> list[tuple[StepDone, bool]]:
    """Every step of the log with whether its forward pass ran right before its draw (its forward_ms is
    then that pass's own time, in the mode it was taken in)."""
    return list(_fresh(log).out)


def cache_off(step: StepDone) -> bool:
    """A step taken without the KV cache: nothing was held between passes."""
    return step.kv_used_bytes == 0


def mode_series(log) -> dict[bool, tuple[np.ndarray, np.ndarray]]:
    """Per mode (True: with the cache), the forward ms of the steps whose pass ran in it, by step index
    (context positions read = prompt + index - 1); the newest measurement of an index wins."""
    by_mode: dict[bool, dict[int, float]] = {True: {}, False: {}}
    for step, ran in fresh(log):
        if ran:
            by_mode[not cache_off(step)][step.index] = step.forward_ms
    out = {}
    for mode, points in by_mode.items():
        index = np.array(sorted(points), dtype=float)
        out[mode] = (index, np.array([points[int(i)] for i in index], dtype=float))
    return out


def median_cached_ms(log) -> float | None:
    """The median forward ms of the cached decode passes in the log (None: none yet)."""
    ms = [s.forward_ms for s, ran in fresh(log) if ran and not cache_off(s)]
    return float(np.median(ms)) if ms else None


class _Timeline:
    def __init__(self):
        self.blocks: list[Block] = []
        self.at = 0.0
        self.fed = False
        self.verify: Verified | None = None
        self.cached_ms: list[float] = []  # the plain cached steps' forward ms, what a verify pass is priced in

    def add(self, kind, ms, label, step=None, positions=0, cost_steps=None) -> None:
        self.blocks.append(Block(kind, self.at, max(ms, 0.0), label, step, positions, cost_steps))
        self.at += max(ms, 0.0)


def _timeline_step(state: _Timeline, event) -> None:
    add = state.add
    if isinstance(event, PrefillDone):
        add(PREFILL, event.ms, f"prefill {event.n_tokens}", positions=event.n_tokens)
        state.fed = False
    elif isinstance(event, Switched):
        if event.reread_tokens:
            add(REREAD, event.ms, f"re-read {event.reread_tokens}", positions=event.reread_tokens)
        state.fed = False
    elif isinstance(event, Rewound):
        if event.reset:  # back to the prompt: the passes since start again from its prefill (the old branch's
            prefill = [b for b in state.blocks if b.kind == PREFILL][-1:]  # stay in its log and its tree)
            state.blocks = list(prefill)
            state.at = prefill[0].ms if prefill else 0.0
        if event.forward_ms:
            add(RECOMPUTE, event.forward_ms, f"step {event.to_step}", positions=1)
        state.fed = False
    elif isinstance(event, Verified):
        state.verify = event
    elif isinstance(event, StepDone):
        text, verify = event.token.shown_text, state.verify
        if verify is not None and event.verified_by == verify.index:
            if event.index == verify.index:
                cost = verify_cost(verify, float(np.median(state.cached_ms)) if state.cached_ms else None)
                add(VERIFY, verify.forward_ms, f"verify {verify.emitted}", event, verify.positions,
                    cost[0] if cost else None)
            add(SAMPLE, event.sample_ms, text, event)
        elif state.fed:
            kind = NO_CACHE if cache_off(event) else CACHED
            if kind == CACHED:
                state.cached_ms.append(event.forward_ms)
            add(kind, event.forward_ms + event.sample_ms, text, event,
                event.context_tokens - 1 if kind == NO_CACHE else 1)
        else:
            add(SAMPLE, event.sample_ms, text, event)
        state.fed = True


_timeline = Folded(_Timeline, _timeline_step)


def verify_cost(verify: Verified, plain_ms: float | None) -> tuple[float, float] | None:
    """(the pass's cost in one-position steps, the step's ms): the step is the engine's measure when it sent one
    (the median of its latest plain steps), else `plain_ms` (the median plain cached step seen here: the caller's
    median_cached_ms); None while neither exists."""
    step_ms = verify.step_ms or plain_ms
    return (verify.forward_ms / step_ms, step_ms) if step_ms else None


def timeline(log) -> list[Block]:
    """The engine's passes and draws since the prompt was read (since the last Reset: its prefill, then the
    passes after it), end to end in ms."""
    return list(_timeline(log).blocks)


@dataclass(frozen=True)
class Work:
    """One decode step's work from the formula, at a context of `context` positions."""

    context: int
    kv_macs_cached: int  # K/V projections of the one new position
    kv_read_cached: int  # bytes of past K/V the cached step reads
    kv_macs_no_cache: int  # K/V projections of every position again


def work(info: ModelInfo, context: int) -> Work:
    one = 2 * info.n_layers * info.hidden_size * info.n_kv_heads * info.head_dim
    return Work(context, one, info.kv_bytes_per_token * context, one * context)
