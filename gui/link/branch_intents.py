"""The branch moves a user asks for (rewind, take another token, backspace, switch branch), a part of
`controller.Controller`: each becomes one gated engine request, allowed only while nothing else runs."""

from __future__ import annotations

from inference.engine import protocol as p


class BranchIntents:
    """Asks through `link` (the controller): reads its `info`, `loading`, `prefilled`, `running`, `busy`,
    `can_step`, `history`, and sends by its `_send_settings()`, `_emit()` and `_request()`."""

    def __init__(self, link):
        self.link = link

    @property
    def can_move(self) -> bool:
        """Whether a rewind, a switch or a fork may be asked for now (not on a served request's steps: the
        engine's session never read its prompt)."""
        c = self.link
        return (c.info is not None and not c.loading and c.prefilled and not c.running and not c.busy
                and c.showing_request is None)

    def take(self, token_id: int) -> None:
        """Take `token_id` at the step shown: the pending one is forced to it; a past step k is forked
        there (rewind to k, then force)."""
        c = self.link
        shown = c.history.shown()
        if shown is None or not self.can_move:
            return
        if not shown.pending:
            c._send_settings()
            c._emit(p.Rewind(shown.index))
        elif not c.can_step:
            return
        c._request(p.Force(int(token_id)))

    def force(self, token: int | str) -> None:
        """Take `token` (an id, or a text: its tokens one step each) at the pending step."""
        if self.link.can_step and self.can_move:
            self.link._request(p.Force(token))

    def rewind(self, to_step: int) -> None:
        if self.can_move and 1 <= to_step <= len(self.link.history.steps):
            self.link._request(p.Rewind(to_step))

    def backspace(self) -> None:
        """Remove the last token of the current branch (it stays in the tree)."""
        self.rewind(len(self.link.history.steps))

    def switch(self, node_id: int) -> None:
        if self.can_move and node_id in self.link.history.nodes:
            self.link._request(p.Switch(node_id))
