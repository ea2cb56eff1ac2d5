"""Gemma 2 and Gemma 3 (text): their config reader, their layer's weights and their block.

What differs from Llama (model.LlamaBlock), as transformers computes it:
- every RMSNorm scales by (1 + w), in float32; four per layer: before and after attention, before and after
  the MLP (the "after" ones normalise the branch's output before it is added to the residual stream);
- the embeddings are multiplied by sqrt(hidden) (in the embedding dtype: 55.4256 becomes 55.5 in bf16);
- the MLP is GeGLU: gelu_tanh(gate) * up;
- scores are scaled by query_pre_attn_scalar^-1/2 rather than head_dim^-1/2: Q is multiplied by
  sqrt(head_dim / query_pre_attn_scalar) once, so every attention route keeps its usual 1/sqrt(head_dim);
- Gemma 2 soft-caps the scores (cap * tanh(s / cap)) and the final logits; capped scores cannot go through
  SDPA or the one-query kernels, so such a block computes them explicitly (Block.captured for many queries,
  `GemmaBlock.attend` for a decode step);
- layers alternate between a sliding window and global attention (`layer_types`, or every
  `sliding_window_pattern`-th layer global); the KV cache keeps every position, each layer reads its window;
- Gemma 3 normalises Q and K per head (RMSNorm, 1 + w) before rotary, and rotates local layers with
  `rope_local_base_freq` and global ones with `rope_theta` (plus its scaling, linear in the 4B-27B models).
An image-text Gemma 3 checkpoint (Gemma3ForConditionalGeneration) is read for its text tower: the config
under `text_config`, the tensors under `language_model.` (checkpoint.canonical_name); the vision tower is
not read. No block here runs as one kernels.cpp call (`fuses_on_kernels` stays False): its projections and
norms still run on the backend's linears.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from inference.model.config import MAX_THETA, ModelConfig, RopeScaling, _Reader, _rope, attention_shape
from inference.model.layers import Backend, Norm
from inference.model.decoder import Block, Layer, RotaryTable, rotate
from inference.model.weights import _interleave_heads, llama_layer

# transformers' defaults for keys a config.json may leave out (the Gemma 3 image-text configs keep only
# what differs in `text_config`).
_DEFAULTS: dict[str, dict[str, Any]] = {
    "Gemma2ForCausalLM": dict(
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
        query_pre_attn_scalar=256, sliding_window=4096, sliding_window_pattern=2, final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0, bos_token_id=2, eos_token_id=1),
    "Gemma3ForCausalLM": dict(
        vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, max_position_embeddings=131072, rms_norm_eps=1e-6,
        rope_theta=1_000_000.0, rope_local_base_freq=10000.0, query_pre_attn_scalar=256, sliding_window=4096,
        sliding_window_pattern=6, final_logit_softcapping=None, attn_logit_softcapping=None, bos_token_id=2,
        eos_token_id=1),
}
_DEFAULTS["Gemma3ForConditionalGeneration"] = _DEFAULTS["Gemma3ForCausalLM"]


@dataclass(frozen=True)
class GemmaConfig(ModelConfig):
    layer_windows: tuple[int, ...] = ()  # per layer: its sliding window, 0 for a global layer
    query_scale: float = 1.0  # Q is multiplied by this: sqrt(head_dim / query_pre_attn_scalar)
    attn_softcap: float | None = None
    final_softcap: float | None = None
    qk_norm: bool = False  # Gemma 3
    local_rope_theta: float | None = None  # Gemma 3: the local layers' rotary base
    local_rope_scaling: RopeScaling | None = None

    @property
    def norm_offset(self) -> float:
        return 1.0

    def window_of(self, layer: int) -> int | None:
        return self.layer_windows[layer] or None


def _text_config(arch: str, r: _Reader) -> _Reader:
    """The text model's keys with transformers' defaults under them (an image-text config's `text_config`,
    its token ids and tying falling back to the outer config's)."""
    d = r.d
    if arch == "Gemma3ForConditionalGeneration":
        text = d.get("text_config")
        if not isinstance(text, dict):
            raise r.fail("'text_config' must be an object")
        outer = {k: d[k] for k in ("bos_token_id", "eos_token_id", "tie_word_embeddings") if k in d}
        d = {**outer, **text}
    return _Reader({**_DEFAULTS[arch], **d}, r.source)


def _softcap(r: _Reader, key: str) -> float | None:
    return None if r.d.get(key) is None else r.float(key, 0.0)


def _layer_windows(r: _Reader, n_layers: int) -> tuple[int, ...]:
    """Each layer's window (0: global) from `layer_types`, else from `sliding_window_pattern`."""
    types = r.d.get("layer_types")
    if types is not None:
        kinds = {"sliding_attention", "full_attention"}
        if not isinstance(types, list) or len(types) != n_layers or not all(t in kinds for t in types):
            raise r.fail(f"'layer_types' must list {n_layers} of {sorted(kinds)}")
        sliding = [t == "sliding_attention" for t in types]
    else:
        pattern = r.size("layers", "sliding_window_pattern")
        sliding = [(i + 1) % pattern != 0 for i in range(n_layers)]
    window = 0 if r.d.get("sliding_window") is None else r.size("window", "sliding_window")
    return tuple(window if s else 0 for s in sliding)


def _whole_head_rope(r: _Reader, head_dim: int) -> tuple[float, RopeScaling | None]:
    """(theta, scaling) of rotary over whole heads, as Gemma has it."""
    theta, scaling, rotary_dim = _rope(r, head_dim)
    if rotary_dim is not None or (scaling is not None and scaling.kind == "longrope"):
        raise r.fail("Gemma with partial rotary or longrope is not supported")
    return theta, scaling


def _ropes(arch: str, r: _Reader, head_dim: int) -> tuple[tuple[float, RopeScaling | None],
                                                          tuple[float, RopeScaling | None] | None]:
    """(global theta, scaling), and the local layers' (None: the same as the global ones)."""
    if arch == "Gemma2ForCausalLM":
        return _whole_head_rope(r, head_dim), None
    params = r.d.get("rope_parameters")
    if isinstance(params, dict) and {"full_attention", "sliding_attention"} & params.keys():
        # transformers 5: one rope_parameters object per layer type.
        def of(kind: str, theta_key: str) -> tuple[float, RopeScaling | None]:
            sub = params.get(kind) or {}
            if not isinstance(sub, dict):
                raise r.fail(f"'rope_parameters' {kind!r} must be an object")
            return _whole_head_rope(_Reader({"rope_parameters": sub, "rope_theta": r.d.get(theta_key)}, r.source),
                                    head_dim)

        return of("full_attention", "rope_theta"), of("sliding_attention", "rope_local_base_freq")
    # transformers 4: rope_theta and rope_scaling are the global layers'; local ones have their own base.
    return _whole_head_rope(r, head_dim), (r.float("rope_local_base_freq", 10000.0, MAX_THETA), None)


def gemma_config(arch: str, outer: _Reader) -> GemmaConfig:
    r = _text_config(arch, outer)
    if r.d.get("use_bidirectional_attention"):
        raise r.fail("bidirectional attention is not supported")
    hidden, n_heads, n_kv_heads, head_dim = attention_shape(r)
    activation = r.activation("hidden_activation", r.d.get("hidden_act") or "gelu_pytorch_tanh")
    if activation not in ("gelu_tanh", "gelu"):
        raise r.fail(f"{arch} with activation {activation!r} is not supported (GeGLU only)")
    n_layers = r.size("layers", "num_hidden_layers")
    (theta, scaling), local = _ropes(arch, r, head_dim)
    bias = r.bool("attention_bias", False)
    return GemmaConfig(
        architecture=arch, family="gemma", n_layers=n_layers, hidden=hidden,
        n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        ffn=r.size("ffn", "intermediate_size"), vocab=r.size("vocab", "vocab_size"),
        context_length=r.size("context", "max_position_embeddings"),
        norm_eps=r.float("rms_norm_eps", 1e-6, maximum=1.0), norm="rms", activation=activation, positions="rope",
        tie_embeddings=r.bool("tie_word_embeddings", True), qkv_bias=bias, o_bias=bias, mlp_bias=False,
        rope_theta=theta, rope_scaling=scaling,
        bos_id=(r.token_ids("bos_token_id") or (None,))[0], eos_ids=r.token_ids("eos_token_id"),
        layer_windows=_layer_windows(r, n_layers),
        query_scale=math.sqrt(head_dim / r.float("query_pre_attn_scalar", 256.0)),
        attn_softcap=_softcap(r, "attn_logit_softcapping"), final_softcap=_softcap(r, "final_logit_softcapping"),
        qk_norm=arch != "Gemma2ForCausalLM",
        local_rope_theta=local[0] if local else None, local_rope_scaling=local[1] if local else None)


@dataclass
class GemmaLayer(Layer):
    """Llama's fused projections (attn_norm and mlp_norm folded into them, as 1 + w), and the norms that
    stay: after attention, after the MLP, and Gemma 3's per-head Q and K norms (float32 scales, 1 + w)."""

    post_attn_norm: Norm | None = None
    post_mlp_norm: Norm | None = None
    q_norm: Norm | None = None  # (hd,) in the interleaved rotary order of the Q/K rows
    k_norm: Norm | None = None


def gemma_layer(t: dict[str, torch.Tensor | None], c: GemmaConfig, parts) -> GemmaLayer:
    """A layer from its checked HF tensors (`parts`: a weights.BackendParts)."""
    for role in ("attn_norm", "mlp_norm"):  # folded into the next projection by llama_layer
        t[role] = t[role] + 1.0

    def norm(weight: torch.Tensor | None, size: int, interleave: bool = False) -> Norm | None:
        if weight is None:
            return None
        scale = _interleave_heads(weight, 1) if interleave else weight
        wide = torch.promote_types(parts.backend.compute_dtype, torch.float32)  # float32, or float64 if wider
        placed = (scale + 1.0).to(parts.backend.device, wide).contiguous()
        return Norm("rms", c.norm_eps, size, placed)

    base = llama_layer(t, c, parts).__dict__
    own = {"q_norm": norm(t["q_norm"], c.head_dim, True), "k_norm": norm(t["k_norm"], c.head_dim, True)}
    return GemmaLayer(**{**base, **own}, post_attn_norm=norm(t["post_attn_norm"], c.hidden),
                      post_mlp_norm=norm(t["post_mlp_norm"], c.hidden))


def _rms32(norm: Norm, x: torch.Tensor) -> torch.Tensor:
    """RMSNorm with (1 + w) in float32 (or wider), rounded once to x's dtype, as transformers' Gemma norms do."""
    wide = torch.promote_types(x.dtype, torch.float32)
    return F.rms_norm(x.to(wide), (norm.size,), norm.weight.to(wide), norm.eps).to(x.dtype)


class GemmaBlock(Block):
    """Gemma 2 and 3: (1 + w) RMSNorms before and after attention and the MLP, GeGLU, soft-caps, per-layer
    windows and (Gemma 3) per-head Q/K norms and a local rotary base."""

    ACTIVATIONS = {"gelu_tanh": lambda h: F.gelu(h, approximate="tanh"), "gelu": F.gelu}

    def __init__(self, config: GemmaConfig, backend: Backend):
        super().__init__(config, backend)
        self.softcap = config.attn_softcap
        self.activation = self.ACTIVATIONS[config.activation]
        self.local_rotary = None
        if config.local_rope_theta is not None:
            local = replace(config, rope_theta=config.local_rope_theta, rope_scaling=config.local_rope_scaling)
            self.local_rotary = RotaryTable(local, backend.device)

    def embed(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor(math.sqrt(self.config.hidden), dtype=table.dtype, device=table.device)
        return table[ids] * scale  # (T, C)

    def final_logits(self, logits: torch.Tensor) -> torch.Tensor:
        cap = self.config.final_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def attend(self, qkv, index: int, start: int, cache, capture) -> torch.Tensor:
        """Block.attend; a soft-capped decode step (one query, nothing captured) reads only its window and
        scores each KV head's group of queries at once, rather than every position through the mask."""
        c = self.config
        if self.softcap is None or capture is not None or qkv.shape[0] != 1:
            return super().attend(qkv, index, start, cache, capture)
        keys, values = cache.write(index, start, qkv[:, c.q_dim:].view(1, 2, c.n_kv_heads, c.head_dim))
        window = c.window_of(index)
        if window is not None and keys.shape[1] > window:
            keys, values = keys[:, -window:], values[:, -window:]  # (KV, window, hd)
        wide = torch.promote_types(qkv.dtype, torch.float32)
        grouped = qkv[:, :c.q_dim].reshape(c.n_kv_heads, -1, c.head_dim).to(wide)  # (KV, group, hd)
        scores = grouped @ keys.to(wide).mT / math.sqrt(c.head_dim)  # (KV, group, n)
        probs = (torch.tanh(scores / self.softcap) * self.softcap).softmax(dim=-1)
        return (probs @ values.to(wide)).reshape(1, c.q_dim).to(qkv.dtype)  # (1, H * hd)

    def _rope(self, index: int, start: int, T: int, rope: torch.Tensor) -> torch.Tensor:
        """Layer `index`'s rotary table rows (T, 1, hd / 2): the local base on a windowed layer of Gemma 3."""
        if self.local_rotary is not None and self.config.window_of(index):
            return self.local_rotary(start, start + T)[:, None, :]
        return rope

    def __call__(self, x, layer: GemmaLayer, index: int, start: int, cache, rope, capture):
        c = self.config
        T = x.shape[0]
        qkv = layer.qkv.normed(x, layer.attn_norm)  # (T, q_dim + 2 kv_dim)
        if layer.q_norm is not None:
            for norm, first, heads in ((layer.q_norm, 0, c.n_heads), (layer.k_norm, c.q_dim, c.n_kv_heads)):
                part = qkv[:, first:first + heads * c.head_dim].view(T, heads, c.head_dim)  # (T, heads, hd)
                part.copy_(_rms32(norm, part))
        rotate(qkv[:, :c.q_dim + c.kv_dim], self._rope(index, start, T, rope), c.head_dim)
        if c.query_scale != 1.0:
            qkv[:, :c.q_dim].mul_(c.query_scale)
        h = layer.o(self.attend(qkv, index, start, cache, capture))  # (T, C)
        x = x + _rms32(layer.post_attn_norm, h)
        gate, up = layer.mlp_in.normed(x, layer.mlp_norm).chunk(2, dim=-1)  # (T, ffn) each
        h = layer.mlp_out(self.activation(gate).mul_(up))  # (T, C)
        return x + _rms32(layer.post_mlp_norm, h)  # (T, C)
