"""What a session reports: frozen dataclasses holding numpy arrays and Python scalars only.

They cross from the engine process to the GUI as they are (inside protocol.py's replies), and
`to_json()` writes the trace's JSON Lines (one object per event, keys as the README's "Headless trace"
section lists them). Fields the trace does not need (display pieces, the draw's CDF) stay out of the JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from inference.attention import PromptAttention
from inference.messages import Message
from inference.settings import GenerationSettings, SamplerSettings, Stage


STOCK_DECODE = "stock PyTorch ops"  # ModelInfo.decode_path without the own kernels ("…: <why>" after a failed build)

@dataclass(frozen=True)
class Token:
    id: int
    text: str  # the decoded text this token adds (" Paris"); "" while a UTF-8 character is incomplete
    piece: str  # how to show it on its own: the text, \xE4\xBD for a partial character, <|im_end|>
    special: bool = False
    raw: bytes = b""  # the bytes it adds to the text (a Chinese character's may be split over two tokens)

    @property
    def shown_text(self) -> str:
        """The text, or for a token that only carries bytes of an incomplete character its own bytes as
        \\xNN (what a candidate list shows for it too)."""
        return self.text or self.piece

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.shown_text}


@dataclass(frozen=True)
class Candidates:
    """Top-N tokens by raw logit (sorted by logit), plus the chosen token when it is outside them."""

    ids: np.ndarray  # (N,) int64
    texts: tuple[str, ...]
    logits: np.ndarray  # (N,) float64
    p_raw: np.ndarray  # softmax(logits)
    p_temp: np.ndarray  # softmax(logits / T)
    p_final: np.ndarray  # the distribution drawn from (0 for removed tokens)
    # A server's step (its tail not sent): (N, 2) the least and the most p_temp could be, and p_final with the
    # whole vocabulary drawn from; None where the values are exact (this process's logits)
    p_temp_bounds: np.ndarray | None = None
    p_final_bounds: np.ndarray | None = None

    def to_list(self) -> list[dict]:
        rows = [{"id": int(i), "text": t, "logit": float(lo) if np.isfinite(lo) else None,  # None: a token a
                 "p_raw": float(a), "p_temp": float(b), "p_final": float(c)}  # server did not list, forced
                for i, t, lo, a, b, c in zip(self.ids, self.texts, self.logits, self.p_raw, self.p_temp,
                                             self.p_final)]
        for key, bounds in (("p_temp_bounds", self.p_temp_bounds), ("p_final_bounds", self.p_final_bounds)):
            if bounds is not None:
                for row, (low, high) in zip(rows, bounds.tolist()):
                    row[key] = [low, high]
        return rows


@dataclass(frozen=True)
class KeptCdf:
    """The kept tokens in draw order (descending p_final) with their cumulative probability."""

    ids: np.ndarray  # (M,) the first M of `n_kept`
    texts: tuple[str, ...]
    cdf: np.ndarray  # (M,)
    n_kept: int


@dataclass(frozen=True)
class LogitLens:
    """The logit lens of one step: the residual stream at the position being predicted, after each layer,
    read through the final norm and the head. Layer i (0-based here, i + 1 in the trace) is the stream after
    i + 1 layers; the last one is the step's own distribution."""

    ids: np.ndarray  # (layers, k) int64: each layer's top k tokens, most likely first
    p: np.ndarray  # (layers, k) float64: their softmax over the whole vocabulary
    texts: tuple[tuple[str, ...], ...]  # (layers, k)
    p_chosen: np.ndarray | None = None  # (layers,) p of the token the step took; None before its draw

    @property
    def n_layers(self) -> int:
        return self.ids.shape[0]

    def to_list(self) -> list[dict]:
        return [{"layer": layer + 1,
                 "top": [{"id": int(i), "text": t, "p": float(q)} for i, t, q in zip(ids, texts, p)],
                 "p_chosen": None if self.p_chosen is None else float(self.p_chosen[layer])}
                for layer, (ids, texts, p) in enumerate(zip(self.ids, self.texts, self.p))]


