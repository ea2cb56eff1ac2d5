"""One generation: prompt -> prefill -> one token per step -> a stop. The ONE owner of generation state.

The CLI drives it directly; the GUI drives it through the engine process (engine.py). It keeps the logits
of the step about to be drawn ("pending"). A step draws from them, reports the draw, checks the stop
rules and, unless generation ended, feeds the new token through the model to get the next pending
logits: every distribution is computed on the prefix that includes every token drawn so far. Sampling
settings may change between steps (they apply to the next draw). The draw of step k reads a uniform u that
is a function of (seed, k) alone; a changed seed takes effect at the next `reset()` or `rewind()`, so the
same seed and settings reproduce the same tokens. Every token taken is a node of a branch tree
(branches.py): rewind, take another token, switch back, and nothing is lost. `run()` is the one run loop
of the code base.

Logits come from a `LogitsSource` (sources/): the model's own decoder in this process by default.

The session owns its parts and hands them the state they need; none of them holds the session:
- `tree` (branches.py): the branch tree; `kept` (pending.py): the pending step kept after each node;
- `window` (context_limit.py): the context window in force and its shifts (drop-oldest);
- `recorder` (recorder.py): what a pass records besides the logits (attention rows, the lens's residual
  rows), and attention recomputed for any node;
- speculate.py: the draft and the verify pass that reads it.
The session itself holds the current node, its tokens and text, its pending step (`pending`: logits and
what their pass recorded, residual rows included), the stop, and the cache through its source; its moves
(step, force, rewind, reset, switch) change them together.
"""

from __future__ import annotations

from inference.messages import Message, say

import sys
import threading
import time
from dataclasses import replace
from typing import Callable, Iterator, NamedTuple

import torch

from inference.attention import AttentionOf
from inference.errors import Cancelled, NotReady
from inference.events import (Pending, PrefillDone, Rewound, SessionStatus, StepDone, Stopped, Switched, Token,
                              Verified)
from inference.model.capture import PromptCapture
from inference.session.branches import BranchTree
from inference.session.context_limit import KEEP_FIRST, ContextWindow
from inference.session.draft_length import DraftLength
from inference.session.pending import KeptSteps, PendingStep
from inference.session.recorder import Recorder
from inference.session.report import chosen_rank, summarise
from inference.session.sampling import Distribution, distribution, draw, draw_seed
from inference.session.server_tail import server_distribution
from inference.session.speculate import draft_token, keeps, prompt_lookup, read_draft
from inference.settings import PREFILL_CHUNK, GenerationSettings, SamplerSettings
from inference.sources import LogitsSource
from inference.sources.nocache import NoCacheDecoder, fresh_source
from inference.store.loading import LoadedModel
from inference.text.stops import match_stop_strings
from inference.text.tokenizer import ChatMessage


class Drawn(NamedTuple):
    """A pending step's draw made ahead (a verify pass's first draw is known before the pass): what `_draw` takes."""

    dist: Distribution
    token_id: int
    u: float | None
    ms: float  # the distribution's and the draw's time (the step's sample_ms)


class GenerationEnded(NotReady):
    """Raised by `step()` after EOS, a stop string or a full context window: reset to go on."""


def prompt_ids(model: LoadedModel, prompt: str, chat: bool = False, system: str | None = None) -> tuple[list[int], str]:
    """(ids, text actually encoded). Chat mode renders the model's template with a generation prompt."""
    tok = model.tokenizer
    if not chat:
        return tok.encode(prompt), prompt
    messages = ([ChatMessage("system", system)] if system else []) + [ChatMessage("user", prompt)]
    text = tok.render_chat(messages, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False), text


