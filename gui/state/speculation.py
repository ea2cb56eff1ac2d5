"""What the views read about speculative decoding: which verify pass decided a step, and the counters.

Qt-free, like `history.py`. A verify pass (`Verified`) drafted tokens by prompt lookup and read them in ONE
forward pass; the steps it decided carry its first step's index in `verified_by`. The history keeps the
passes by that index; since another branch may reuse an index, a pass counts for the current path only
where its accepted drafts are the path's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.events import StepDone, Verified

from gui.state.i18n import translate


@dataclass(frozen=True)
class Pass:
    """A verify pass as the current path holds it."""

    verified: Verified
    steps: tuple[StepDone, ...]  # the steps of the path it decided (fewer after a rewind into it)

    @property
    def index(self) -> int:
        return self.verified.index

    @property
    def accepted(self) -> int:
        return self.verified.accepted

    @property
    def rejected(self) -> int:
        return len(self.verified.drafted) - self.verified.accepted

    def role(self, step: StepDone) -> str:
        """What the pass made of `step`: an "accepted" draft token, the "correction" drawn where the draft
        was rejected, or the "bonus" token drawn after a fully accepted draft."""
        k = step.index - self.index
        if k < self.accepted:
            return "accepted"
        return "correction" if k < len(self.verified.drafted) else "bonus"


@dataclass(frozen=True)
class Counters:
    """Speculation over the current path: drafts accepted, and tokens per forward pass."""

    steps: int
    passes: int  # forward passes that produced the steps (a verify pass is one; step 1's is the prefill)
    verify_passes: int
    drafted: int
    accepted: int

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.steps / self.passes if self.passes else 0.0

    def text(self) -> str:
        """One line: what the status bar and Timing say."""
        return translate("Speculation", "drafts accepted {accepted}/{drafted} ({rate}) · {per_pass} tokens per forward "
                         "pass").format(accepted=self.accepted, drafted=self.drafted, rate=f"{self.acceptance:.0%}",
                                        per_pass=f"{self.tokens_per_pass:.2f}")


def choice_text(verified: Verified) -> str:
    """Why the pass drafted as many tokens as it did (the engine's chooser, draft_length.py), in one line; "" for
    a pass that did not say (a trace of an older engine)."""
    if not verified.draft_max or not verified.acceptance:
        return ""
    return translate("Speculation", "drafted {n} of max {most}: acceptance {acceptance}, a {m}-position pass costs "
                     "{cost} steps").format(n=len(verified.drafted), most=verified.draft_max,
                                            acceptance=f"{verified.acceptance[0]:.2f}", m=verified.positions,
                                            cost=f"{verified.expected_cost:.1f}")


def pass_of(history, step: StepDone | None) -> Pass | None:
    """The verify pass that decided `step` (a step of the current path), or None for a step of its own."""
    if step is None or not getattr(step, "verified_by", 0):
        return None
    verified = history.verifies.get(step.verified_by)
    steps = history.steps
    first = step.verified_by - 1
    if verified is None or first >= len(steps):
        return None
    decided = tuple(s for s in steps[first:first + verified.emitted] if s.verified_by == verified.index)
    n = min(len(decided), verified.accepted)
    if [s.token.id for s in decided[:n]] != [t.id for t in verified.drafted[:n]]:
        return None  # a pass of another branch at the same index
    return Pass(verified, decided)


def newest_pass(history, upto: int | None = None) -> Pass | None:
    """The newest verify pass of the current path (deciding a step at or before `upto`, when given)."""
    steps = history.steps if upto is None else history.steps[:upto]
    for step in reversed(steps):
        if step.verified_by:
            return pass_of(history, step)
    return None


def counters(history) -> Counters | None:
    """The counters of the current path; None when no step of it came from a verify pass."""
    steps = history.steps
    firsts = {s.verified_by for s in steps if s.verified_by}
    if not firsts:
        return None
    drafted = accepted = 0
    for first in firsts:
        found = pass_of(history, steps[first - 1])
        if found is not None:
            drafted += len(found.verified.drafted)
            accepted += found.accepted
    own = sum(1 for s in steps if not s.verified_by)
    return Counters(len(steps), own + len(firsts), len(firsts), drafted, accepted)