@dataclass(frozen=True)
class ServerNote:
    """What a remote inference server told about one step (sources/remote.py). It sends only its top-N:
    the other V - N tokens are one tail, shown, never hidden."""

    n_top: int  # tokens the server listed
    tail_p: float  # 1 - the sum of their raw p: the mass of the tokens it did not list
    tail_count: int  # V - N
    cached_tokens: int | None = None  # context tokens the server took from its prefix cache (None: not said)
    server_ms: float | None = None  # the server's own compute time for the request (None: not said)
    kv_usage: float | None = None  # fraction of the server's KV cache in use (vLLM /metrics); None: not known

    def to_dict(self) -> dict:
        return {"n_top": self.n_top, "tail_p": self.tail_p, "tail_count": self.tail_count,
                "cached_tokens": self.cached_tokens, "server_ms": self.server_ms, "kv_usage": self.kv_usage}


@dataclass(frozen=True)
class StepDistribution:
    """Everything about one step's distribution the views draw; shared by past and pending steps."""

    candidates: Candidates
    stages: tuple[Stage, ...]
    kept: KeptCdf
    entropy: float  # of p_raw, nats
    eos_p: float  # p_raw mass on the model's end-of-sequence tokens
    settings: SamplerSettings
    lens: LogitLens | None = None  # while the lens is captured (session.capture_lens)
    server: ServerNote | None = None  # from a remote server: its top-N only, the rest as a tail
    # a server's step: the tail's share of the final distribution over the whole vocabulary under the sampler,
    # (removed: what the draw left out, the `server_cap` stage; low; high). None: a local step.
    tail_kept: tuple[float, float, float] | None = None

    def server_dict(self) -> dict:
        """The step event's `server`: what the server said, and how much of its tail the sampler would keep (the
        draw is among the listed tokens only: `removed` is what that left out)."""
        said = self.server.to_dict()
        if self.tail_kept is not None:
            said["tail_kept"] = dict(zip(("removed", "low", "high"), self.tail_kept))
        return said


@dataclass(frozen=True)
class ModelInfo:
    name: str
    architecture: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    context_length: int
    n_params: int
    dtype: str
    device: str
    kv_bytes_per_token: int
    kv_dtype: str  # the cache's element type (int8 weights keep a float32 cache)
    kv_element_bytes: int
    weights_fingerprint: str
    weights_bytes: int
    eos_ids: tuple[int, ...] = ()
    folder: str = ""
    sampler_defaults: SamplerSettings = SamplerSettings()  # from generation_config.json
    decode_path: str = ""  # how a decode step runs: "fused kernels", "kernels per product" or "stock PyTorch ops" (with why, where the kernels did not build)
    decode_notes: str = ""  # int8: what its products and head do ("head ranks in 4 bits, best 256 rescored in float")
    layer_windows: tuple[int, ...] = ()  # per layer: the most recent positions it attends to, 0 = all

    def to_json(self) -> str:
        keys = ("name", "architecture", "n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size",
                "vocab_size", "context_length", "n_params", "dtype", "device", "kv_bytes_per_token",
                "weights_fingerprint", "weights_bytes", "decode_path", "decode_notes")
        return _dump({"type": "model", **{k: getattr(self, k) for k in keys}})


@dataclass(frozen=True)
class PrefillDone:
    tokens: tuple[Token, ...]
    n_tokens: int
    ms: float
    kv_used_bytes: int
    kv_allocated_bytes: int
    prompt_text: str  # what was encoded (the rendered chat template in chat mode)
    pending: StepDistribution | None = None  # step 1's distribution, before any draw
    attention: np.ndarray | None = None  # (layers, heads, n_tokens) last position's attention
    prompt_attention: PromptAttention | None = None  # every position's: the whole triangle of one pass
    request: int | None = None  # the request's index in a batch (session/batch.py); None: a session of its own

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / (self.ms / 1000) if self.ms > 0 else 0.0

    def to_json(self) -> str:
        return _dump({"type": "prefill", **_request(self.request), "tokens": [t.to_dict() for t in self.tokens],
                      "n_tokens": self.n_tokens, "ms": self.ms, "kv_used_bytes": self.kv_used_bytes,
                      "kv_allocated_bytes": self.kv_allocated_bytes})


