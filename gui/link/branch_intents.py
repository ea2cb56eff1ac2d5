"""The branch moves a user asks for (rewind, take another token, backspace, switch branch), mixed into
`controller.Controller`: each becomes one gated engine request, allowed only while nothing else runs."""

from __future__ import annotations

from inference.engine import protocol as p


class BranchIntents:
    """Needs the controller's `info`, `loading`, `prefilled`, `running`, `busy`, `can_step`, `steps`,
    `history`, `shown()`, `_send_settings()`, `_emit()` and `_request()`."""

    @property
    def can_move(self) -> bool:
        """Whether a rewind, a switch or a fork may be asked for now."""
        return self.info is not None and not self.loading and self.prefilled and not self.running \
            and not self.busy

    def take(self, token_id: int) -> None:
        """Take `token_id` at the step shown: the pending one is forced to it; a past step k is forked
        there (rewind to k, then force)."""
        shown = self.shown()
        if shown is None or not self.can_move:
            return
        if not shown.pending:
            self._send_settings()
            self._emit(p.Rewind(shown.index))
        elif not self.can_step:
            return
        self._request("Force", p.Force(int(token_id)))

    def force(self, token: int | str) -> None:
        """Take `token` (an id, or a text: its tokens one step each) at the pending step."""
        if self.can_step and self.can_move:
            self._request("Force", p.Force(token))

    def rewind(self, to_step: int) -> None:
        if self.can_move and 1 <= to_step <= len(self.steps):
            self._request("Rewind", p.Rewind(to_step))

    def backspace(self) -> None:
        """Remove the last token of the current branch (it stays in the tree)."""
        self.rewind(len(self.steps))

    def switch(self, node_id: int) -> None:
        if self.can_move and node_id in self.history.nodes:
            self._request("Switch", p.Switch(node_id))
