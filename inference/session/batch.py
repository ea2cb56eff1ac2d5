"""Many requests at once: continuous batching over a paged KV cache, one forward pass per scheduler step.

Each request is driven by its own `Session` (session.py), so its draws, stop rules and step events are a solo
session's (its u of step k is f(seed, k), whatever runs beside it). What changes is where its logits come from:
a `PagedSource`, whose passes are rows of the scheduler's batched pass (batch_forward.py) and whose cache is
its block table in the shared pool (paged_cache.py).

A scheduler step:
1. admits arrived requests first come, first served while the batch has room (`max_running`) and the pool
   can promise each its worst case (prompt + max new tokens, less the shared prefix blocks it takes), so no
   running request ever runs out of blocks (no preemption needed); the first that does not fit waits, with
   the reason, and the ones behind it wait for it;
2. plans the pass within `token_budget` rows: every decoding request's newest token first, then prompt
   chunks (chunked prefill) in arrival order with what is left;
3. runs the pass (blocks allocated as positions need them), publishes newly completed full prompt blocks
   for sharing, and lets every request whose logits are ready take its step (its Session draws and reports);
   a request that stopped gives its blocks back.

Timing: the passes run outside the sessions' `forward` calls, so each PagedSource hands its session the wall
time of every pass it had rows in (`take_outside_ms`): a request's prefill time is the passes that read its
prompt chunks, a step's forward time the pass that read its previous token, and its decode time those passes
plus its own draws; the whole pass, not a share of it, since that is how long the request waited for its rows.
Each finished request also gets a `RequestDone`: time to first token and per output token, from its arrival.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from inference.events import BlocksReport, RequestDone, ScheduleDone, StepDone, Stopped
from inference.messages import say
from inference.session.batch_forward import Chunk, forward_chunks
from inference.session.context_limit import ContextWindow
from inference.session.paged_cache import BLOCK_TOKENS, BlockPool, PagedView, blocks_for, prefix_hashes
from inference.session.session import Session
from inference.settings import GenerationSettings
from inference.sources import LogitsSource
from inference.store.loading import LoadedModel

MAX_RUNNING = 16  # requests decoded together at most
TOKEN_BUDGET = 256  # rows per pass: decode rows first, prompt chunks share the rest


@dataclass(frozen=True)
class BatchRequest:
    """What a request asks: its prompt ids, its settings (seed included) and the scheduler step it arrives at."""

    prompt: list[int]
    settings: GenerationSettings = GenerationSettings()
    arrive_at_step: int = 0


def worst_case_positions(asked: BatchRequest, context_window: int) -> int:
    """Positions a request's blocks may have to hold: every position it can read (the last token drawn is never
    read), within its context window."""
    positions = min(len(asked.prompt) + asked.settings.max_new_tokens - 1, context_window)
    return max(positions, len(asked.prompt))


def blocks_for_all(model: LoadedModel, requests: list[BatchRequest], block_tokens: int = BLOCK_TOKENS) -> int:
    """A pool in which every request fits at its worst case at once, sharing nothing: no request ever waits
    for blocks (what `trace` gives a batch unless told a pool size)."""
    window = ContextWindow(model.config.context_length)
    return max(1, sum(blocks_for(worst_case_positions(r, window.size(r.settings)), block_tokens) for r in requests))


class PagedSource(LogitsSource):
    """A request's logits source: its cache is a block table in the pool, its passes are rows of the batched
    pass. The session asks for a pass after the scheduler ran it (the prompt, read in chunks before the session's
    prefill) or before (the token it just drew): then the source owes that row, and returns the logits tensor
    the next batched pass fills in place (NaN until then, so nothing can draw from it unnoticed)."""

    def __init__(self, pool: BlockPool, vocab: int):
        self.pool, self.vocab = pool, vocab
        self.table: list[int] = []  # the request's blocks, in position order
        self.n_cached = 0  # positions whose K/V are in the blocks
        self.last_logits: torch.Tensor | None = None  # (V,) of the newest position read
        self.owed: tuple[list[int], int, torch.Tensor] | None = None  # (ids, start, logits to fill)
        self.outside_ms = 0.0  # passes its rows were in, not yet counted by its session

    def start(self, capacity: int) -> None:
        """The scheduler reads the prompt into the blocks before the session's prefill: nothing to forget."""

    def forward(self, ids: list[int], start: int, capture=None, all_logits: bool = False,
                residuals=None) -> torch.Tensor:
        if capture is not None or all_logits or residuals is not None:
            raise ValueError("a batched request records no attention, lens or every row's logits")
        end = start + len(ids)
        if end <= self.n_cached:  # the prompt, already read by the scheduler's passes (of a prompt the session
            return self.last_logits  # reads in several chunks, only the last chunk's logits are used)
        if self.owed is not None or start != self.n_cached:
            raise RuntimeError(f"a request asked for positions {start}..{end - 1} with {self.n_cached} read")
        logits = torch.full((self.vocab,), float("nan"))
        self.owed = (list(ids), start, logits)
        return logits

    def chunk(self, budget: int, prompt: list[int]) -> Chunk | None:
        """The rows this request wants in the next pass: its owed token (a session feeds one at a time), or the
        next piece of its prompt, at most `budget` (>= 1) rows; None when it wants none."""
        if self.owed is not None:
            ids, start, _ = self.owed
        elif self.n_cached < len(prompt):
            ids, start = prompt[self.n_cached:self.n_cached + budget], self.n_cached
        else:
            return None
        return Chunk(ids, start, PagedView(self.pool, self.table))

    def grow(self, n_positions: int) -> None:
        """Blocks enough for `n_positions` positions."""
        while len(self.table) < self.pool.blocks_for(n_positions):
            self.table.append(self.pool.allocate())

    def read(self, chunk: Chunk, logits: torch.Tensor, pass_ms: float) -> None:
        """The pass read `chunk` in `pass_ms`: its K/V are in the blocks, `logits` (V,) follow its last row."""
        self.outside_ms += pass_ms
        self.n_cached = chunk.end
        self.last_logits = logits
        if self.owed is not None and self.owed[1] + len(self.owed[0]) == chunk.end:
            self.owed[2].copy_(logits)
            self.owed = None

    def crop(self, n_positions: int) -> None:
        raise NotImplementedError("a batched request does not rewind")

    def take_outside_ms(self) -> float:
        taken, self.outside_ms = self.outside_ms, 0.0
        return taken

    @property
    def kv_bytes_per_token(self) -> int:
        return self.pool.bytes_per_token

    @property
    def kv_used_bytes(self) -> int:
        """The positions read, as a solo cache counts them (its blocks hold up to a block more)."""
        return self.n_cached * self.pool.bytes_per_token

    @property
    def kv_allocated_bytes(self) -> int:
        return len(self.table) * self.pool.block_bytes


