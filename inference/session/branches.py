"""The branch tree of one prompt (every token ever taken after it, so that no branch is lost), and the
session's moves in it: rewind, reset, switch.

Node 0 is the prompt. A step from node X that takes token t goes to X's child for t (made the first time):
taking the same token again after a rewind follows the branch already there, taking another starts a new
branch. The session keeps the current node; the tree only answers questions about paths.

Next to the tree, `KeptLogits` keeps the pending logits *after* each node (the distribution of the step
that follows it), so a rewind shows step k's distribution again without a forward pass. They are kept up to
a byte budget, oldest dropped first (the prompt's are never dropped); a dropped one costs one forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import time

import numpy as np
import torch

from inference.errors import NotReady
from inference.events import Rewound, Switched

KEPT_LOGITS_BYTES = 256 * 2**20  # ~1300 steps of a 49k vocabulary, ~400 of a 152k one


@dataclass(eq=False)
class BranchNode:
    id: int
    token_id: int | None  # None for the prompt
    parent: int | None
    depth: int  # steps from the prompt: node k is after step k
    children: dict[int, int] = field(default_factory=dict)  # token id -> node id


class BranchTree:
    def __init__(self):
        self.nodes: dict[int, BranchNode] = {0: BranchNode(0, None, None, 0)}
        self.next_id = 1  # ids are never reused, also in a restored tree with gaps

    def child(self, node: int, token_id: int) -> int:
        """The node after `node` takes `token_id` (made if new)."""
        parent = self.nodes[node]
        found = parent.children.get(token_id)
        if found is None:
            found, self.next_id = self.next_id, self.next_id + 1
            self.nodes[found] = BranchNode(found, token_id, node, parent.depth + 1)
            parent.children[token_id] = found
        return found

    def restore(self, nodes) -> None:
        """Add the nodes of a tree reported before, (id, parent, token id) each, parents before children."""
        for node_id, parent, token_id in sorted(nodes):
            if node_id in self.nodes or parent not in self.nodes:
                raise ValueError(f"cannot restore node {node_id} (parent {parent}): the tree is inconsistent")
            self.nodes[node_id] = BranchNode(node_id, token_id, parent, self.nodes[parent].depth + 1)
            self.nodes[parent].children[token_id] = node_id
            self.next_id = max(self.next_id, node_id + 1)

    def path(self, node: int) -> list[int]:
        """The node ids from step 1 to `node` (the prompt excluded)."""
        if node not in self.nodes:
            raise ValueError(f"there is no node {node} in the branch tree ({len(self.nodes)} nodes)")
        out = []
        while node:
            out.append(node)
            node = self.nodes[node].parent
        return out[::-1]

    def tokens(self, node: int) -> list[int]:
        return [self.nodes[n].token_id for n in self.path(node)]

    def ancestor(self, node: int, depth: int) -> int:
        """The node at `depth` on the path to `node` (0: the prompt)."""
        while self.nodes[node].depth > depth:
            node = self.nodes[node].parent
        return node


@dataclass(frozen=True)
class KeptPending:
    logits: torch.Tensor  # (V,) on CPU
    attention: np.ndarray | None
    forward_ms: float


class KeptLogits:
    def __init__(self, budget_bytes: int = KEPT_LOGITS_BYTES):
        self.budget = budget_bytes
        self._kept: dict[int, KeptPending] = {}
        self.bytes = 0

    @staticmethod
    def _size(entry: KeptPending) -> int:
        extra = entry.attention.nbytes if entry.attention is not None else 0
        return entry.logits.numel() * entry.logits.element_size() + extra

    def put(self, node: int, entry: KeptPending) -> None:
        self.drop(node)
        self._kept[node] = entry
        self.bytes += self._size(entry)
        for old in list(self._kept):
            if self.bytes <= self.budget:
                break
            if old not in (0, node):
                self.drop(old)

    def get(self, node: int) -> KeptPending | None:
        return self._kept.get(node)

    def drop(self, node: int) -> None:
        entry = self._kept.pop(node, None)
        if entry is not None:
            self.bytes -= self._size(entry)


class BranchMoves:
    """Session's moves in its tree (mixed into `session.Session`, whose state they change)."""

    def rewind(self, to_step: int) -> Rewound:
        """Back to just before step `to_step`: steps 1..to_step-1 stay, the cache is cropped to the prompt
        plus them, and step to_step's distribution is pending again (kept: no forward pass). The branch
        left stays in the tree. The seed in force becomes `settings.seed`."""
        self._check_idle()
        if not self.prefilled:
            raise NotReady("prefill the prompt before rewinding")
        if not 1 <= to_step <= len(self.generated):
            raise ValueError(f"rewind {to_step} is outside the {len(self.generated)} steps taken "
                             f"(1 to {len(self.generated)})")
        return self._back_to(self.tree.ancestor(self.node, to_step - 1), reset=False)

    def reset(self) -> Rewound:
        """Back to the prompt (its cache kept), re-seeded from settings.seed; every branch stays in the tree."""
        self._check_idle()
        if not self.prefilled:
            raise NotReady("prefill the prompt first")
        return self._back_to(0, reset=True)

    def _back_to(self, node: int, reset: bool) -> Rewound:
        self._abort.clear()
        depth = self.tree.nodes[node].depth
        kept, forward_ms = self.kept.get(node), 0.0
        self.source.crop(len(self.prompt) + depth)
        if kept is None:  # dropped for its size: one forward pass of the token before it
            self.source.crop(len(self.prompt) + depth - 1)
            kept = self._read_pending(node, [self.tree.nodes[node].token_id], len(self.prompt) + depth - 1)
            forward_ms = kept.forward_ms
        self._go_to(node, kept)
        return Rewound(to_step=depth + 1, node=node, kv_used_bytes=self.source.kv_used_bytes,
                       kv_allocated_bytes=self.source.kv_allocated_bytes, seed=self.seed_used, reset=reset,
                       pending=self.preview().dist, forward_ms=forward_ms)

    def restore(self, ids: list[int], prompt_text: str, nodes, node: int) -> None:
        """Rebuild a session reported before (a restarted engine): read the prompt, put back the tree, go
        to `node` (its path re-read in one pass). Same seed and settings: the next draws are the same."""
        self.prefill(ids, prompt_text)
        self.tree.restore(nodes)
        if node:
            self.switch(node)

    def switch(self, node: int) -> Switched:
        """Make `node` (any node of the tree) current. The positions the cache does not hold for its path
        are re-read in ONE parallel pass, which also gives its pending distribution."""
        self._check_idle()
        if not self.prefilled:
            raise NotReady("prefill the prompt first")
        target = self.tree.tokens(node)  # raises for an unknown node
        held = len(self.generated) - (1 if self._pending is None and self.generated else 0)
        common = 0
        while common < min(held, len(target)) and target[common] == self.generated[common]:
            common += 1
        kept = self.kept.get(node) if common == len(target) else None
        if kept is not None:
            reread = []
        else:  # the tokens past the common prefix; at least the last one, whose logits are pending
            reread = target[min(common, len(target) - 1):]
        self.source.crop(len(self.prompt) + len(target) - len(reread))
        started = time.perf_counter()
        if reread:
            kept = self._read_pending(node, reread, len(self.prompt) + len(target) - len(reread))
        ms = (time.perf_counter() - started) * 1000 if reread else 0.0
        self._go_to(node, kept)
        return Switched(node=node, to_step=len(target), reread_tokens=len(reread), ms=ms,
                        kv_used_bytes=self.source.kv_used_bytes, kv_allocated_bytes=self.source.kv_allocated_bytes,
                        tokens=tuple(target), seed=self.seed_used, pending=self.preview().dist)

    def _read_pending(self, node: int, ids: list[int], start: int) -> KeptPending:
        started = time.perf_counter()
        logits, attention = self._read(ids, start)
        entry = KeptPending(logits, attention, (time.perf_counter() - started) * 1000)
        self.kept.put(node, entry)
        return entry

