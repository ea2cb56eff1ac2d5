"""A logits source on a remote inference server (llama.cpp, vLLM, SGLang): ONE token per request.

Each forward sends the whole context as token ids and asks for the next token's top-N log-probabilities
(dialects.py); the server's prefix cache makes it a one-token decode. The logits handed to the session
are those N raw log-probabilities with -inf for every other token, and a `ServerNote` says what the
server did not send: the tail, 1 - sum(p) over V - N tokens, shown as one bar and never hidden. TokenStep
samples itself over the N. When the tail could matter for the draw (after temperature it could outweigh
the smallest listed token, and neither top-k, top-p nor min-p closes within the N), `widen` asks again
with a larger N (llama.cpp has no cap; vLLM stops at its `--max-logprobs`).

The cache is the server's: its size is not known here (kv bytes 0; vLLM reports a usage fraction). Views
that need the weights in this process (attention, logit lens) are off: asking for them (`capture`,
`residuals`, `head_logits`) raises RemoteUnsupported with the reason.
"""

from __future__ import annotations

import math
import weakref

import torch

from inference.events import ServerNote
from inference.messages import say
from inference.settings import SamplerSettings
from inference.sources import KeepsNoKv
from inference.sources.dialects import Dialect, TopReply
from inference.sources.http import RemoteUnsupported, ServerError

TOP_N = 20  # asked per step (vLLM's default --max-logprobs)
MAX_TOP_N = 1280  # the most a widened request asks for: a bigger reply costs more than the step


class RemoteSource(KeepsNoKv):
    remote = True

    def __init__(self, dialect: Dialect, vocab: int, top_n: int = TOP_N):
        self.dialect, self.vocab, self.top_n = dialect, vocab, top_n
        self.tokens: list[int] = []  # the context the server holds (its prefix cache) as far as we know
        self.forward_count = 0
        self._notes: dict[int, tuple[weakref.ref, ServerNote]] = {}  # id(logits) -> note

    def start(self, capacity: int) -> None:
        self.tokens = []

    def forward(self, ids: list[int], start: int, capture=None, all_logits: bool = False,
                residuals=None) -> torch.Tensor:
        if capture is not None:
            raise RemoteUnsupported(say("remote.needs_weights", what=say("remote.attention_capture"),
                                        then=say("remote.turn_view_off")))
        if residuals is not None:
            raise RemoteUnsupported(say("remote.needs_weights", what=say("remote.lens"), then=say("remote.turn_off")))
        context = self.tokens[:start] + list(ids)
        if all_logits:  # a verify pass: one request per position (correct, not faster)
            rows = [self.next_logits(context[:start + i + 1]) for i in range(len(ids))]
            self.tokens = context
            return torch.stack(rows)
        logits = self.next_logits(context)
        self.tokens = context  # only once the server has read it
        return logits

    def next_logits(self, context: list[int], n: int | None = None) -> torch.Tensor:
        """The next token's logits after `context`: the server's top-`n` log-probabilities, -inf elsewhere."""
        reply = self.dialect.top(context, n or self.top_n)
        self.forward_count += 1
        return self._logits(reply)

    def _logits(self, reply: TopReply) -> torch.Tensor:
        # The reply's ids are whole, distinct and non-negative (dialects.ranked); the vocabulary is known here.
        past = [i for i in reply.ids if i >= self.vocab]
        if past:
            raise ServerError(say("remote.outside_vocab", server=self.dialect.server, id=past[0], vocab=self.vocab))
        logits = torch.full((self.vocab,), -math.inf, dtype=torch.float64)
        logits[torch.tensor(reply.ids)] = torch.tensor(reply.logprobs, dtype=torch.float64)
        listed = float(torch.exp(logits[torch.tensor(reply.ids)]).sum())
        note = ServerNote(n_top=len(reply.ids), tail_p=min(1.0, max(0.0, 1.0 - listed)),
                          tail_count=self.vocab - len(reply.ids), cached_tokens=reply.cached,
                          server_ms=reply.server_ms, kv_usage=self.dialect.kv_usage())
        self._notes[id(logits)] = (weakref.ref(logits), note)
        weakref.finalize(logits, self._notes.pop, id(logits), None)
        return logits

    def note_of(self, logits: torch.Tensor) -> ServerNote | None:
        """What the server said with these very logits (None for logits it did not produce)."""
        held = self._notes.get(id(logits))
        return held[1] if held is not None and held[0]() is logits else None

    def widen(self, logits: torch.Tensor, sampler: SamplerSettings, context: list[int]) -> torch.Tensor:
        """`logits`, or the same step asked again with a larger N while its tail could matter to a draw
        under `sampler`. `context` is the one those logits followed."""
        note = self.note_of(logits)
        if note is None:
            return logits
        cap = min(MAX_TOP_N, self.vocab, self.dialect.max_top or MAX_TOP_N)
        while note.n_top < cap and tail_matters(logits, note, sampler):
            logits = self.next_logits(context, min(cap, note.n_top * 4))
            wider = self.note_of(logits)
            if wider.n_top <= note.n_top:  # the server gave no more (vLLM's cap): keep what we have
                break
            note = wider
        # The next steps ask for as many at once while these settings need them (one request a step).
        narrow = sampler.is_greedy or 0 < sampler.top_k <= TOP_N
        self.top_n = TOP_N if narrow else max(self.top_n, note.n_top)
        return logits

    def head_logits(self, rows: torch.Tensor) -> torch.Tensor:
        raise RemoteUnsupported(say("remote.needs_weights", what=say("remote.lens"), then=""))

    def crop(self, n_positions: int) -> None:
        del self.tokens[n_positions:]


def tail_matters(logits: torch.Tensor, note: ServerNote, s: SamplerSettings) -> bool:
    """Could a token the server did not list be drawn, and weigh as much as a listed one?

    Every unlisted token has p <= p_min (the smallest listed). Greedy, or top-k within the N: never. After
    temperature T the tail's mass is at most tail * p_min^(1/T - 1) (T <= 1) or count^(1 - 1/T) * tail^(1/T)
    (T > 1, spread evenly); with that bound, top-p reached within the N, or min-p cutting p_min, keep the
    tail out too. Otherwise it matters when the bound outweighs the smallest listed token."""
    if s.is_greedy or note.tail_p <= 0.0 or note.tail_count == 0:
        return False
    if 0 < s.top_k <= note.n_top:
        return False
    listed = logits[torch.isfinite(logits)].sort(descending=True).values
    a = 1.0 / s.temperature
    tempered = torch.exp(a * (listed - listed[0]))  # relative to the top token's
    p_min = math.exp(float(listed[-1]))
    scale = math.exp(-a * float(listed[0]))  # the same relative scale for the bound
    if a >= 1.0:
        bound = note.tail_p * p_min ** (a - 1.0) * scale
    else:
        bound = note.tail_count ** (1.0 - a) * note.tail_p ** a * scale
    total = float(tempered.sum()) + bound
    if s.top_p < 1.0 and float(tempered.sum()) / total >= s.top_p:
        return False
    if s.min_p > 0.0 and float(tempered[-1]) < s.min_p:  # tempered[0] is 1: min_p * max
        return False
    return bound > float(tempered[-1])