@dataclass(frozen=True)
class StepDone:
    index: int  # 1-based
    position: int  # 0-based position of the chosen token in the model's context (less tokens a shift dropped)
    token: Token
    forward_ms: float  # the forward pass that produced this distribution (step 1: the prefill)
    sample_ms: float
    kv_used_bytes: int  # the cache that produced this distribution
    kv_allocated_bytes: int
    context_tokens: int  # tokens in the model's context after appending the token
    chosen_rank: int  # 0-based rank by raw logit
    random_u: float | None  # None when greedy
    dist: StepDistribution
    seed: int
    stop_progress: tuple[int, ...] = ()  # per stop string: characters of it already matched at the end
    attention: np.ndarray | None = None  # (layers, heads, positions) attention of the query that ran
    forced: bool = False  # the token was chosen by the user (force), not drawn; random_u is None
    node: int = 0  # this step's node in the session's branch tree
    parent: int = 0  # the node before it (0: the root, i.e. the prompt)
    settings: GenerationSettings | None = None  # in force at this draw (the draw used `seed`)
    verified_by: int = 0  # the first step of the verify pass that decided it (0: a step of its own)
    shift: "ContextShifted | None" = None  # this token filled the context window: the shift that followed
    request: int | None = None  # the request's index in a batch (session/batch.py); None: a session of its own

    @property
    def entropy(self) -> float:
        return self.dist.entropy

    @property
    def lens(self) -> LogitLens | None:
        return self.dist.lens

    def to_json(self) -> str:
        lens = {} if self.dist.lens is None else {"lens": self.dist.lens.to_list()}
        if self.dist.server is not None:
            lens["server"] = self.dist.server_dict()
        return _dump({
            "type": "step", **_request(self.request), "index": self.index, "position": self.position,
            "token": self.token.to_dict(),
            "forward_ms": self.forward_ms, "sample_ms": self.sample_ms, "kv_used_bytes": self.kv_used_bytes,
            "kv_allocated_bytes": self.kv_allocated_bytes, "context_tokens": self.context_tokens,
            "entropy": self.dist.entropy, "chosen_rank": self.chosen_rank, "random_u": self.random_u,
            "forced": self.forced,
            "candidates": self.dist.candidates.to_list(),
            "stages": [{"name": s.name, "kept": s.kept, "removed_mass": s.removed_mass}
                       for s in self.dist.stages], **lens})


@dataclass(frozen=True)
class ContextShifted:
    """A context shift (context_limit.py, policy drop-oldest): the token of step `step` filled the window;
    the oldest `dropped` tokens after the first left the context, and the `kept` - 1 after the first were
    read again in ONE pass, at positions 1..kept-1."""

    step: int
    dropped: int
    kept: int  # tokens in the context after the shift (the first one's K/V stayed in the cache)
    first_dropped: int  # index in prompt + generated of the first token dropped now (the last: + dropped - 1)
    window: int  # the context window in force (the context limit)
    forward_ms: float  # the re-read pass
    kv_used_bytes: int  # the cache after the shift

    def to_json(self) -> str:
        return _dump({"type": "context_shift", "step": self.step, "dropped": self.dropped, "kept": self.kept,
                      "reread_tokens": self.kept - 1, "first_dropped": self.first_dropped,
                      "window": self.window, "forward_ms": self.forward_ms, "kv_used_bytes": self.kv_used_bytes})


@dataclass(frozen=True)
class Pending:
    """The next step's distribution under the current settings, before its draw (live preview)."""

    index: int
    dist: StepDistribution
    attention: np.ndarray | None = None  # (layers, heads, n) of the query that ran, when recorded


