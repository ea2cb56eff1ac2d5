"""The steps reported so far, and which one the views show. Free of Qt: a plain model the GUI observes.

Everything here is what the engine reported (the model it holds, its session's prefill, steps, pending
distribution, stop and status), taken in by `apply(reply)` from the protocol's replies; the history adds
only what the user is looking at, and how far a paced playback has revealed it (`horizon`: the engine may run ahead; until the playback catches up, `steps`, `pending`,
`stopped` and `log` read as if the steps beyond had not come yet). Steps are nodes of a tree:
each knows the step before it, so a rewind that takes another token can start a second branch beside
the first, and `steps` is the path from the prompt to the current node.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from enum import Flag, auto

from inference.attention import AttentionOf
from inference.engine import protocol as p
from inference.events import (Caption, ModelInfo, Pending, PrefillDone, Rewound, SessionStatus, StepDistribution, StepDone,
                              Stopped, Switched, Verified)


class Change(Flag):
    """What a reply changed, so the link can say it: the views' drawing, what can be done now (the
    buttons), the model, the weights' check."""

    NONE = 0
    VIEWS = auto()
    STATE = auto()
    MODEL = auto()
    WEIGHTS = auto()


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
    """One drawn step, a node of the session's branch tree (same id); the root (id 0, step None) stands
    for the prompt.

    A node refers to its parent weakly: the tree holds no reference cycles, so a forgotten history is
    freed at once instead of by the cyclic garbage collector, whose full passes over every step's arrays
    stalled the GUI thread."""

    id: int
    step: StepDone | None
    _parent: "weakref.ref[Node] | None" = None
    children: list["Node"] = field(default_factory=list)

    @property
    def parent(self) -> "Node | None":
        return self._parent() if self._parent is not None else None

    @property
    def depth(self) -> int:
        return self.step.index if self.step is not None else 0

    @property
    def token_id(self) -> int | None:
        return self.step.token.id if self.step is not None else None

    def add(self, step: StepDone) -> "Node":
        child = Node(step.node, step, weakref.ref(self))
        self.children.append(child)
        return child


