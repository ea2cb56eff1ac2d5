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
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import numpy as np
import torch

from inference.session.branches import BranchMoves, BranchTree, KeptLogits, KeptPending
from inference.session.context_limit import ContextLimit
from inference.model.capture import LastRowCapture, PromptCapture, Recapture
from inference.errors import Cancelled, NotReady
from inference.events import Pending, PrefillDone, SessionStatus, StepDone, Stopped, Token, Verified
from inference.session.lens import LensCapture
from inference.store.loading import LoadedModel
from inference.session.report import chosen_rank, summarise
from inference.session.sampling import distribution, draw, draw_seed
from inference.settings import PREFILL_CHUNK, GenerationSettings, SamplerSettings
from inference.text.stops import match_stop_strings
from inference.sources import LogitsSource
from inference.sources.local import LocalDecoder
from inference.sources.nocache import NoCacheDecoder, fresh_source
from inference.session.speculate import Speculation
from inference.text.tokenizer import ChatMessage


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


class Session(ContextLimit, BranchMoves, Speculation, LensCapture, Recapture):
    def __init__(self, model: LoadedModel, settings: GenerationSettings = GenerationSettings(),
                 capture_attention: bool = False, source: LogitsSource | None = None, capture_lens: bool = False):
        self.model = model
        if source is None:  # a remote model (sources/remote_model.py) brings its own
            source = model.new_source() if hasattr(model, "new_source") else LocalDecoder(model.decoder)
        self.source = source
        self.settings = settings.validate()
        self.capture_attention, self.capture_lens = capture_attention, capture_lens  # lens.py: the logit lens
        self.running = False  # inside run()
        self._abort = threading.Event()
        self._pause = threading.Event()
        self.prompt: list[int] = []
        self.prompt_text = ""
        self._prefill_ms = 0.0
        self._decode_seconds = 0.0
        self.tree = BranchTree()
        self.kept = KeptLogits()
        self._go_to(0)

    # --- state ----------------------------------------------------------------------------------------
    def _go_to(self, node: int, pending: KeptPending | None = None) -> None:
        """Make `node` current: its tokens are the generated ones, `pending` the next step's logits (None:
        computed when needed). The cache must already hold the prompt and the tokens before the last."""
        self.node = node
        self.generated: list[int] = self.tree.tokens(node)
        self.seed_used = self.settings.seed
        self._pending = pending.logits if pending else None
        self._pending_forward_ms = pending.forward_ms if pending else 0.0
        self._pending_attention = pending.attention if pending else None
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
        return self._pending

    def blocked(self) -> str:
        """Why a step would be refused now, or "" when it would be taken (the rule `step()` enforces)."""
        if not self.prefilled:
            return "prefill the prompt before stepping"
        reason = self.stopped.reason if self.stopped is not None else None
        if reason in ("eos", "stop_string") or reason == "context_full" and self._context_full():  # still full
            return f"generation ended ({reason}); rewind or reset to go on"
        if reason == "max_new_tokens" and len(self.generated) >= self.settings.max_new_tokens:
            return "the max new tokens limit is reached; raise it, rewind or reset"
        return ""

    @property
    def kv_cache(self) -> bool:
        return not isinstance(self.source, NoCacheDecoder)

    def use_kv_cache(self, on: bool) -> None:
        """Decode with the KV cache, or without (each pass re-reads the whole prefix: the same logits, at a
        cost that grows with the context). Switching on re-reads the context in one pass."""
        self._check_idle()
        if on != self.kv_cache:
            held = self.n_window - (1 if self._pending is None and self.generated else 0) if self.prefilled else 0
            self.source = fresh_source(self.model.decoder, on, self.window_ids()[:held],
                                       len(self.prompt) + self.settings.max_new_tokens)

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
        self.prompt, self.prompt_text, self.shifts = [], "", ()
        self.tree, self.kept = BranchTree(), KeptLogits(self.kept.budget)
        self._abort.clear()
        started = time.perf_counter()
        capture = PromptCapture(self.model.config, len(ids)) if self.capture_attention else None
        try:
            logits, attention = self._read(ids, 0, progress, capture)
        except Cancelled:
            self._go_to(0)  # nothing prefilled
            raise
        self._prefill_ms = (time.perf_counter() - started) * 1000
        self.prompt, self.prompt_text = list(ids), prompt_text
        self._decode_seconds = 0.0
        entry = KeptPending(logits, attention, self._prefill_ms)
        self.kept.put(0, entry)
        self._go_to(0, entry)
        stream = self.model.tokenizer.stream()
        tokens = tuple(self._token(stream, i) for i in ids)
        return PrefillDone(tokens=tokens, n_tokens=len(ids), ms=self._prefill_ms,
                           kv_used_bytes=self.source.kv_used_bytes,
                           kv_allocated_bytes=self.source.kv_allocated_bytes,
                           prompt_text=prompt_text, pending=self.preview().dist, attention=attention,
                           prompt_attention=capture.prompt() if capture else None)

    def _read(self, ids: list[int], start: int, progress=None,
              capture: LastRowCapture | None = None) -> tuple[torch.Tensor, np.ndarray | None]:
        """Read `ids` at positions start.. in parallel (chunks of PREFILL_CHUNK): the last one's logits.
        `capture` (a PromptCapture records every chunk) or, while attention is recorded, the last row's."""
        if capture is None and self.capture_attention:
            capture = LastRowCapture(self.model.config.n_layers)
        for at in range(0, len(ids), PREFILL_CHUNK):
            if self._abort.is_set():
                self._abort.clear()
                raise Cancelled("prefill cancelled")
            last = at + PREFILL_CHUNK >= len(ids)
            logits = self._forward(ids[at:at + PREFILL_CHUNK], start + at,
                                   capture if last or isinstance(capture, PromptCapture) else None, lens=last)
            if progress:
                progress("prefill", min(at + PREFILL_CHUNK, len(ids)), len(ids))
        return logits, capture.array() if capture else None

    def _check_prompt(self, ids: list[int]) -> None:
        if not ids:
            raise ValueError("the prompt is empty: it must contain at least one token")
        if len(ids) > self.context_window:
            raise ValueError(self._too_long(len(ids)))
        self._check_ids(ids)

    def _check_ids(self, ids: list[int]) -> None:
        bad = [i for i in ids if not 0 <= i < self.model.config.vocab]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary of {self.model.config.vocab}")

    # --- one step -------------------------------------------------------------------------------------
    def preview(self, sampler: SamplerSettings | None = None) -> Pending:
        """The pending step's distribution under `sampler` (default: current settings). No forward pass."""
        if self._pending is None:
            self._feed_last()
        sampler = (sampler or self.settings.sampler).validate()
        self._widen(sampler)
        dist = distribution(self._pending, sampler, self.settings.top_n)
        return Pending(len(self.generated) + 1, self._summarise(self._pending, dist, sampler, None),
                       self._pending_attention)

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
                raise ValueError("the text to force is empty: it encodes to no tokens")
        else:
            ids = [int(token)]
        self._check_ids(ids)
        self._resume()
        for token_id in ids:
            if self.stopped is not None:
                return
            yield from self._take(token_id)

    def _take(self, forced: int | None) -> Iterator[StepDone | Stopped]:
        started = time.perf_counter()
        if self._pending is None:
            self._feed_last()
        event, reason, matched = self._draw(forced, self.source.kv_used_bytes)
        event = self._shift_when_full(event, reason)  # context_limit.py: drop-oldest when the window is full
        self._decode_seconds += time.perf_counter() - started
        yield event
        if reason is not None:
            yield self._stop(reason, matched)
            return
        started = time.perf_counter()
        if event.shift is None:  # a shift re-read the context, the newest token with it
            self._feed_last()
        self._decode_seconds += time.perf_counter() - started

    def _draw(self, forced: int | None, kv_used: int, verified_by: int = 0) -> tuple[StepDone, str | None, str | None]:
        """Take a token from the pending logits (drawn, or `forced`): the step's event, and the stop rule
        it fires (with the stop string matched)."""
        sampler, index = self.settings.sampler, len(self.generated) + 1
        self._widen(sampler)
        t = time.perf_counter()
        dist = distribution(self._pending, sampler, self.settings.top_n)
        if forced is None:
            token_id, u = draw(dist, torch.Generator().manual_seed(draw_seed(self.seed_used, index)))
        else:
            token_id, u = forced, None
        sample_ms = (time.perf_counter() - t) * 1000
        logits = self._pending
        summary = self._summarise(logits, dist, sampler, token_id)  # texts read before the token joins

        parent, self.node = self.node, self.tree.child(self.node, token_id)
        self.generated.append(token_id)
        token = self._token(self._stream, token_id)
        if token_id not in self.model.config.eos_ids:
            self.text += token.text
        reason, matched = self._stop_reason(token_id)
        event = StepDone(
            index=index, position=self.n_window - 1, token=token, forward_ms=self._pending_forward_ms,
            sample_ms=sample_ms, kv_used_bytes=kv_used, kv_allocated_bytes=self.source.kv_allocated_bytes,
            context_tokens=self.n_window,
            chosen_rank=chosen_rank(logits, token_id, summary.candidates, self.settings.top_n),
            random_u=u, dist=summary, seed=self.seed_used, stop_progress=self._stop_strings()[0],
            attention=self._pending_attention, forced=forced is not None, node=self.node, parent=parent,
            settings=self.settings, verified_by=verified_by)
        self._pending, self._pending_attention = None, None
        return event, reason, matched

    def _next(self) -> Iterator[StepDone | Stopped | Verified]:
        """One step, or with `settings.speculate` one verify pass (speculate.py)."""
        if self.settings.speculate:
            yield from self._verify()
        else:
            yield from self._take(None)

    def run(self, max_steps: int = 0, between: Callable[[], None] | None = None) -> Iterator[StepDone | Stopped]:
        """Step until a stop rule fires, `abort()` or `pause()` is called, or `max_steps` were taken
        (0 = no limit). `between` runs before every step: a driver reads its commands there."""
        self._resume()
        self._pause.clear()
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

    # --- helpers --------------------------------------------------------------------------------------
    def _check_idle(self) -> None:
        if self.running:
            raise NotReady("a run is in progress: pause it first")

    def _resume(self) -> None:
        """Clear a stop that more steps may follow (an abort, a raised limit), or refuse."""
        why = self.blocked()
        if why:
            raise NotReady(why) if not self.prefilled else GenerationEnded(why)
        self.stopped = None

    def _feed_last(self) -> None:
        """Run the newest token through the model: its K/V join the cache, the next logits are pending."""
        capture = LastRowCapture(self.model.config.n_layers) if self.capture_attention else None
        started = time.perf_counter()
        self._pending = self._forward([self.generated[-1]], self.n_window - 1, capture)
        self._pending_forward_ms = (time.perf_counter() - started) * 1000
        self._pending_attention = capture.array() if capture else None
        self.kept.put(self.node, KeptPending(self._pending, self._pending_attention, self._pending_forward_ms))

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

    def _summarise(self, logits, dist, sampler, chosen):
        server = self.source.note_of(logits) if hasattr(self.source, "note_of") else None  # remote: its tail
        summary = summarise(logits, dist, sampler, chosen, self.settings.top_n, self._stream.peek_many,
                            self.model.config.eos_ids, server)
        return self._with_lens(summary, logits, chosen)

    def _widen(self, sampler: SamplerSettings) -> None:
        """A server's top-N whose tail could matter to a draw under `sampler` is asked again, wider."""
        if hasattr(self.source, "widen"):
            self._pending = self.source.widen(self._pending, sampler, self.window_ids())

    def _stop(self, reason: str, matched: str | None = None) -> Stopped:
        if matched is not None:
            self.text = self.text[:self.text.find(matched)]
        prefill_rate = len(self.prompt) / (self._prefill_ms / 1000) if self._prefill_ms > 0 else 0.0
        decode_rate = len(self.generated) / self._decode_seconds if self._decode_seconds > 0 else 0.0
        self.stopped = Stopped(reason=reason, n_generated=len(self.generated), text=self.text,
                               prefill_tokens_per_s=prefill_rate, decode_tokens_per_s=decode_rate,
                               stop_string=matched)
        return self.stopped