@dataclass(frozen=True)
class Rewound:
    """Back to just before step `to_step` (a reset: back to the prompt). Its distribution is pending again."""

    to_step: int
    node: int  # the current node now (0: the prompt)
    kv_used_bytes: int
    kv_allocated_bytes: int
    seed: int  # the seed in force from here on
    reset: bool = False
    pending: StepDistribution | None = None
    forward_ms: float = 0.0  # 0 when the pending logits were kept; else the pass that recomputed them

    def to_json(self) -> str:
        return _dump({"type": "reset" if self.reset else "rewind", "to_step": self.to_step,
                      "kv_used_bytes": self.kv_used_bytes, "kv_allocated_bytes": self.kv_allocated_bytes,
                      "seed": self.seed})


@dataclass(frozen=True)
class Switched:
    """Another branch became current; the positions its cache lacked were re-read in ONE parallel pass."""

    node: int
    to_step: int  # steps on the new path (the pending step is to_step + 1)
    reread_tokens: int  # 0 when the cache already held the whole path
    ms: float
    kv_used_bytes: int
    kv_allocated_bytes: int
    tokens: tuple[int, ...]  # the generated ids of the new path
    seed: int = 0  # the seed in force from here on
    pending: StepDistribution | None = None

    def to_json(self) -> str:
        return _dump({"type": "branch", "node": self.node, "to_step": self.to_step,
                      "reread_tokens": self.reread_tokens, "ms": self.ms, "kv_used_bytes": self.kv_used_bytes,
                      "kv_allocated_bytes": self.kv_allocated_bytes, "tokens": list(self.tokens),
                      "seed": self.seed})


@dataclass(frozen=True)
class Verified:
    """One speculative verify pass: a drafted continuation read in ONE forward pass, kept while the draws
    agree with it. Comes before the steps it decided."""

    index: int  # the first step this pass decided
    drafted: tuple[Token, ...]
    ngram: tuple[int, ...]  # the context's last n tokens, found earlier in the context
    accepted: int  # drafted tokens the draws agreed with (a prefix of `drafted`)
    emitted: int  # steps this pass decided: the accepted ones, plus a correction or a bonus token
    positions: int  # tokens the pass read
    forward_ms: float
    # why this length (draft_length.py): the most it could draft, the estimated chance each draft position is
    # kept, the tokens and the cost in one-position steps it expected, the measured one-position step's ms
    # (None: the costs are pinned or no plain step was timed yet)
    draft_max: int = 0
    acceptance: tuple[float, ...] = ()
    expected_tokens: float = 0.0
    expected_cost: float = 0.0
    step_ms: float | None = None

    def to_json(self) -> str:
        return _dump({"type": "verify", "index": self.index, "drafted": [t.to_dict() for t in self.drafted],
                      "ngram": list(self.ngram), "accepted": self.accepted, "emitted": self.emitted,
                      "positions": self.positions, "forward_ms": self.forward_ms, "draft_max": self.draft_max,
                      "acceptance": list(self.acceptance), "expected_tokens": self.expected_tokens,
                      "expected_cost": self.expected_cost, "step_ms": self.step_ms})


@dataclass(frozen=True)
class Caption:
    """A lesson script's caption (shown over the app; a line of the trace)."""

    text: str

    def to_json(self) -> str:
        return _dump({"type": "caption", "text": self.text})


@dataclass(frozen=True)
class SettingsEvent:
    """The settings in force (once after `model`, then whenever they change), so a trace can be replayed."""

    settings: GenerationSettings
    request: int | None = None  # the request's index in a batch (session/batch.py); None: a session of its own

    def to_json(self) -> str:
        s = self.settings
        return _dump({"type": "settings", **_request(self.request), "seed": s.seed, "temperature": s.sampler.temperature,
                      "top_k": s.sampler.top_k, "top_p": s.sampler.top_p, "min_p": s.sampler.min_p,
                      "greedy": s.sampler.greedy, "max_new_tokens": s.max_new_tokens,
                      "stop": list(s.stop_strings), "speculate": s.speculate,
                      # only with a context limit: a trace without one reads as before
                      **({"context_limit": s.context_limit, "when_full": s.when_full} if s.context_limit else {})})


STOP_REASONS = ("eos", "max_new_tokens", "stop_string", "context_full", "aborted")


