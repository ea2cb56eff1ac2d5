"""The steps reported so far, and which one the views show. Free of Qt: a plain model the GUI observes.

Everything here is what the engine's session reported (its prefill, its steps, the pending distribution,
its stop, its status); the history adds only what the user is looking at. Steps are nodes of a tree:
each knows the step before it, so a rewind that takes another token can start a second branch beside
the first, and `steps` is the path from the prompt to the current node.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from inference.events import Pending, PrefillDone, SessionStatus, StepDistribution, StepDone, Stopped


@dataclass(frozen=True)
class Shown:
    """The step the views show: a drawn step (with its token) or the pending one (before its draw)."""

    index: int
    dist: StepDistribution
    step: StepDone | None

    @property
    def pending(self) -> bool:
        return self.step is None


@dataclass(eq=False)
class Node:
    """One drawn step; the root (step None) stands for the prompt.

    A node refers to its parent weakly: the tree holds no reference cycles, so a forgotten history is
    freed at once instead of by the cyclic garbage collector, whose full passes over every step's arrays
    stalled the GUI thread."""

    step: StepDone | None
    _parent: "weakref.ref[Node] | None" = None
    children: list["Node"] = field(default_factory=list)

    @property
    def parent(self) -> "Node | None":
        return self._parent() if self._parent is not None else None

    def add(self, step: StepDone) -> "Node":
        child = Node(step, weakref.ref(self))
        self.children.append(child)
        return child


class History:
    def __init__(self):
        self.clear()

    def clear(self, keep_prefill: bool = False) -> None:
        """Forget the steps (a new prompt, a reset, a new model); a reset keeps the prompt's prefill."""
        if not keep_prefill:
            self.prefill: PrefillDone | None = None
        self.root = Node(None)
        self.current = self.root
        self._path: list[StepDone] = []  # the steps from the root to `current`, kept as it grows
        self.pending: Pending | None = None
        self.stopped: Stopped | None = None
        self.status: SessionStatus | None = None
        self.mode = "pending"  # "latest" (newest drawn step), "pending" (next step) or "step" (a past one)
        self.selected = 0

    # --- reports --------------------------------------------------------------------------------------
    def prefilled(self, event: PrefillDone) -> None:
        self.prefill = event
        self.pending = Pending(1, event.pending) if event.pending is not None else None
        self.mode = "pending"

    def stepped(self, events) -> None:
        for event in events:
            self.current = self.current.add(event)
            self._path.append(event)
        self.pending = None
        if self.mode != "step":
            self.mode = "latest"

    # --- reading --------------------------------------------------------------------------------------
    @property
    def steps(self) -> list[StepDone]:
        """The drawn steps of the current branch, step 1 first."""
        return self._path

    def shown(self) -> Shown | None:
        """What the candidate / draw / timing views should show now."""
        steps = self._path
        if self.mode == "step" and 1 <= self.selected <= len(steps):
            step = steps[self.selected - 1]
            return Shown(step.index, step.dist, step)
        if self.mode == "latest" and steps:
            return Shown(steps[-1].index, steps[-1].dist, steps[-1])
        if self.pending is not None and self.pending.index == len(steps) + 1:
            return Shown(self.pending.index, self.pending.dist, None)
        if steps:
            return Shown(steps[-1].index, steps[-1].dist, steps[-1])
        return None

    def select(self, index: int | None) -> None:
        """Scrub the history: a step number, or None / one past the last step for the pending step."""
        if index is None or index > len(self._path):
            self.mode = "pending"
        else:
            self.mode, self.selected = "step", max(1, index)

    def follow_latest(self) -> None:
        """Show each new step as it comes (during a Run)."""
        self.mode = "latest"
