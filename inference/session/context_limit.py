"""A context window smaller than the model's, on purpose, and what happens when it is full.

`GenerationSettings.context_limit` (0 = the model's own window) is the window a generation runs in, so a
lesson can reach the end of it in a few dozen tokens. When the token just drawn fills it,
`settings.when_full` decides:

- "stop": the generation ends with the stop reason `context_full` (as at the model's own window);
- "drop-oldest": a *context shift*, as inference servers do (llama.cpp's `context_shift`). The first token
  of the context stays (the BOS / chat-template start that attention leans on); of the tokens after it
  the oldest half are dropped; the rest (newest token included) are read again in ONE prefill pass from
  position 1, so that they sit at consecutive positions 0..kept-1. The cache then equals a fresh prefill
  of the kept tokens, and the next step's logits those of a fresh forward pass over them. The step that
  filled the window reports it: `StepDone.shift` (a `ContextShifted`; in the trace a `context_shift` line).

The session's token record does not change: `prompt` + `generated` are still every token, and
`dropped` says how many after the first no longer are in the model's context. Dropped tokens are always
those at indices 1..dropped of that record (each shift drops the oldest of what is left), so the context
is `ids[:1] + ids[1 + dropped:]`.

Rewind and branch switch re-use cached positions of the full record; after a shift those positions are
gone, so they are refused until a reset (which re-reads the prompt in one pass) or a new prefill.
Speculation is refused with drop-oldest (its verify pass reads at record positions).

`ContextWindow` is the session's part for this: it holds the shifts and answers from the settings and the
token record it is handed; the session crops its cache and reads through it.
"""

from __future__ import annotations

from inference.messages import Message, say

import time
from typing import Callable

from inference.errors import NotReady
from inference.events import ContextShifted
from inference.session.pending import PendingStep
from inference.settings import GenerationSettings
from inference.sources import LogitsSource

KEEP_FIRST = 1  # tokens at the start of the context a shift never drops


class ContextWindow:
    """The window one generation runs in, and the context shifts that kept it inside (drop-oldest)."""

    def __init__(self, model_window: int):
        self.model_window = model_window
        self.shifts: tuple[ContextShifted, ...] = ()  # since the prompt was read (or the last reset), in order

    def size(self, settings: GenerationSettings) -> int:
        """Positions this generation may use: the context limit, at most the model's window."""
        limit = settings.context_limit
        return min(limit, self.model_window) if limit else self.model_window

    @property
    def dropped(self) -> int:
        """Tokens after the first that a context shift took out of the model's context."""
        return sum(s.dropped for s in self.shifts)

    def ids(self, record: list[int], dropped: int | None = None) -> list[int]:
        """The token ids of `record` (prompt + generated) that the model's context holds, in position order
        (with `dropped` tokens out of it; default: those the shifts dropped)."""
        dropped = self.dropped if dropped is None else dropped
        return record[:KEEP_FIRST] + record[KEEP_FIRST + dropped:]

    def too_long(self, n_prompt: int, settings: GenerationSettings) -> Message:
        size = self.size(settings)
        return say("prompt.too_long_for_limit" if size < self.model_window else "prompt.too_long", tokens=n_prompt,
                   window=size)

    def must_stop(self, n_window: int, settings: GenerationSettings, generated_any: bool) -> bool:
        """Whether a context of `n_window` tokens is full and generation must stop (with drop-oldest a step
        shifts instead; a prompt that fills the window alone stops under either policy)."""
        full = n_window >= self.size(settings)
        return full and (settings.when_full == "stop" or not generated_any)

    def must_shift(self, n_window: int, settings: GenerationSettings) -> bool:
        """Whether the token just drawn filled the window and drop-oldest shifts it."""
        return settings.when_full == "drop-oldest" and n_window >= self.size(settings)

    def shift(self, step: int, record: list[int], settings: GenerationSettings, source: LogitsSource,
              read: Callable[[list[int], int], PendingStep]) -> tuple[ContextShifted, PendingStep]:
        """Shift the context after step `step` (see the module's docstring): the source's cache is cropped to
        the first KEEP_FIRST positions and the kept tokens are `read` from there, (ids, start) -> the pending
        step after them, in one pass that no abort stops (a run's abort ends it after this step, with the
        context whole). Returns the shift, recorded here, and that pending step."""
        before = len(self.ids(record))
        drop = (before - KEEP_FIRST) // 2
        first = KEEP_FIRST + self.dropped  # index in the record of the oldest token dropped now
        started = time.perf_counter()
        source.crop(KEEP_FIRST)
        pending = read(self.ids(record, self.dropped + drop)[KEEP_FIRST:], KEEP_FIRST)
        forward_ms = (time.perf_counter() - started) * 1000
        shift = ContextShifted(step=step, dropped=drop, kept=before - drop, first_dropped=first,
                               window=self.size(settings), forward_ms=forward_ms,
                               kv_used_bytes=source.kv_used_bytes)
        self.shifts = self.shifts + (shift,)
        return shift, PendingStep(pending.logits, pending.attention, forward_ms, pending.residuals)

    def refuse_shifted(self) -> None:
        """Moves that re-use cached positions of the full record are refused after a shift."""
        if self.shifts:
            s = self.shifts[0]
            raise NotReady(say("context.shifted", step=s.step, dropped=self.dropped))