@dataclass(frozen=True)
class Stopped:
    reason: str
    n_generated: int
    text: str  # generated text only: no prompt, no matched stop string, no final EOS
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    stop_string: str | None = None
    request: int | None = None  # the request's index in a batch (session/batch.py); None: a session of its own

    def to_json(self) -> str:
        return _dump({"type": "stop", **_request(self.request), "reason": self.reason, "n_generated": self.n_generated,
                      "text": self.text, "prefill_tokens_per_s": self.prefill_tokens_per_s,
                      "decode_tokens_per_s": self.decode_tokens_per_s})


@dataclass(frozen=True)
class SessionStatus:
    """What a session can do now (the GUI enables its buttons from this, never from a copy of its own)."""

    prefilled: bool
    running: bool  # inside Session.run()
    blocked: Message | None  # why a step would be refused now; None when it would be taken
    n_generated: int
    settings: GenerationSettings  # in force: the next draw uses them

    @property
    def can_step(self) -> bool:
        return not self.blocked and not self.running


@dataclass(frozen=True)
class ScheduleDone:
    """One scheduler step of a batch (session/batch.py): who was in its forward pass and who waits, and why."""

    step: int  # 0-based scheduler step
    requests: tuple[int, ...]  # the requests with rows in this pass, in the pass's order
    prefill_chunks: dict[int, int]  # request -> prompt tokens it read in this pass (chunked prefill)
    tokens_in_pass: int  # rows of the pass: decode tokens plus prompt chunks
    forward_ms: float
    waiting: dict[int, str]  # request -> why it is not running yet

    def to_json(self) -> str:
        return _dump({"type": "schedule", "step": self.step, "requests": list(self.requests),
                      "prefill_chunks": {str(k): v for k, v in self.prefill_chunks.items()},
                      "tokens_in_pass": self.tokens_in_pass, "forward_ms": self.forward_ms,
                      "waiting": {str(k): v for k, v in self.waiting.items()}})


@dataclass(frozen=True)
class BlocksReport:
    """The paged KV cache's pool after a scheduler step: blocks in use, shared, free, and each request's table."""

    step: int
    block_tokens: int
    allocated: int  # blocks in use (a shared block once)
    shared: int  # blocks in use by more than one request
    free: int
    used_bytes: int  # allocated x block bytes
    per_request: dict[int, tuple[int, ...]]  # running request -> its block ids in position order
    positions: dict[int, int] | None = None  # running request -> positions its blocks hold (the last block's
    #                                           unused tail is its internal fragmentation)

    def to_json(self) -> str:
        return _dump({"type": "blocks", "step": self.step, "block_tokens": self.block_tokens,
                      "allocated": self.allocated, "shared": self.shared, "free": self.free,
                      "used_bytes": self.used_bytes,
                      "per_request": {str(k): list(v) for k, v in self.per_request.items()}})


@dataclass(frozen=True)
class RequestDone:
    """A batched request's completion record, after its `stop` (session/batch.py). Times are wall clock from its
    arrival: the start of the scheduler step it arrives at (`arrive_at_step`), so waiting for the batch or the
    pool counts, as a user waiting for a server would count it."""

    request: int
    reason: str  # as its `stop`'s
    n_generated: int
    prompt_tokens: int
    shared_tokens: int  # prompt positions it took from the prefix table instead of reading them
    arrived_at_step: int
    admitted_at_step: int
    finished_at_step: int
    queue_ms: float  # arrival -> admitted to the batch
    ttft_ms: float | None  # arrival -> its first token drawn (time to first token); None: it drew none
    tpot_ms: float | None  # (last token - first token) / (n_generated - 1): time per output token after the
    #                        first; None with fewer than 2 tokens
    total_ms: float  # arrival -> finished

    def to_json(self) -> str:
        keys = ("request", "reason", "n_generated", "prompt_tokens", "shared_tokens", "arrived_at_step",
                "admitted_at_step", "finished_at_step", "queue_ms", "ttft_ms", "tpot_ms", "total_ms")
        return _dump({"type": "request_done", **{k: getattr(self, k) for k in keys}})


def _request(request: int | None) -> dict:
    """The `request` key of an event of a batched request; none for a session of its own."""
    return {} if request is None else {"request": request}


def _dump(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)