class Session:
    def __init__(self, model: LoadedModel, settings: GenerationSettings = GenerationSettings(),
                 capture_attention: bool = False, source: LogitsSource | None = None, capture_lens: bool = False):
        self.model = model
        if source is None:  # a remote model (store/remote_model.py) brings its own
            source = model.logits_source()
        self.source = source
        self.settings = settings.validate()
        self.recorder = Recorder(model.config, capture_attention, capture_lens)
        self.window = ContextWindow(model.config.context_length)
        self.running = False  # inside run()
        self._abort = threading.Event()
        self._pause = threading.Event()
        self.prompt: list[int] = []
        self.prompt_text = ""
        self._prefill_ms = 0.0
        self._decode_seconds = 0.0
        self.tree = BranchTree()
        self._run_made_from = sys.maxsize  # the first node the last run made (retract drops only those)
        self.kept = KeptSteps()
        self.drafts = DraftLength()  # with settings.speculate: how many tokens each verify pass drafts
        self._go_to(0)

    # --- state ----------------------------------------------------------------------------------------
    def _go_to(self, node: int, pending: PendingStep | None = None) -> None:
        """Make `node` current: its tokens are the generated ones, `pending` the next step (None: computed
        when needed). The cache must already hold the prompt and the tokens before the last."""
        self.node = node
        self.generated: list[int] = self.tree.tokens(node)
        self.drafts.lost_track()
        self.seed_used = self.settings.seed
        self.pending = pending
        self._stream = self.model.tokenizer.stream()
        for token_id in self.prompt:
            self._stream.push(token_id)
        self.text, self.stopped = "", None
        eos_ids = self.model.config.eos_ids
        for token_id in self.generated:
            token = self._token(self._stream, token_id)
            if token_id not in eos_ids:
                self.text += token.text
        if self.prefilled and (self.generated or len(self.prompt) >= self.context_window):
            reason, matched = self._stop_reason(self.generated[-1] if self.generated else None)
            if reason is not None:
                self._stop(reason, matched)

    @property
    def prefilled(self) -> bool:
        return self.kept.get(0) is not None

    @property
    def n_context(self) -> int:
        return len(self.prompt) + len(self.generated)

    @property
    def forward_count(self) -> int:
        return self.source.forward_count

    @property
    def pending_logits(self) -> torch.Tensor | None:
        """The logits the next step will draw from (None until the pending forward pass has run)."""
        return self.pending.logits if self.pending is not None else None

    @property
    def capture_attention(self) -> bool:
        return self.recorder.attention

    @capture_attention.setter
    def capture_attention(self, on: bool) -> None:
        self.recorder.attention = on

    @property
    def capture_lens(self) -> bool:
        return self.recorder.lens

    # --- the context window (context_limit.py) ----------------------------------------------------------
    @property
    def context_window(self) -> int:
        """Positions this generation may use: the context limit, at most the model's window."""
        return self.window.size(self.settings)

    @property
    def shifts(self):
        """The context shifts since the prompt was read (or the last reset), in order."""
        return self.window.shifts

    @property
    def dropped(self) -> int:
        """Tokens after the first that a context shift took out of the model's context."""
        return self.window.dropped

    @property
    def n_window(self) -> int:
        """Tokens in the model's context now (n_context less the dropped ones)."""
        return self.n_context - self.window.dropped

    def window_ids(self) -> list[int]:
        """The token ids the model's context holds, in position order."""
        return self.window.ids(self.prompt + self.generated)

    def _context_full(self) -> bool:
        return self.window.must_stop(self.n_window, self.settings, bool(self.generated))

    # --- status and settings ----------------------------------------------------------------------------
    def blocked(self) -> Message | None:
        """Why a step would be refused now, or None when it would be taken (the rule `step()` enforces)."""
        if not self.prefilled:
            return say("session.prefill_before_step")
        reason = self.stopped.reason if self.stopped is not None else None
        if reason in ("eos", "stop_string") or reason == "context_full" and self._context_full():  # still full
            return say("session.ended", reason=reason)
        if reason == "max_new_tokens" and len(self.generated) >= self.settings.max_new_tokens:
            return say("session.max_new_tokens")
        return None

    @property
    def kv_cache(self) -> bool:
        return not isinstance(self.source, NoCacheDecoder)

    def use_kv_cache(self, on: bool) -> None:
        """Decode with the KV cache, or without (each pass re-reads the whole prefix: the same logits, at a
        cost that grows with the context). Switching on re-reads the context in one pass."""
        self._check_idle()
        if on != self.kv_cache:
            held = self.n_window - (1 if self.pending is None and self.generated else 0) if self.prefilled else 0
            self.source = fresh_source(self.model.decoder, on, self.window_ids()[:held],
                                       len(self.prompt) + self.settings.max_new_tokens)

    def set_capture_lens(self, on: bool) -> bool:
        """Capture the lens from the next forward pass on (off: no cost at all). Turned on while the pending
        step has none, it gets one at once (`_lens_of_pending`). Returns whether that pass ran."""
        self.recorder.lens = on
        return on and not self.running and self._lens_of_pending()

    def _lens_of_pending(self) -> bool:
        """While the lens is captured, a pending step whose pass ran without it (before the view opened; a
        rewind, a Reset or a switch back to such a step) gets its lens: its position is read again, one
        forward pass of one token, the cache cropped by one first. After a context shift the pending position
        is not the record's, and the lens shows from the next step. Returns whether that pass ran."""
        step = self.pending
        if not self.recorder.lens or self.window.shifts or step is None or step.residuals is not None:
            return False
        n = self.n_context
        self.source.crop(n - 1)
        residuals = self.recorder.residuals(self.source, (self.prompt + self.generated)[-1], n - 1)
        self.pending = replace(step, residuals=residuals)
        self.kept.update(self.node, self.pending)
        return True

    def status(self) -> SessionStatus:
        return SessionStatus(prefilled=self.prefilled, running=self.running, blocked=self.blocked(),
                             n_generated=len(self.generated), settings=self.settings)

    def update_settings(self, settings: GenerationSettings) -> None:
        """New settings apply to the next draw; a new seed applies from the next reset or rewind."""
        self.settings = settings.validate()

    def abort(self) -> None:
        """End a running `run()` (or a chunked prefill) before its next step, as aborted (thread-safe)."""
        self._abort.set()

    def pause(self) -> None:
        """End a running `run()` before its next step; the generation can go on (thread-safe)."""
        self._pause.set()

    # --- prefill --------------------------------------------------------------------------------------
    def prefill(self, ids: list[int], prompt_text: str = "", progress=None) -> PrefillDone:
        """Read the whole prompt in parallel: K/V for every position, logits for the last. A new prompt
        starts a new branch tree.

        Prompts longer than PREFILL_CHUNK go through in chunks of that many positions, so a long prompt
        reports progress (`progress("prefill", done, total)`) and `abort()` can cancel it in between.
        """
        self._check_prompt(ids)
        self.source.start(len(ids) + self.settings.max_new_tokens)
        self.prompt, self.prompt_text, self.window.shifts = [], "", ()
        self.tree, self.kept = BranchTree(), KeptSteps(self.kept.budget)
        self.drafts.begin()
        self._run_made_from = sys.maxsize
        self._abort.clear()
        started = time.perf_counter()
        capture = self.recorder.prompt_capture(len(ids))
        try:
            step = self._read(ids, 0, progress, capture)
        except Cancelled:
            self._go_to(0)  # nothing prefilled
            raise
        self._prefill_ms = (time.perf_counter() - started) * 1000 + self.source.take_outside_ms()
        self.prompt, self.prompt_text = list(ids), prompt_text
        self._decode_seconds = 0.0
        step = replace(step, forward_ms=self._prefill_ms)
        self.kept.put(0, step)
        self._go_to(0, step)
        stream = self.model.tokenizer.stream()
        tokens = tuple(self._token(stream, i) for i in ids)
        return PrefillDone(tokens=tokens, n_tokens=len(ids), ms=self._prefill_ms,
                           kv_used_bytes=self.source.kv_used_bytes,
                           kv_allocated_bytes=self.source.kv_allocated_bytes,
                           prompt_text=prompt_text, pending=self.preview().dist, attention=step.attention,
                           prompt_attention=capture.prompt() if capture else None)

    def _read(self, ids: list[int], start: int, progress=None, capture=None, abortable: bool = True) -> PendingStep:
        """Read `ids` at positions start.. in parallel (chunks of PREFILL_CHUNK): the pending step after the
        last, with what the recorder records of the last chunk; `capture` (a PromptCapture) records every
        chunk. An `abort()` stops an `abortable` read between chunks (Cancelled)."""
        if capture is None:
            capture = self.recorder.row_capture()
        started = time.perf_counter()
        for at in range(0, len(ids), PREFILL_CHUNK):
            if abortable and self._abort.is_set():
                self._abort.clear()
                raise Cancelled("prefill cancelled")
            last = at + PREFILL_CHUNK >= len(ids)
            logits, residuals = self.recorder.forward(
                self.source, ids[at:at + PREFILL_CHUNK], start + at,
                capture if last or isinstance(capture, PromptCapture) else None, lens=last)
            if progress:
                progress("prefill", min(at + PREFILL_CHUNK, len(ids)), len(ids))
        return PendingStep(logits, capture.array() if capture else None, (time.perf_counter() - started) * 1000,
                           residuals)

    def _check_prompt(self, ids: list[int]) -> None:
        if not ids:
            raise ValueError(say("prompt.empty"))
        if len(ids) > self.context_window:
            raise ValueError(self.window.too_long(len(ids), self.settings))
        self._check_ids(ids)

    def _check_ids(self, ids: list[int]) -> None:
        bad = [i for i in ids if not 0 <= i < self.model.config.vocab]
        if bad:
            raise ValueError(say("token.outside_vocab", id=int(bad[0]), vocab=self.model.config.vocab))

    # --- one step -------------------------------------------------------------------------------------
    def preview(self, sampler: SamplerSettings | None = None) -> Pending:
        """The pending step's distribution under `sampler` (default: current settings). No forward pass."""
        if self.pending is None:
            self._feed_last()
        sampler = (sampler or self.settings.sampler).validate()
        self._widen(sampler)
        dist = self._distribution(self.pending.logits, sampler)
        return Pending(len(self.generated) + 1, self._summarise(self.pending, dist, sampler, None),
                       self.pending.attention)

    def step(self) -> Iterator[StepDone | Stopped]:
        """Draw one token: yields its StepDone (and a Stopped when generation ends), then feeds it on."""
        self._resume()
        yield from self._next()

    def force(self, token: int | str) -> Iterator[StepDone | Stopped]:
        """Take `token` (an id, or a text: its tokens one step each) instead of drawing. Each step's
        distribution is still computed and reported; its event is marked forced."""
        if isinstance(token, str):
            ids = self.model.tokenizer.encode(token, add_special_tokens=False)
            if not ids:
                raise ValueError(say("force.empty"))
        else:
            ids = [int(token)]
        self._check_ids(ids)
        self._resume()
        for token_id in ids:
            if self.stopped is not None:
                return
            yield from self._take(token_id)

    def _take(self, forced: int | None, drawn: Drawn | None = None) -> Iterator[StepDone | Stopped]:
        started = time.perf_counter()
        if self.pending is None:
            self._feed_last()
        self._count_outside()
        event, reason, matched = self._draw(forced, self.source.kv_used_bytes, drawn=drawn)
        if reason is None and self.window.must_shift(self.n_window, self.settings):
            event = self._shift(event)
        self._decode_seconds += time.perf_counter() - started
        yield event
        if reason is not None:
            yield self._stop(reason, matched)
            return
        started = time.perf_counter()
        if event.shift is None:  # a shift re-read the context, the newest token with it
            self._feed_last()
            self.drafts.costs.timed_step(self.pending.forward_ms)
        self._decode_seconds += time.perf_counter() - started

    def _count_outside(self) -> None:
        """The pass that computed the pending logits ran outside the source's `forward` (a batch's scheduler): its
        time is the step's forward time, and decode time."""
        outside = self.source.take_outside_ms()
        if outside:
            self.pending = replace(self.pending, forward_ms=self.pending.forward_ms + outside)
            self.kept.put(self.node, self.pending)
            self._decode_seconds += outside / 1000

    def _drawing(self) -> Drawn:
        """The pending step's draw under the current settings (u = f(seed, step)), its distribution and its ms;
        nothing taken yet (a server's top-N widened first where the draw could need more)."""
        sampler = self.settings.sampler
        self._widen(sampler)
        t = time.perf_counter()
        dist = self._distribution(self.pending.logits, sampler)
        token_id, u = draw(dist, torch.Generator().manual_seed(draw_seed(self.seed_used, len(self.generated) + 1)))
        return Drawn(dist, token_id, u, (time.perf_counter() - t) * 1000)

    def _draw(self, forced: int | None, kv_used: int, verified_by: int = 0,
              drawn: Drawn | None = None) -> tuple[StepDone, str | None, str | None]:
        """Take a token from the pending step (drawn, `drawn` ahead by `_drawing`, or `forced`): the step's event,
        and the stop rule it fires (with the stop string matched)."""
        sampler, index = self.settings.sampler, len(self.generated) + 1
        if forced is None:
            dist, token_id, u, sample_ms = drawn or self._drawing()
        else:
            self._widen(sampler)
            t = time.perf_counter()
            dist, token_id, u = self._distribution(self.pending.logits, sampler), forced, None
            sample_ms = (time.perf_counter() - t) * 1000
        step = self.pending
        summary = self._summarise(step, dist, sampler, token_id)  # texts read before the token joins

        parent, self.node = self.node, self.tree.child(self.node, token_id)
        self.generated.append(token_id)
        self.drafts.saw(self.generated)
        token = self._token(self._stream, token_id)
        if token_id not in self.model.config.eos_ids:
            self.text += token.text
        reason, matched = self._stop_reason(token_id)
        event = StepDone(
            index=index, position=self.n_window - 1, token=token, forward_ms=step.forward_ms,
            sample_ms=sample_ms, kv_used_bytes=kv_used, kv_allocated_bytes=self.source.kv_allocated_bytes,
            context_tokens=self.n_window,
            chosen_rank=chosen_rank(step.logits, token_id, summary.candidates, self.settings.top_n),
            random_u=u, dist=summary, seed=self.seed_used, stop_progress=self._stop_strings()[0],
            attention=step.attention, forced=forced is not None, node=self.node, parent=parent,
            settings=self.settings, verified_by=verified_by)
        self.pending = None
        return event, reason, matched

    def _shift(self, event: StepDone) -> StepDone:
        """The step's token filled the window under drop-oldest: shift the context (context_limit.py), which
        also gives the next pending step; the step's event carries the shift."""
        shift, self.pending = self.window.shift(event.index, self.prompt + self.generated, self.settings,
                                                self.source, lambda ids, start: self._read(ids, start, abortable=False))
        self.kept.put(self.node, self.pending)
        return replace(event, shift=shift)

    def _next(self) -> Iterator[StepDone | Stopped | Verified]:
        """One step, or with `settings.speculate` one verify pass."""
        if self.settings.speculate:
            yield from self._verify()
        else:
            yield from self._take(None)

    def _verify(self) -> Iterator[StepDone | Stopped | Verified]:
        """Draft by prompt lookup, read the draft in ONE forward pass (speculate.py), and take tokens from
        those distributions while the draws agree with the draft."""
        room = min(self.settings.max_new_tokens - len(self.generated),
                   self.model.config.context_length - self.n_context) - 1
        record = self.prompt + self.generated
        n_max = min(self.settings.speculate, room)
        choice = self.drafts.choose(n_max, fed=self.pending is not None)  # how many to draft (draft_length.py)
        if self.drafts.watching:
            draft, ngram = prompt_lookup(record, choice.n)
        else:  # acceptance is measured on drafts of the most it may draft, whether a pass reads them or not
            longest, ngram = prompt_lookup(record, n_max)
            self.drafts.watch(longest, len(self.generated))
            draft, ngram = (longest, ngram) if choice.n >= len(longest) else prompt_lookup(record, choice.n)
        known = self._drawing() if draft and self.pending is not None else None  # after a plain step
        if not draft or (known is not None and known.token_id != draft[0]):
            # No draft, or the known distribution's draw already rejects its first token: a pass would decide
            # no more than this plain step (which feeds its token in one pass, as plain decoding does)
            yield from self._take(None, known)
            return
        started, index, before = time.perf_counter(), len(self.generated) + 1, self.node
        # (lookup may draft fewer than n; the draws below update the estimates: read them first)
        expected_tokens, expected_cost = self.drafts.expect(len(draft), len(draft) + (self.pending is None))
        rows, positions = read_draft(self.source, record, self.pending, draft, self.recorder.rows_capture())
        if positions > len(draft):  # the pass computed the pending step of the node before it
            self.kept.put(before, rows[0])
        events, stop, accepted = [], None, 0
        for i, row in enumerate(rows):
            self.pending = row
            event, reason, matched = self._draw(None, self.n_context * self.source.kv_bytes_per_token, index,
                                                drawn=known if i == 0 else None)  # row 0: the known step's logits
            events.append(event)
            agreed = keeps(draft, i, event.token.id)
            accepted += agreed
            if agreed:
                self.kept.put(self.node, rows[i + 1])
            if reason is not None:
                stop = (reason, matched)
            if stop is not None or not agreed:
                break
        self.source.crop(self.n_context - 1)  # the newest token is read with the next draft
        self.pending = None
        self._decode_seconds += time.perf_counter() - started
        self.drafts.costs.timed_pass(positions, rows[0].forward_ms)
        yield Verified(index=index, drafted=tuple(draft_token(self.model.tokenizer, t) for t in draft), ngram=ngram,
                       accepted=accepted, emitted=len(events), positions=positions, forward_ms=rows[0].forward_ms,
                       draft_max=choice.n_max, acceptance=choice.acceptance, expected_tokens=expected_tokens,
                       expected_cost=expected_cost, step_ms=choice.step_ms)
        yield from events
        if stop is not None:
            yield self._stop(*stop)

    def run(self, max_steps: int = 0, between: Callable[[], None] | None = None) -> Iterator[StepDone | Stopped]:
        """Step until a stop rule fires, `abort()` or `pause()` is called, or `max_steps` were taken
        (0 = no limit). `between` runs before every step: a driver reads its commands there."""
        self._resume()
        self._pause.clear()
        self._run_made_from = self.tree.next_id  # nodes from this id on were made by this run
        self.running = True
        try:
            taken = 0
            while self.stopped is None and (max_steps == 0 or taken < max_steps):
                if between is not None:
                    between()
                if self._abort.is_set():
                    yield self.abort_now()
                    return
                if self._pause.is_set():
                    return
                yield from self._next()
                taken += 1
        finally:
            self.running = False
            self._pause.clear()

    def abort_now(self) -> Stopped:
        """End the generation here, between steps, as aborted by the user."""
        self._abort.clear()
        return self._stop("aborted")

    def generate(self, ids: list[int], prompt_text: str = "") -> Iterator[PrefillDone | StepDone | Stopped]:
        """Prefill then run: the whole event stream of one generation."""
        yield self.prefill(ids, prompt_text)
        if self.stopped is not None:
            yield self.stopped
            return
        yield from self.run()

    # --- moves in the branch tree (branches.py) ----------------------------------------------------------
    def rewind(self, to_step: int) -> Rewound:
        """Back to just before step `to_step`: steps 1..to_step-1 stay, the cache is cropped to the prompt
        plus them, and step to_step's distribution is pending again (kept: no forward pass). The branch
        left stays in the tree. The seed in force becomes `settings.seed`."""
        self.window.refuse_shifted()
        self._check_idle()
        if not self.prefilled:
            raise NotReady(say("session.prefill_before_rewind"))
        if not 1 <= to_step <= len(self.generated):
            raise ValueError(say("rewind.out_of_range", step=to_step, steps=len(self.generated)))
        return self._back_to(self.tree.ancestor(self.node, to_step - 1), reset=False)

    def retract(self, shown: int) -> tuple[Rewound, tuple[int, ...]] | None:
        """Take back the steps after step `shown`: a paced front-end paused or stopped there while this
        session ran ahead, and nobody saw the rest. Back to just after step `shown`, as a rewind; the nodes
        the last run made beyond it leave the tree (never shown, they are no branch to switch to), the nodes
        that were there before it stay. (the Rewound, the dropped node ids); None when no step is after `shown`."""
        if not 0 <= shown < len(self.generated):
            return None
        self.window.refuse_shifted()
        self._check_idle()
        path = self.tree.path(self.node)
        target = path[shown - 1] if shown else 0
        dropped = tuple(node for node in path[shown:] if node >= self._run_made_from)
        for node in reversed(dropped):
            self.tree.remove(node)
            self.kept.drop(node)
        self._run_made_from = sys.maxsize  # what the run took beyond the step shown is gone; the rest was shown
        return self._back_to(target, reset=False), dropped

    def reset(self) -> Rewound:
        """Back to the prompt (its cache kept), re-seeded from settings.seed; every branch stays in the tree.
        After a context shift the prompt's dropped positions are read again first (one pass), and the kept
        steps of the nodes after it (of the shifted context) are let go."""
        self._check_idle()
        if self.window.shifts and self.prefilled:
            self.source.crop(KEEP_FIRST)
            if len(self.prompt) > KEEP_FIRST:
                self._read(self.prompt[KEEP_FIRST:], KEEP_FIRST)
            self.kept.keep_only_prompt()
            self.window.shifts = ()
        if not self.prefilled:
            raise NotReady(say("session.prefill_first"))
        self.drafts.begin()  # a run after a reset drafts as the first did
        return self._back_to(0, reset=True)

    def _back_to(self, node: int, reset: bool) -> Rewound:
        self._abort.clear()
        depth = self.tree.nodes[node].depth
        kept, forward_ms = self.kept.get(node), 0.0
        self.source.crop(len(self.prompt) + depth)
        if kept is None:  # dropped for its size: one forward pass of the token before it
            self.source.crop(len(self.prompt) + depth - 1)
            kept = self._read_pending(node, [self.tree.nodes[node].token_id], len(self.prompt) + depth - 1)
            forward_ms = kept.forward_ms
        self._go_to(node, kept)
        self._lens_of_pending()
        return Rewound(to_step=depth + 1, node=node, kv_used_bytes=self.source.kv_used_bytes,
                       kv_allocated_bytes=self.source.kv_allocated_bytes, seed=self.seed_used, reset=reset,
                       pending=self.preview().dist, forward_ms=forward_ms)

    def restore(self, ids: list[int], prompt_text: str, nodes, node: int) -> None:
        """Rebuild a session reported before (a restarted engine): read the prompt, put back the tree, go
        to `node` (its path re-read in one pass). Same seed and settings: the next draws are the same."""
        self.prefill(ids, prompt_text)
        self.tree.restore(nodes)
        if node:
            self.switch(node)

    def switch(self, node: int) -> Switched:
        """Make `node` (any node of the tree) current. The positions the cache does not hold for its path
        are re-read in ONE parallel pass, which also gives its pending distribution."""
        self.window.refuse_shifted()
        self._check_idle()
        if not self.prefilled:
            raise NotReady(say("session.prefill_first"))
        held = len(self.generated) - (1 if self.pending is None and self.generated else 0)
        target, common = self.tree.common_prefix(node, self.generated, held)  # raises for an unknown node
        kept = self.kept.get(node) if common == len(target) else None
        if kept is not None:
            reread = []
        else:  # the tokens past the common prefix; at least the last one, whose logits are pending
            reread = target[min(common, len(target) - 1):]
        self.source.crop(len(self.prompt) + len(target) - len(reread))
        started = time.perf_counter()
        if reread:
            kept = self._read_pending(node, reread, len(self.prompt) + len(target) - len(reread))
        ms = (time.perf_counter() - started) * 1000 if reread else 0.0
        self._go_to(node, kept)
        self._lens_of_pending()
        return Switched(node=node, to_step=len(target), reread_tokens=len(reread), ms=ms,
                        kv_used_bytes=self.source.kv_used_bytes, kv_allocated_bytes=self.source.kv_allocated_bytes,
                        tokens=tuple(target), seed=self.seed_used, pending=self.preview().dist)

    def _read_pending(self, node: int, ids: list[int], start: int) -> PendingStep:
        step = self._read(ids, start)
        self.kept.put(node, step)
        return step

    def attention_of(self, node: int, chunk: int = 512) -> AttentionOf:
        """The attention of the pass that fed `node`'s token (node 0: the prefill's whole triangle),
        recomputed on a scratch cache (recorder.py): one prefill-sized pass, nothing in the session changes."""
        self._check_idle()
        tokens = self.prompt + self.tree.tokens(node)  # raises for an unknown node
        if not self.prompt:
            raise ValueError(say("session.prefill_first"))
        return self.recorder.attention_of(self.model.decoder, tokens, node, chunk)

    # --- helpers --------------------------------------------------------------------------------------
    def _check_idle(self) -> None:
        if self.running:
            raise NotReady(say("session.running"))

    def _resume(self) -> None:
        """Clear a stop that more steps may follow (an abort, a raised limit), or refuse."""
        why = self.blocked()
        if why:
            raise NotReady(why) if not self.prefilled else GenerationEnded(why)
        self.stopped = None

    def _feed_last(self) -> None:
        """Run the newest token through the model: its K/V join the cache, the next step is pending."""
        self.pending = self._read([self.generated[-1]], self.n_window - 1, abortable=False)
        self.kept.put(self.node, self.pending)

    def _token(self, stream, token_id: int) -> Token:
        text, piece = stream.push(token_id)
        tok = self.model.tokenizer
        return Token(token_id, text, piece, tok.is_special(token_id), tok.token_bytes(token_id))

    def _stop_reason(self, token_id: int | None) -> tuple[str | None, str | None]:
        """The stop rule the newest token (None: the prompt alone) fires, and the stop string it matched."""
        matched = self._stop_strings()[1]
        n = len(self.generated)
        reason = ("eos" if token_id in self.model.config.eos_ids else "stop_string" if matched is not None
                  else "max_new_tokens" if n and n >= self.settings.max_new_tokens
                  else "context_full" if self._context_full() else None)
        return reason, matched

    def _stop_strings(self) -> tuple[tuple[int, ...], str | None]:
        return match_stop_strings(self.text, self.settings.stop_strings)

    def _distribution(self, logits: torch.Tensor, sampler: SamplerSettings):
        """The step's distribution under `sampler`: over the whole vocabulary, or a server's top-N with its tail."""
        note = self.source.note_of(logits)
        return distribution(logits, sampler, self.settings.top_n) if note is None else \
            server_distribution(logits, note, sampler)

    def _summarise(self, step: PendingStep, dist, sampler, chosen):
        server = self.source.note_of(step.logits)  # a server's source: its tail; else None
        summary = summarise(step.logits, dist, sampler, chosen, self.settings.top_n, self._stream.peek_many,
                            self.model.config.eos_ids, server)
        return self.recorder.with_lens(summary, step, self.source, self._stream.peek, self.settings.top_n, chosen)

    def _widen(self, sampler: SamplerSettings) -> None:
        """A server's top-N whose tail could matter to a draw under `sampler` is asked again, wider."""
        if self.source.remote:  # a local source's logits are whole: nothing to widen (and no window to build)
            wider = self.source.widen(self.pending.logits, sampler, self.window_ids())
            if wider is not self.pending.logits:
                self.pending = replace(self.pending, logits=wider)

    def _stop(self, reason: str, matched: str | None = None) -> Stopped:
        if matched is not None:
            self.text = self.text[:self.text.find(matched)]
        prefill_rate = len(self.prompt) / (self._prefill_ms / 1000) if self._prefill_ms > 0 else 0.0
        decode_rate = len(self.generated) / self._decode_seconds if self._decode_seconds > 0 else 0.0
        self.stopped = Stopped(reason=reason, n_generated=len(self.generated), text=self.text,
                               prefill_tokens_per_s=prefill_rate, decode_tokens_per_s=decode_rate,
                               stop_string=matched)
        return self.stopped
