"""Speculative decoding without a second model: prompt-lookup drafting, and the rule that keeps a draft.

Drafting: the context's last n tokens (n = 3, then 2, then 1) are searched for earlier in the context; the
tokens that followed the most recent earlier match are the draft. Repetitive text (a quoted paragraph, code
being edited) drafts well; free text rarely.

Keeping: step k's token is drawn exactly as without speculation (its distribution comes from the verify
pass, its uniform u from (seed, k)), and a draft token is kept iff the draw picked it. For a deterministic
draft this is speculative sampling itself: the draw picks the draft token t with probability p_final(t)
(accept), and otherwise picks a token distributed as p_final with t removed and renormalised (the
correction). So the output is not only distributed as without speculation: with the same seed it is the
same tokens.
"""

from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import torch

from inference.session.branches import KeptPending
from inference.events import StepDone, Stopped, Token, Verified

NGRAM_SIZES = (3, 2, 1)


def prompt_lookup(context: list[int], n_max: int) -> tuple[list[int], tuple[int, ...]]:
    """(draft of at most n_max tokens, the n-gram matched); ([], ()) when nothing matches.

    Among the matches of the longest n-gram found, the most recent one that is followed by n_max tokens;
    else the one followed by the most (a match near the end of a periodic context is followed by little:
    an earlier period drafts the whole length)."""
    if n_max < 1 or len(context) < 2:
        return [], ()
    ids = np.asarray(context, dtype=np.int64)
    for n in NGRAM_SIZES:
        if len(ids) <= n:
            continue
        gram = ids[-n:]
        starts = np.flatnonzero(ids[:len(ids) - n] == gram[0])  # earlier starts, a token after each at least
        best = None
        for i in starts[::-1]:  # the most recent match first
            if np.array_equal(ids[i:i + n], gram):
                draft = ids[i + n:i + n + n_max]
                if best is None or draft.size > best.size:
                    best = draft
                if best.size == n_max:
                    break
        if best is not None:
            return best.tolist(), tuple(int(t) for t in gram)
    return [], ()


class Speculation:
    """The session's verify pass (mixed into `session.Session`, whose state it changes)."""

    def _verify(self) -> Iterator[StepDone | Stopped | Verified]:
        """Draft by prompt lookup, read the draft in ONE forward pass (with the newest token when it is not
        in the cache yet), and take tokens from those distributions while the draws agree with the draft."""
        room = min(self.settings.max_new_tokens - len(self.generated),
                   self.model.config.context_length - self.n_context) - 1
        draft, ngram = prompt_lookup(self.prompt + self.generated, min(self.settings.speculate, room))
        if not draft:
            yield from self._take(None)
            return
        started, index, before = time.perf_counter(), len(self.generated) + 1, self.node
        if self._pending is None:  # the newest token goes through in the same pass
            read = [self.generated[-1]] + draft
            rows = self.source.forward(read, self.n_context - 1, all_logits=True)
        else:
            read = draft
            rows = torch.cat([self._pending[None], self.source.forward(draft, self.n_context, all_logits=True)])
        forward_ms = (time.perf_counter() - started) * 1000
        if len(read) > len(draft):
            self.kept.put(before, KeptPending(rows[0], None, forward_ms))
        events, stop, accepted = [], None, 0
        for i, row in enumerate(rows):
            self._pending, self._pending_forward_ms = row, forward_ms if i == 0 else 0.0
            event, reason, matched = self._draw(None, self.n_context * self.source.kv_bytes_per_token, index)
            events.append(event)
            agreed = i < len(draft) and event.token.id == draft[i]
            accepted += agreed
            if agreed:
                self.kept.put(self.node, KeptPending(rows[i + 1], None, 0.0))
            if reason is not None:
                stop = (reason, matched)
            if stop is not None or not agreed:
                break
        self.source.crop(self.n_context - 1)  # the newest token is read with the next draft
        self._pending = None
        self._decode_seconds += time.perf_counter() - started
        yield Verified(index=index, drafted=tuple(self._draft_token(t) for t in draft), ngram=ngram,
                       accepted=accepted, emitted=len(events), positions=len(read), forward_ms=forward_ms)
        yield from events
        if stop is not None:
            yield self._stop(*stop)

    def _draft_token(self, token_id: int) -> Token:
        piece = self.model.tokenizer.piece_text(token_id)
        return Token(token_id, piece, piece, self.model.tokenizer.is_special(token_id))
