"""The branch tree of one prompt: every token ever taken after it, so that no branch is lost.

Node 0 is the prompt. A step from node X that takes token t goes to X's child for t (made the first time):
taking the same token again after a rewind follows the branch already there, taking another starts a new
branch. The session keeps the current node and makes the moves (rewind, reset, switch: they crop its cache
and set its pending step); the tree answers questions about paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

    def remove(self, node: int) -> None:
        """Take a leaf out of the tree (its id is not reused)."""
        leaf = self.nodes[node]
        if leaf.children:
            raise ValueError(f"node {node} has {len(leaf.children)} branches after it: only a leaf can leave the tree")
        del self.nodes[leaf.parent].children[leaf.token_id]
        del self.nodes[node]

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

    def common_prefix(self, node: int, current: list[int], held: int) -> tuple[list[int], int]:
        """(`node`'s tokens, how many of them lead the first `held` of `current`): the positions a switch
        from `current` to `node` can keep in the cache."""
        target = self.tokens(node)  # raises for an unknown node
        common = 0
        while common < min(held, len(target)) and target[common] == current[common]:
            common += 1
        return target, common
