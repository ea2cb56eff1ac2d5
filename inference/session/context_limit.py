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
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch

from inference.session.branches import KeptLogits, KeptPending
from inference.model.capture import LastRowCapture
from inference.errors import NotReady
from inference.events import ContextShifted, Rewound, StepDone, Switched
from inference.settings import PREFILL_CHUNK

KEEP_FIRST = 1  # tokens at the start of the context a shift never drops


class ContextLimit:
    """Session's context window and context shift (mixed into `session.Session` before BranchMoves)."""

    shifts: tuple[ContextShifted, ...] = ()  # since the prompt was read (or the last reset), in order

    @property
    def context_window(self) -> int:
        """Positions this generation may use: the context limit, at most the model's window."""
        model_window = self.model.config.context_length
        limit = self.settings.context_limit
        return min(limit, model_window) if limit else model_window

    @property
    def dropped(self) -> int:
        """Tokens after the first that a context shift took out of the model's context."""
        return sum(s.dropped for s in self.shifts)

    @property
    def n_window(self) -> int:
        """Tokens in the model's context now (n_context less the dropped ones)."""
        return self.n_context - self.dropped

    def window_ids(self) -> list[int]:
        """The token ids the model's context holds, in position order."""
        ids = self.prompt + self.generated
        return ids[:KEEP_FIRST] + ids[KEEP_FIRST + self.dropped:]

    def _too_long(self, n_prompt: int) -> str:
        limit = " (the context limit)" if self.context_window < self.model.config.context_length else ""
        return f"the prompt is {n_prompt} tokens but the context window holds {self.context_window}{limit}"

    def _context_full(self) -> bool:
        """Whether the context is full and generation must stop (with drop-oldest a step shifts instead;
        a prompt that fills the window alone stops under either policy)."""
        full = self.n_window >= self.context_window
        return full and (self.settings.when_full == "stop" or not self.generated)

    def _shift_when_full(self, event: StepDone, reason: str | None) -> StepDone:
        """After a draw: with drop-oldest and the window full, shift the context (see the module's
        docstring); the step's event then carries the shift. Otherwise the event as it is."""
        if reason is not None or self.settings.when_full != "drop-oldest" or self.n_window < self.context_window:
            return event
        before = self.n_window
        drop = (before - KEEP_FIRST) // 2
        first = KEEP_FIRST + self.dropped  # index in prompt + generated of the oldest token dropped now
        started = time.perf_counter()
        self.source.crop(KEEP_FIRST)
        shift = ContextShifted(step=event.index, dropped=drop, kept=before - drop, first_dropped=first,
                               window=self.context_window, forward_ms=0.0, kv_used_bytes=0)
        self.shifts = self.shifts + (shift,)
        logits, attention = self._reread(self.window_ids()[KEEP_FIRST:])
        forward_ms = (time.perf_counter() - started) * 1000
        self._pending, self._pending_attention, self._pending_forward_ms = logits, attention, forward_ms
        self.kept.put(self.node, KeptPending(logits, attention, forward_ms))
        shift = replace(shift, forward_ms=forward_ms, kv_used_bytes=self.source.kv_used_bytes)
        self.shifts = self.shifts[:-1] + (shift,)
        return replace(event, shift=shift)

    def _reread(self, ids: list[int]) -> tuple[torch.Tensor, np.ndarray | None]:
        """Read `ids` from position KEEP_FIRST on, in chunks of PREFILL_CHUNK, without stopping for an
        abort (a run's abort ends it after this step, with the context whole)."""
        capture = LastRowCapture(self.model.config.n_layers) if self.capture_attention else None
        for at in range(0, len(ids), PREFILL_CHUNK):
            last = at + PREFILL_CHUNK >= len(ids)
            logits = self._forward(ids[at:at + PREFILL_CHUNK], KEEP_FIRST + at, capture if last else None, lens=last)
        return logits, capture.array() if capture else None

    # --- moves that the shift changes ----------------------------------------------------------------
    def _refuse_shifted(self, what: str) -> None:
        if self.shifts:
            s = self.shifts[0]
            raise NotReady(f"cannot {what}: the context was shifted at step {s.step} (the oldest "
                           f"{self.dropped} tokens were dropped, drop-oldest); reset (re-reads the prompt) "
                           f"or prefill again first")

    def rewind(self, to_step: int) -> Rewound:
        self._refuse_shifted("rewind")
        return super().rewind(to_step)

    def switch(self, node: int) -> Switched:
        self._refuse_shifted("switch branches")
        return super().switch(node)

    def reset(self) -> Rewound:
        """Back to the prompt; after a context shift the prompt's dropped positions are read again first
        (one pass), and the kept logits of nodes after the shift (of the shifted context) are let go."""
        self._check_idle()
        if self.shifts and self.prefilled:
            self.source.crop(KEEP_FIRST)
            if len(self.prompt) > KEEP_FIRST:
                self._read(self.prompt[KEEP_FIRST:], KEEP_FIRST)
            root = self.kept.get(0)
            self.kept = KeptLogits(self.kept.budget)
            self.kept.put(0, root)
            self.shifts = ()
        return super().reset()

    def set_capture_lens(self, on: bool) -> bool:
        if self.shifts:  # the pending position is not the record's: the lens shows from the next step
            self.capture_lens = on
            return False
        return super().set_capture_lens(on)
