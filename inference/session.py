"""One generation: prompt -> prefill -> one token per step -> a stop. The ONE owner of generation state.

The CLI drives it directly; the GUI drives it through the engine process (engine.py). It keeps the logits
of the step about to be drawn ("pending"). A step draws from them, reports the draw, checks the stop
rules and, unless generation ended, feeds the new token through the model to get the next pending
logits: every distribution is computed on the prefix that includes every token drawn so far. Sampling
settings may change between steps (they apply to the next draw); a changed seed takes effect at
`reset()`, which returns to the prompt and re-seeds, so the same seed and settings reproduce the same
tokens. `run()` is the one run loop of the code base.

Logits come from a `LogitsSource` (sources/): the model's own decoder in this process by default.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import numpy as np
import torch

from .errors import Cancelled, NotReady
from .events import Pending, PrefillDone, SessionStatus, StepDone, Stopped, Token
from .loading import LoadedModel
from .report import chosen_rank, summarise
from .sampling import distribution, draw
from .settings import GenerationSettings, SamplerSettings
from .sources import LogitsSource
from .sources.local import LocalDecoder
from .tokenizer import ChatMessage

PREFILL_CHUNK = 512  # positions per prefill pass; longer prompts take several passes


class GenerationEnded(NotReady):
    """Raised by `step()` after EOS, a stop string or a full context window: reset to go on."""


class _LastRowCapture:
    """Keeps each layer's attention of the newest query position: (layers, heads, n)."""

    def __init__(self, n_layers: int):
        self.rows: list[np.ndarray | None] = [None] * n_layers

    def record(self, layer: int, probs: torch.Tensor) -> None:
        self.rows[layer] = probs[:, -1, :].float().cpu().numpy()

    def array(self) -> np.ndarray:
        return np.stack(self.rows)


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
                 capture_attention: bool = False, source: LogitsSource | None = None):
        self.model = model
        self.source = source if source is not None else LocalDecoder(model.decoder)
        self.settings = settings.validate()
        self.capture_attention = capture_attention
        self.running = False  # inside run()
        self._abort = threading.Event()
        self._pause = threading.Event()
        self.prompt: list[int] = []
        self.prompt_text = ""
        self._prefill_logits: torch.Tensor | None = None
        self._prefill_ms = 0.0
        self._prefill_attention: np.ndarray | None = None
        self._start_generation()

    # --- state ----------------------------------------------------------------------------------------
    def _start_generation(self) -> None:
        self.generated: list[int] = []
        self.text = ""  # generated text so far
        self.stopped: Stopped | None = None
        self._decode_seconds = 0.0
        self._generator = torch.Generator(device="cpu").manual_seed(self.settings.seed)
        self.seed_used = self.settings.seed
        self._pending = self._prefill_logits
        self._pending_forward_ms = self._prefill_ms
        self._pending_attention = self._prefill_attention
        self._stream = self.model.tokenizer.stream()
        for token_id in self.prompt:
            self._stream.push(token_id)

    @property
    def prefilled(self) -> bool:
        return self._prefill_logits is not None

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
        if reason in ("eos", "stop_string", "context_full"):
            return f"generation ended ({reason}); reset to start again"
        if reason == "max_new_tokens" and len(self.generated) >= self.settings.max_new_tokens:
            return "the max new tokens limit is reached; raise it or reset"
        return ""

    def status(self) -> SessionStatus:
        return SessionStatus(prefilled=self.prefilled, running=self.running, blocked=self.blocked(),
                             n_generated=len(self.generated), settings=self.settings)

    def update_settings(self, settings: GenerationSettings) -> None:
        """New settings apply to the next draw; a new seed applies from the next reset."""
        self.settings = settings.validate()

    def abort(self) -> None:
        """End a running `run()` (or a chunked prefill) before its next step, as aborted (thread-safe)."""
        self._abort.set()

    def pause(self) -> None:
        """End a running `run()` before its next step; the generation can go on (thread-safe)."""
        self._pause.set()

    def reset(self) -> None:
        """Back to the state right after prefill: the prompt's cache kept, generated tokens forgotten."""
        if self.prefilled:
            self.source.crop(len(self.prompt))
        self._abort.clear()
        self._start_generation()

    # --- prefill --------------------------------------------------------------------------------------
    def prefill(self, ids: list[int], prompt_text: str = "", progress=None) -> PrefillDone:
        """Read the whole prompt in parallel: K/V for every position, logits for the last.

        Prompts longer than PREFILL_CHUNK go through in chunks of that many positions, so a long prompt
        reports progress (`progress("prefill", done, total)`) and `abort()` can cancel it in between.
        """
        self._check_prompt(ids)
        c = self.model.config
        self.source.start(len(ids) + self.settings.max_new_tokens)
        capture = _LastRowCapture(c.n_layers) if self.capture_attention else None
        self._abort.clear()
        started = time.perf_counter()
        for start in range(0, len(ids), PREFILL_CHUNK):
            if self._abort.is_set():
                self._abort.clear()
                self._prefill_logits = None
                raise Cancelled("prefill cancelled")
            last = start + PREFILL_CHUNK >= len(ids)
            logits = self.source.forward(ids[start:start + PREFILL_CHUNK], start, capture if last else None)
            if progress:
                progress("prefill", min(start + PREFILL_CHUNK, len(ids)), len(ids))
        self._prefill_logits = logits
        self._prefill_ms = (time.perf_counter() - started) * 1000
        self._prefill_attention = capture.array() if capture else None
        self.prompt, self.prompt_text = list(ids), prompt_text
        self._abort.clear()
        self._start_generation()
        stream = self.model.tokenizer.stream()
        tokens = tuple(self._token(stream, i) for i in ids)
        if len(ids) == c.context_length:
            self.stopped = self._stopped("context_full")
        return PrefillDone(tokens=tokens, n_tokens=len(ids), ms=self._prefill_ms,
                           kv_used_bytes=self.source.kv_used_bytes,
                           kv_allocated_bytes=self.source.kv_allocated_bytes,
                           prompt_text=prompt_text, pending=self.preview().dist,
                           attention=self._prefill_attention)

    def _check_prompt(self, ids: list[int]) -> None:
        c = self.model.config
        if not ids:
            raise ValueError("the prompt is empty: it must contain at least one token")
        if len(ids) > c.context_length:
            raise ValueError(f"the prompt is {len(ids)} tokens but the context window holds {c.context_length}")
        bad = [i for i in ids if not 0 <= i < c.vocab]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary of {c.vocab}")

    # --- one step -------------------------------------------------------------------------------------
    def preview(self, sampler: SamplerSettings | None = None) -> Pending:
        """The pending step's distribution under `sampler` (default: current settings). No forward pass."""
        if self._pending is None:
            self._feed_last()
        sampler = (sampler or self.settings.sampler).validate()
        dist = distribution(self._pending, sampler)
        return Pending(len(self.generated) + 1, self._summarise(self._pending, dist, sampler, None))

    def step(self) -> Iterator[StepDone | Stopped]:
        """Draw one token: yields its StepDone (and a Stopped when generation ends), then feeds it on."""
        self._resume()
        started = time.perf_counter()
        if self._pending is None:
            self._feed_last()
        forward_ms = self._pending_forward_ms
        kv_used, kv_allocated = self.source.kv_used_bytes, self.source.kv_allocated_bytes
        sampler = self.settings.sampler
        t = time.perf_counter()
        dist = distribution(self._pending, sampler)
        token_id, u = draw(dist, self._generator)
        sample_ms = (time.perf_counter() - t) * 1000
        logits = self._pending

        self.generated.append(token_id)
        token = self._token(self._stream, token_id)
        eos = token_id in self.model.config.eos_ids
        if not eos:
            self.text += token.text
        progress, matched = self._stop_strings()
        index = len(self.generated)
        summary = self._summarise(logits, dist, sampler, token_id)
        event = StepDone(
            index=index, position=self.n_context - 1, token=token, forward_ms=forward_ms,
            sample_ms=sample_ms, kv_used_bytes=kv_used, kv_allocated_bytes=kv_allocated,
            context_tokens=self.n_context,
            chosen_rank=chosen_rank(logits, token_id, summary.candidates, self.settings.top_n),
            random_u=u, dist=summary, seed=self.seed_used,
            stop_progress=progress, attention=self._pending_attention)
        self._pending, self._pending_attention = None, None
        reason = ("eos" if eos else "stop_string" if matched is not None
                  else "max_new_tokens" if index >= self.settings.max_new_tokens
                  else "context_full" if self.n_context >= self.model.config.context_length else None)
        self._decode_seconds += time.perf_counter() - started
        yield event
        if reason is not None:
            if matched is not None:
                self.text = self.text[:self.text.find(matched)]
            self.stopped = self._stopped(reason, matched)
            yield self.stopped
            return
        started = time.perf_counter()
        self._feed_last()
        self._decode_seconds += time.perf_counter() - started

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
                yield from self.step()
                taken += 1
        finally:
            self.running = False
            self._pause.clear()

    def abort_now(self) -> Stopped:
        """End the generation here, between steps, as aborted by the user."""
        self._abort.clear()
        self.stopped = self._stopped("aborted")
        return self.stopped

    def generate(self, ids: list[int], prompt_text: str = "") -> Iterator[PrefillDone | StepDone | Stopped]:
        """Prefill then run: the whole event stream of one generation."""
        yield self.prefill(ids, prompt_text)
        if self.stopped is not None:
            yield self.stopped
            return
        yield from self.run()

    # --- helpers --------------------------------------------------------------------------------------
    def _resume(self) -> None:
        """Clear a stop that more steps may follow (an abort, a raised limit), or refuse."""
        why = self.blocked()
        if why:
            raise NotReady(why) if not self.prefilled else GenerationEnded(why)
        self.stopped = None

    def _feed_last(self) -> None:
        """Run the newest token through the model: its K/V join the cache, the next logits are pending."""
        capture = _LastRowCapture(self.model.config.n_layers) if self.capture_attention else None
        started = time.perf_counter()
        self._pending = self.source.forward([self.generated[-1]], self.n_context - 1, capture)
        self._pending_forward_ms = (time.perf_counter() - started) * 1000
        self._pending_attention = capture.array() if capture else None

    def _token(self, stream, token_id: int) -> Token:
        text, piece = stream.push(token_id)
        return Token(token_id, text, piece, self.model.tokenizer.is_special(token_id))

    def _stop_strings(self) -> tuple[tuple[int, ...], str | None]:
        """Per stop string, how much of it ends the text now; and the first one found in the text."""
        text = self.text
        progress, matched, first = [], None, len(text) + 1
        for s in self.settings.stop_strings:
            at = text.find(s)
            if at >= 0 and at < first:
                matched, first = s, at
            progress.append(len(s) if at >= 0 else max(
                (n for n in range(len(s) - 1, 0, -1) if text.endswith(s[:n])), default=0))
        return tuple(progress), matched

    def _summarise(self, logits, dist, sampler, chosen):
        return summarise(logits, dist, sampler, chosen, self.settings.top_n, self.model.tokenizer,
                         self.model.config.eos_ids)

    def _stopped(self, reason: str, matched: str | None = None) -> Stopped:
        prefill_rate = len(self.prompt) / (self._prefill_ms / 1000) if self._prefill_ms > 0 else 0.0
        decode_rate = len(self.generated) / self._decode_seconds if self._decode_seconds > 0 else 0.0
        return Stopped(reason=reason, n_generated=len(self.generated), text=self.text,
                       prefill_tokens_per_s=prefill_rate, decode_tokens_per_s=decode_rate,
                       stop_string=matched)