class Request:
    """One request's state, which the scheduler moves from waiting to running to finished."""

    def __init__(self, index: int, asked: BatchRequest, session: Session, source: PagedSource, hashes: list[bytes]):
        self.index, self.asked, self.session, self.source = index, asked, session, source
        self.hashes = hashes  # the chain hash of each full block of its prompt (paged_cache.prefix_hashes)
        self.state = "waiting"  # "waiting", "running" or "finished"
        self.waiting_for = "not arrived yet"  # why it is not running (while waiting)
        self.admitted_at = -1  # the scheduler step it started running at
        self.n_shared = 0  # leading blocks it took from the prefix table
        # wall clock (perf_counter seconds) of its arrival, admission, first and newest token, finish
        self.arrived_t = self.admitted_t = self.first_token_t = self.last_token_t = None

    @property
    def prompt(self) -> list[int]:
        return self.asked.prompt

    def worst_case_blocks(self, pool: BlockPool) -> int:
        """Blocks its table may reach."""
        return pool.blocks_for(worst_case_positions(self.asked, self.session.context_window))

    def shareable_blocks(self, pool: BlockPool) -> int:
        """Full prompt blocks it may take from others: all but the one holding its last prompt token, which it
        reads itself for the logits of its first step."""
        return min(len(self.hashes), (len(self.prompt) - 1) // pool.block_tokens)

    def blocks_still_needed(self, pool: BlockPool) -> int:
        return self.worst_case_blocks(pool) - len(self.source.table)

    def ready(self) -> bool:
        """Its logits are computed for everything it has read: it may take a step."""
        return self.source.owed is None and self.source.n_cached >= len(self.prompt)


class Scheduler:
    """Continuous batching: the requests, the pool they share and the step loop (see the module's docstring)."""

    def __init__(self, model: LoadedModel, requests: list[BatchRequest], n_blocks: int,
                 block_tokens: int = BLOCK_TOKENS, token_budget: int = TOKEN_BUDGET, max_running: int = MAX_RUNNING):
        if token_budget < 1 or not 1 <= max_running <= MAX_RUNNING:
            raise ValueError(say("batch.budget", high=MAX_RUNNING, budget=token_budget, running=max_running))
        c, decoder = model.config, model.decoder
        self.model, self.token_budget, self.max_running = model, token_budget, max_running
        self.pool = BlockPool(c.n_layers, c.n_kv_heads, c.head_dim, n_blocks, decoder.kv_dtype, decoder.device,
                              block_tokens)
        self.requests = [self._request(index, asked) for index, asked in enumerate(requests)]
        self.step_index = 0  # the scheduler step about to run

    def _request(self, index: int, asked: BatchRequest) -> Request:
        settings = asked.settings.validate()
        if settings.speculate or settings.when_full != "stop":
            raise ValueError(say("batch.plain", request=index))
        source = PagedSource(self.pool, self.model.config.vocab)
        request = Request(index, asked, Session(self.model, settings, source=source), source,
                          prefix_hashes(asked.prompt, self.pool.block_tokens))
        if not asked.prompt or len(asked.prompt) > request.session.context_window:
            raise ValueError(say("batch.prompt", request=index, window=request.session.context_window))
        if not all(0 <= i < self.model.config.vocab for i in asked.prompt):
            raise ValueError(say("batch.vocab", request=index, vocab=self.model.config.vocab))
        if request.worst_case_blocks(self.pool) > self.pool.n_blocks:
            raise ValueError(say("batch.blocks", request=index, needed=request.worst_case_blocks(self.pool),
                                 pool=self.pool.n_blocks))
        return request

    @property
    def done(self) -> bool:
        return all(r.state == "finished" for r in self.requests)

    def add(self, asked: BatchRequest) -> int:
        """One more request (continuous batching: a request joins between steps); it arrives at
        `asked.arrive_at_step` or, when that is past, at the next step. Its index."""
        asked = replace(asked, arrive_at_step=max(asked.arrive_at_step, self.step_index))
        self.requests.append(self._request(len(self.requests), asked))
        return len(self.requests) - 1

    def running(self) -> list[Request]:
        """The running requests in the order they were admitted."""
        return sorted((r for r in self.requests if r.state == "running"), key=lambda r: (r.admitted_at, r.index))

    def run(self):
        """Step until every request has finished: every step's events."""
        while not self.done:
            yield from self.step()

    def step(self) -> list:
        """One scheduler step: admit, one pass, the steps it made ready. Its events: the schedule, each
        request's PrefillDone / StepDone / Stopped (with `request`) and a finished one's RequestDone, the blocks."""
        now = time.perf_counter()
        for request in self.requests:
            if request.arrived_t is None and request.asked.arrive_at_step <= self.step_index:
                request.arrived_t = now
        self._admit()
        running = self.running()
        plan = self._plan(running)
        forward_ms = self._pass(plan) if plan else 0.0
        events: list = [ScheduleDone(
            step=self.step_index, requests=tuple(r.index for r, _ in plan),
            prefill_chunks={r.index: len(chunk.ids) for r, chunk in plan if chunk.start < len(r.prompt)},
            tokens_in_pass=sum(len(chunk.ids) for _, chunk in plan), forward_ms=forward_ms,
            waiting={r.index: r.waiting_for for r in self.requests if r.state == "waiting"})]
        for request in running:
            if request.ready():
                events += self._take_step(request)
        events.append(self.blocks_report())
        self.step_index += 1
        return events

    def _pass(self, plan: list[tuple[Request, Chunk]]) -> float:
        """Run the planned rows as one forward pass; its wall time in ms, which every request in it is charged."""
        started = time.perf_counter()
        for request, chunk in plan:
            request.source.grow(chunk.end)
        with torch.inference_mode():
            logits = forward_chunks(self.model.decoder, [chunk for _, chunk in plan]).to("cpu")  # (n, V)
        forward_ms = (time.perf_counter() - started) * 1000
        for (request, chunk), row in zip(plan, logits):
            request.source.read(chunk, row, forward_ms)
            self._publish(request)
        return forward_ms

    def _admit(self) -> None:
        """Arrived requests join, first come first served, while the batch and the pool's promises allow."""
        pool = self.pool
        running = self.running()
        promised = sum(r.blocks_still_needed(pool) for r in running)
        blocked_by = None
        for request in sorted((r for r in self.requests if r.state == "waiting"),
                              key=lambda r: (r.asked.arrive_at_step, r.index)):
            if request.asked.arrive_at_step > self.step_index:
                request.waiting_for = f"arrives at step {request.asked.arrive_at_step}"
            elif blocked_by is not None:
                request.waiting_for = f"behind request {blocked_by.index}, which waits first"
            elif len(running) >= self.max_running:
                request.waiting_for, blocked_by = f"the batch is full ({self.max_running} requests running)", request
            else:
                shared = pool.cached_prefix(request.hashes[:request.shareable_blocks(pool)])
                needed = request.worst_case_blocks(pool) - len(shared)
                if pool.n_free - promised < needed:
                    request.waiting_for = (f"the pool is full: {pool.n_free - promised} blocks free and not promised "
                                           f"to running requests, {needed} needed")
                    blocked_by = request
                    continue
                pool.share(shared)
                request.source.table.extend(shared)
                request.n_shared, request.source.n_cached = len(shared), len(shared) * pool.block_tokens
                request.state, request.waiting_for, request.admitted_at = "running", "", self.step_index
                request.admitted_t = time.perf_counter()
                running.append(request)
                promised += needed

    def _plan(self, running: list[Request]) -> list[tuple[Request, Chunk]]:
        """The pass's rows within the token budget: decode rows first, then prompt chunks."""
        decoding = [r for r in running if r.source.owed is not None]
        reading = [r for r in running if r.source.owed is None and r.source.n_cached < len(r.prompt)]
        plan, budget = [], self.token_budget
        for request in decoding + reading:
            chunk = request.source.chunk(budget, request.prompt) if budget else None
            if chunk is not None:
                plan.append((request, chunk))
                budget -= len(chunk.ids)
        return plan

    def _publish(self, request: Request) -> None:
        """The request's full prompt blocks read so far may be taken by later prompts that begin the same."""
        read = min(len(request.hashes), request.source.n_cached // self.pool.block_tokens)
        for i in range(request.n_shared, read):
            self.pool.publish(request.hashes[i], request.source.table[i])

    def _take_step(self, request: Request) -> list:
        """The request's session reads the prompt (first time) or draws its next token; a stop ends it."""
        session, events = request.session, []
        if not session.prefilled:
            events.append(replace(session.prefill(request.prompt), request=request.index))
        if session.stopped is None:
            for event in session.step():
                if isinstance(event, StepDone):
                    request.last_token_t = time.perf_counter()
                    request.first_token_t = request.first_token_t or request.last_token_t
                events.append(replace(event, request=request.index))
        if session.stopped is not None:
            if not isinstance(events[-1], Stopped):  # the prompt filled the context window alone
                events.append(replace(session.stopped, request=request.index))
            events.append(self._finish(request))
        return events

    def _finish(self, request: Request) -> RequestDone:
        """The request leaves: its blocks go back; its completion record."""
        request.state = "finished"
        self.pool.release(request.source.table)
        request.source.table.clear()
        finished, n = time.perf_counter(), len(request.session.generated)
        since_arrival = lambda t: None if t is None else (t - request.arrived_t) * 1000  # noqa: E731
        return RequestDone(
            request=request.index, reason=request.session.stopped.reason, n_generated=n,
            prompt_tokens=len(request.prompt), shared_tokens=request.n_shared * self.pool.block_tokens,
            arrived_at_step=request.asked.arrive_at_step, admitted_at_step=request.admitted_at,
            finished_at_step=self.step_index, queue_ms=since_arrival(request.admitted_t),
            ttft_ms=since_arrival(request.first_token_t),
            tpot_ms=(request.last_token_t - request.first_token_t) * 1000 / (n - 1) if n > 1 else None,
            total_ms=since_arrival(finished))

    def blocks_report(self) -> BlocksReport:
        pool = self.pool
        return BlocksReport(step=self.step_index, block_tokens=pool.block_tokens, allocated=pool.n_used,
                            shared=pool.n_shared, free=pool.n_free, used_bytes=pool.used_bytes,
                            per_request={r.index: tuple(r.source.table) for r in self.requests if r.state == "running"},
                            positions={r.index: r.source.n_cached for r in self.requests if r.state == "running"})
