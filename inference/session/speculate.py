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

Here: the draft (`prompt_lookup`) and the verify pass that reads it (`read_draft`); the session draws from the
pass's rows one by one while `keeps` says the draw agreed with the draft.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from inference.events import Token
from inference.model.capture import RowsCapture
from inference.session.pending import PendingStep
from inference.sources import LogitsSource

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


def read_draft(source: LogitsSource, record: list[int], pending: PendingStep | None,
               draft: list[int], capture: RowsCapture | None = None) -> tuple[list[PendingStep], int]:
    """The verify pass: `draft` read after `record` (prompt + generated) in ONE forward pass, with the newest
    token when it is not in the cache yet (no `pending` step). Returns (the pending steps to draw from, one
    per draft token and one after the whole draft: the first carries the pass's time; each its row of the
    pass's attention when `capture` records it (the first `pending`'s own, when it was known); the positions
    read)."""
    started = time.perf_counter()
    if pending is None:  # the newest token goes through in the same pass
        read = [record[-1]] + draft
        rows = source.forward(read, len(record) - 1, capture, all_logits=True)
    else:
        read = draft
        rows = torch.cat([pending.logits[None], source.forward(draft, len(record), capture, all_logits=True)])
    forward_ms = (time.perf_counter() - started) * 1000
    known = [] if pending is None else [pending.attention]  # the row computed before this pass
    attention = known + ([capture.row(r) for r in range(len(read))] if capture else [None] * len(read))
    return [PendingStep(row, attention[i], forward_ms if i == 0 else 0.0) for i, row in enumerate(rows)], len(read)


def keeps(draft: list[int], i: int, token_id: int) -> bool:
    """Whether the i-th draw (0-based) of a verify pass keeps the draft: it took the draft's i-th token (the
    draw after the whole draft has no draft token to agree with)."""
    return i < len(draft) and token_id == draft[i]


def draft_token(tokenizer, token_id: int) -> Token:
    """A drafted token as the verify event shows it: its piece (a draft is not decoded in a stream)."""
    piece = tokenizer.piece_text(token_id)
    return Token(token_id, piece, piece, tokenizer.is_special(token_id))