class History:
    def __init__(self):
        self.info: ModelInfo | None = None  # the model the engine holds
        self.cuda_available: bool | None = None  # known once the engine is up
        self.weights_check: p.WeightsChecked | None = None  # the newest re-hash of the weights
        self.forward_count = 0  # forward passes the engine has run: a preview runs none
        self.tag = 0  # the newest generation asked for: replies about an older one are dropped
        self._tag_before_load = 0
        self.clear()

    def clear(self) -> None:
        """Forget everything (a new prompt, a new model)."""
        self.prefill: PrefillDone | None = None
        self.root = Node(0, None)
        self.nodes: dict[int, Node] = {0: self.root}
        self.current = self.root
        self._path: list[StepDone] = []  # the steps from the root to `current`, kept as it grows
        self._pending: Pending | None = None
        self._stopped: Stopped | None = None
        self.horizon: int | None = None  # steps a paced playback has revealed; None: all of them
        self._log_cut = 0  # the log's length as far as the horizon (while behind)
        self.status: SessionStatus | None = None
        self.reread: Switched | None = None  # the last branch switch's re-read, until the next step
        self._log: list = []  # every event in the order it came: what a trace export writes
        self.verifies: dict[int, Verified] = {}  # speculative verify passes, by the first step they decided
        self.attention: dict[int, AttentionOf] = {}  # recomputed on request, by the node its pass fed
        self.mode = "pending"  # "latest" (newest drawn step), "pending" (next step) or "step" (a past one)
        self.selected = 0

    # --- the generations asked for ------------------------------------------------------------------------
    def next_generation(self) -> int:
        """A prefill or a reset is asked for: the tag its replies will carry."""
        self.tag += 1
        return self.tag

    def load_asked(self) -> int:
        """A load is asked for: a failed one leaves the engine's session (and its tag) as it was."""
        self._tag_before_load = self.tag
        return self.next_generation()

    def engine_lost(self, model_kept: bool) -> None:
        """The engine process died: nothing runs or blocks now; the model is gone unless it is restored."""
        self.status = None
        if not model_kept:
            self.info = None

    # --- replies --------------------------------------------------------------------------------------
    def apply(self, reply: p.Reply) -> Change:
        """Take in what one engine reply reports; what it changed. Replies about a generation older than
        `tag` change nothing (the engine may still answer one the GUI has replaced)."""
        if hasattr(reply, "tag") and not isinstance(reply, (p.ModelLoaded, p.Finished)) and reply.tag != self.tag:
            return Change.NONE
        match reply:
            case p.Ready():
                self.cuda_available = reply.cuda
            case p.ModelLoaded():
                self.info, self.weights_check = reply.info, None
                self.tag = max(self.tag, reply.tag)
                self.clear()
                return Change.MODEL | Change.STATE | Change.VIEWS
            case p.LoadFailed():
                self.tag = self._tag_before_load  # the engine kept its session: its replies carry the old tag
                return Change.STATE
            case p.ModelInfoChanged():  # e.g. decode went over to the kernels: Explain says how decode runs
                self.info = reply.info
                return Change.WEIGHTS | Change.VIEWS
            case p.WeightsChecked():
                self.weights_check = reply
                return Change.WEIGHTS
            case p.Finished():
                self.forward_count = reply.forward_count
            case p.Prefilled():
                self.prefilled(reply.event)
                return Change.VIEWS
            case p.Stepped():  # one step taken by hand, or the steps of a Run batched by the engine
                self.stepped(reply.events)
                return Change.NONE if self.behind else Change.VIEWS  # a paced playback shows them one by one
            case p.PendingStep():
                self._pending = reply.event
                return Change.VIEWS
            case p.RewoundReply():
                self.rewound(reply.event)
                return Change.VIEWS
            case p.Retracted():  # paused or stopped at the step a paced playback showed
                self.retracted(reply.event, reply.dropped)
                return Change.STATE | Change.VIEWS
            case p.SwitchedReply():  # a branch switch, with its re-read
                self.switched(reply.event)
                return Change.VIEWS
            case p.Recaptured():
                self.attention[reply.event.node] = reply.event
                return Change.VIEWS
            case p.Ended():
                self.ended(reply.event)
                return Change.STATE | Change.VIEWS  # the status line names the reason
            case p.Status():
                if reply.status != self.status:
                    self.status = reply.status
                    return Change.STATE | Change.VIEWS
        return Change.NONE

    # --- reports --------------------------------------------------------------------------------------
    def prefilled(self, event: PrefillDone) -> None:
        self.clear()
        self.prefill = event
        self._log.append(event)
        self._pending = Pending(1, event.pending) if event.pending is not None else None
        self.mode = "pending"

    def stepped(self, events) -> None:
        for event in events:
            if isinstance(event, Verified):  # a verify pass: it comes before the steps it decided
                self.verifies[event.index] = event
                self._log.append(event)
                continue
            node = self.nodes.get(event.node)
            if node is None:
                parent = self.nodes.get(event.parent, self.current)
                node = self.nodes[event.node] = parent.add(event)
            else:  # the same token taken again after a rewind: the branch already there, redrawn
                node.step = event
            if node.parent is not self.current:
                self._path = self.path_to(node.parent)
            self.current = node
            self._path.append(event)
            self._log.append(event)
        self._pending, self._stopped, self.reread = None, None, None
        if self.mode != "step":
            self.mode = "latest"

    def rewound(self, event: Rewound) -> None:
        """A rewind or reset: steps from event.to_step on leave the path (they stay in the tree)."""
        self._log.append(event)
        self._move(self.nodes.get(event.node, self.root), event.pending)

    def retracted(self, event: Rewound, dropped: tuple[int, ...]) -> None:
        """The engine took back the steps after event.to_step - 1 (a paced playback had not shown them): they
        leave the path, the `dropped` nodes the tree, their events the log. The step shown stays shown."""
        gone = set(dropped)
        shown = event.to_step - 1
        cut = next((i for i, e in enumerate(self._log)
                    if (isinstance(e, StepDone) and e.node in gone) or (isinstance(e, Verified) and e.index > shown)
                    or (isinstance(e, Stopped) and e.n_generated > shown)), len(self._log))
        del self._log[cut:]
        for node_id in sorted(gone, reverse=True):
            node = self.nodes.pop(node_id, None)
            if node is not None and node.parent is not None:
                node.parent.children.remove(node)
        for index in [i for i in self.verifies if i > shown]:
            del self.verifies[index]
        mode = self.mode
        self._move(self.nodes.get(event.node, self.root), event.pending)
        self.mode = mode if mode != "step" or self.selected <= shown else "pending"

    def switched(self, event: Switched) -> None:
        self._log.append(event)
        self._move(self.nodes.get(event.node, self.root), event.pending)
        self.reread = event

    def captioned(self, caption: Caption) -> None:
        """A lesson's caption: kept in the log, so an exported trace shows it where it came."""
        self._log.append(caption)

    def ended(self, event: Stopped) -> None:
        self._stopped = event
        self._log.append(event)

    def _move(self, node: Node, pending: StepDistribution | None) -> None:
        self.current = node
        self._path = self.path_to(node)
        self._pending = Pending(node.depth + 1, pending) if pending is not None else None
        self._stopped, self.reread, self.mode = None, None, "pending"
        self.horizon = None

    # --- paced playback -------------------------------------------------------------------------------
    @property
    def behind(self) -> bool:
        """A paced playback has not revealed every step reported yet."""
        return self.horizon is not None and self.horizon < len(self._path)

    @property
    def reported(self) -> int:
        """The steps of the current branch the engine has reported (revealed or not)."""
        return len(self._path)

    def hold(self) -> None:
        """From now on reveal the steps only as `reveal` says (a paced Run starts)."""
        self.horizon = len(self._path)
        self._log_cut = len(self._log)

    def reveal(self, n: int) -> None:
        """Show the first `n` steps of the current branch; the log as far as the n-th step's event."""
        n = max(0, min(n, len(self._path)))
        if self.horizon is not None and n > self.horizon:
            for step in self._path[self.horizon:n]:
                self._log_cut = next((i + 1 for i in range(self._log_cut, len(self._log))
                                      if self._log[i] is step), self._log_cut)
        self.horizon = n

    def release(self) -> None:
        """Show everything reported (the playback caught up, or was stopped)."""
        self.horizon = None

    # --- reading --------------------------------------------------------------------------------------
    @property
    def steps(self) -> list[StepDone]:
        """The drawn steps of the current branch, step 1 first (as far as a paced playback has revealed)."""
        return self._path[:self.horizon] if self.behind else self._path

    @property
    def pending(self) -> Pending | None:
        return None if self.behind else self._pending

    @property
    def stopped(self) -> Stopped | None:
        return None if self.behind else self._stopped

    @property
    def log(self) -> list:
        return self._log[:self._log_cut] if self.behind else self._log

    def path_to(self, node: Node | None) -> list[StepDone]:
        """The steps from step 1 to `node`."""
        out = []
        while node is not None and node.step is not None:
            out.append(node.step)
            node = node.parent
        return out[::-1]

    def path_nodes(self) -> list[Node]:
        """The current path's nodes as far as shown, step 1 first (the root excluded)."""
        return [self.nodes[s.node] for s in self.steps if s.node in self.nodes]

    def unrevealed(self) -> set[int]:
        """The nodes a paced playback has not shown yet (the end of the current path)."""
        return {s.node for s in self._path[self.horizon:]} if self.behind else set()

    @property
    def shown_current(self) -> Node:
        """The current node as far as shown: during a paced playback, the last step it revealed."""
        if not self.behind:
            return self.current
        return self.nodes.get(self._path[self.horizon - 1].node, self.root) if self.horizon else self.root

    def leaves(self) -> list[Node]:
        """The tips of the branches, in the order they were made."""
        return sorted((n for n in self.nodes.values() if not n.children and n.step is not None),
                      key=lambda n: n.id)

    def shown(self) -> Shown | None:
        """What the candidate / draw / timing views should show now."""
        steps = self.steps
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

    def shown_index(self) -> int:
        """The step every view shows now (0: none yet)."""
        shown = self.shown()
        return shown.index if shown is not None else 0

    def select(self, index: int | None) -> None:
        """Scrub the history: a step number, or None / one past the last step for the pending step."""
        if index is None or index > len(self.steps):
            self.mode = "pending"
        else:
            self.mode, self.selected = "step", max(1, index)

    def follow_latest(self) -> None:
        """Show each new step as it comes (during a Run)."""
        self.mode = "latest"
