"""The decoder, readable top to bottom: embeddings -> N x block (attention, MLP) -> final norm -> head.

One `forward(ids, start, cache)` serves both phases:
- prefill: T prompt tokens at positions start..start+T-1 in one pass; a causal mask keeps each position
  from seeing later ones, and the last row sees the whole prompt;
- decode: one new token (T = 1) that reads every cached position and adds its own K/V.

Each family has its block, chosen once when the decoder is built (`BLOCKS`): `LlamaBlock` (Llama, Mistral,
Qwen2, Phi-3: RMSNorm, rotary Q/K, grouped-query attention, gated SiLU MLP; Phi-3's partial rotary and
longrope live in its rotary table, rope.py), `QKNormBlock` (Qwen3: the same with an RMSNorm over each Q
and K head before rotary) and `GPT2Block` (LayerNorm, learned positions, GELU MLP). A family with
soft-capped scores or per-layer windows gets a block of its own (Gemma 2 and 3: gemma.py). Every block
shares `Block.attention`, whose three routes are: decode (one query, the backend's `attend_one`), prefill
(many queries under the causal mask, SDPA) and captured (the weights written out for the attention view;
soft-capped scores always take it). On the own kernels a Llama-style decode step runs every layer in one
kernels.cpp call and one parallel region (`layers.decode_layers`, kernels_step.cpp; a captured step, one
call per layer: `layers.decode_layer`, the same bits); that too is decided once, at construction, and
`Decoder.decode_path` says which way a step runs. Every route hands the residual stream between layers
to a `ResidualCapture` when one is given (the logit lens), so capturing it never leaves the fused path.

How a product runs (stock torch, the own CPU kernels, CUDA; float or int8) is the backend's business
(layers.py, quant.py): here every projection is a call. Weights are laid out for speed when loaded
(weights.py): Q/K/V fused into one matrix, gate/up fused into one, and each pre-norm's scale folded into
the projection after it. Q and K rows of each head are stored in interleaved (even, odd) order, so rotary
embedding is one complex multiply; attention scores q.k are unchanged by that shared reordering.
Shapes: T = tokens in this call, n = positions in the cache after it, C = hidden, V = vocab, H = query
heads, KV = key/value heads, hd = head_dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from inference.model import kernel_shape
from inference import kernels
from inference.model.config import ModelConfig
from inference.events import STOCK_DECODE
from inference.model.kv_cache import KVCache, kv_bytes_per_token
from inference.model.layers import Backend, Linear, Norm, decode_arguments, decode_layer, decode_layers, slot_value, weight_slots
from inference.host import ensure_kv_fits
from inference.model.rope import LongropeCaches, RotaryTable, rotate
from inference.model.quant import describe_int8_path


@dataclass
class Layer:
    attn_norm: Norm
    qkv: Linear  # (q_dim + 2 kv_dim, C): rows of Q, then K, then V
    o: Linear  # (C, q_dim)
    mlp_norm: Norm
    mlp_in: Linear  # gated: (2 ffn, C) gate rows then up rows; else (ffn, C)
    mlp_out: Linear  # (C, ffn)
    q_norm: Norm | None = None  # Qwen3: RMSNorm over each Q head (hd), its weight in the rows' rotary order
    k_norm: Norm | None = None  # the same over each K head


@dataclass
class DecoderWeights:
    embed: torch.Tensor  # (V, C)
    pos_embed: torch.Tensor | None  # (context, C) for learned positions
    layers: list[Layer]
    final_norm: Norm
    lm_head: Linear  # (V, C); shares `embed` when tied. Anything with `logits(x, final_norm)`.

    def linears(self) -> list[Linear]:
        return [lin for layer in self.layers for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)] + \
            [self.lm_head]

    def tensors(self) -> list[torch.Tensor]:
        """Every distinct runtime tensor once (shared ones counted once)."""
        seen: dict[int, torch.Tensor] = {}
        for t in (slot_value(owner, key) for owner, key in weight_slots(self)):
            seen.setdefault(id(t), t)
        return list(seen.values())


class AttentionCapture(Protocol):
    def record(self, layer: int, probs: torch.Tensor) -> None:
        """probs: (heads, T, n) attention weights of this call's queries over all cached positions."""


class ResidualCapture(Protocol):
    def record(self, layer: int, x: torch.Tensor) -> None:
        """x: (T, C) the residual stream after layer `layer`, on any route (the fused decode one too); the
        logit lens (lens.py) reads it through the final norm and the head (`Decoder.head_logits`)."""


def causal_mask(T: int, start: int, n: int, window: int | None, device: torch.device) -> torch.Tensor:
    """(T, n) True where query position start+i may see key position j."""
    q_pos = torch.arange(start, start + T, device=device)[:, None]  # (T, 1)
    k_pos = torch.arange(n, device=device)[None, :]  # (1, n)
    allowed = k_pos <= q_pos
    if window is not None:
        allowed &= k_pos > q_pos - window
    return allowed  # (T, n)


class Block:
    """What every family's layer shares: attention over the KV cache, by one of three routes."""

    fuses_on_kernels = False  # whether layers.decode_layer computes exactly this block for one position
    softcap: float | None = None  # scores capped as cap * tanh(s / cap): explicit attention on every route

    def __init__(self, config: ModelConfig, backend: Backend):
        self.config, self.device = config, backend.device
        self.attend_one, self.kernels = backend.attend_one, backend.kernels
        self._arguments = None  # (layers, their decode_layers arguments), gathered at the first fused step

    def embed(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The embedding rows of `ids`: (T, C)."""
        return table[ids]

    def final_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """What the head's float logits become before anything reads them: (rows, V)."""
        return logits

    def attention(self, x, qkv, layer: Layer, index: int, start: int, cache: KVCache,
                  capture: AttentionCapture | None) -> torch.Tensor:
        """x + W_o attention(Q, cached K/V), storing this call's K/V. qkv: (T, q_dim + 2 kv_dim) with Q and
        K already positioned."""
        return layer.o.add_to(x, self.attend(qkv, index, start, cache, capture))  # (T, C)

    def attend(self, qkv, index: int, start: int, cache: KVCache, capture: AttentionCapture | None) -> torch.Tensor:
        """attention(Q, cached K/V) before W_o, storing this call's K/V: (T, q_dim)."""
        c = self.config
        T = qkv.shape[0]
        q = qkv[:, :c.q_dim].view(T, c.n_heads, c.head_dim)  # (T, H, hd)
        kv = qkv[:, c.q_dim:].view(T, 2, c.n_kv_heads, c.head_dim)  # (T, 2, KV, hd)
        keys, values = cache.write(index, start, kv)  # (KV, n, hd) each
        window = c.window_of(index)
        if capture is not None or self.softcap is not None:
            out = self.captured(q, keys, values, start, window, index, capture)
        elif T == 1:  # decode: one query per head, no mask (it may see every position in its window)
            if window is not None and keys.shape[1] > window:
                keys, values = keys[:, -window:], values[:, -window:]  # (KV, window, hd)
            out = self.attend_one(q, keys, values)  # (1, H * hd)
        else:
            out = self.prefill(q, keys, values, start, window)
        return out  # (T, q_dim)

    def prefill(self, q, keys, values, start: int, window: int | None) -> torch.Tensor:
        """T queries at once under the causal mask. (T, H * hd)"""
        c = self.config
        T, n = q.shape[0], keys.shape[1]
        # A batch dimension of 1: on CPU only 4-D inputs reach the flash kernel (3-D ones take the
        # generic path, measured 4x slower at 512 tokens).
        queries, keys, values = q.transpose(0, 1)[None], keys[None], values[None]  # (1, H or KV, T or n, hd)
        gqa = c.n_heads != c.n_kv_heads
        if start == 0 and (window is None or n <= window):
            out = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=gqa)
        else:
            mask = causal_mask(T, start, n, window, self.device)
            out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, enable_gqa=gqa)
        return out[0].transpose(0, 1).reshape(T, c.q_dim)  # (T, H * hd)

    def captured(self, q, keys, values, start: int, window: int | None, index: int,
                 capture: AttentionCapture | None) -> torch.Tensor:
        """The same attention in float32 with its weights written out (when captured), for the attention
        view; with soft-capped scores, every call's."""
        c = self.config
        T, n = q.shape[0], keys.shape[1]
        group = c.n_heads // c.n_kv_heads
        queries = q.transpose(0, 1).float()  # (H, T, hd)
        k = keys.float().repeat_interleave(group, dim=0)  # (H, n, hd)
        v = values.float().repeat_interleave(group, dim=0)  # (H, n, hd)
        scores = queries @ k.transpose(1, 2) / math.sqrt(c.head_dim)  # (H, T, n)
        if self.softcap is not None:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        scores = scores.masked_fill(~causal_mask(T, start, n, window, self.device), float("-inf"))
        probs = scores.softmax(dim=-1)  # (H, T, n)
        if capture is not None:
            capture.record(index, probs)
        out = probs @ v  # (H, T, hd)
        return out.transpose(0, 1).reshape(T, c.q_dim).to(q.dtype)  # (T, H * hd)


class LlamaBlock(Block):
    """Llama, Mistral, Qwen2: pre-RMSNorm, rotary Q/K, grouped-query attention, gated SiLU MLP."""

    fuses_on_kernels = True

    def __call__(self, x, layer: Layer, index: int, start: int, cache: KVCache, rope, capture):
        qkv = layer.qkv.normed(x, layer.attn_norm)  # (T, q_dim + 2 kv_dim)
        self.position(qkv, layer, rope)
        x = self.attention(x, qkv, layer, index, start, cache, capture)  # (T, C)
        return layer.mlp_out.add_to(x, layer.mlp_in.normed_glu(x, layer.mlp_norm))  # (T, C)

    def position(self, qkv: torch.Tensor, layer: Layer, rope) -> None:
        """Rotary on the Q and K rows of qkv, in place (partial rotary: the table keeps the rest)."""
        c = self.config
        rotate(qkv[:, :c.q_dim + c.kv_dim], rope, c.head_dim)

    def decode_fused(self, x, layer: Layer, index: int, position: int, cache: KVCache, rope) -> torch.Tensor:
        """The same steps for one new position as one kernels.cpp call. rope: (hd / 2, 2) cos, sin."""
        c = self.config
        return decode_layer(self.kernels, x, layer, cache.layer(index), position, rope, c.n_heads,
                            c.sliding_window or 0)  # (1, C)

    def decode_all(self, x, layers: list[Layer], position: int, cache: KVCache, rope) -> torch.Tensor:
        """decode_fused over every layer in one kernels.cpp call. The layers' arguments are gathered once per
        list of layers and int8 path (a block lives until Decoder.rebind, which replaces the linears and the block;
        a benchmark may switch the linears' path in place)."""
        c = self.config
        path = getattr(layers[0].qkv, "path", 0)
        if self._arguments is None or self._arguments[0] is not layers or self._arguments[1][-1] != path:
            self._arguments = (layers, decode_arguments(layers))
        kvs = cache.layers()[:len(layers)]  # a model cut after some layers (tests) has a cache of all
        return decode_layers(self.kernels, x, self._arguments[1], kvs, position, rope, c.n_heads,
                             c.sliding_window or 0)  # (1, C)


class QKNormBlock(LlamaBlock):
    """Qwen3: a Llama block whose Q and K heads each pass an RMSNorm (over hd) before rotary; the fused
    decode layer takes the two norms too (layers.decode_layer)."""

    def position(self, qkv: torch.Tensor, layer: Layer, rope) -> None:
        c = self.config
        T = qkv.shape[0]
        q = qkv[:, :c.q_dim].view(T, c.n_heads, c.head_dim)  # (T, H, hd), a view into qkv
        k = qkv[:, c.q_dim:c.q_dim + c.kv_dim].view(T, c.n_kv_heads, c.head_dim)  # (T, KV, hd)
        q.copy_(layer.q_norm(q))
        k.copy_(layer.k_norm(k))
        super().position(qkv, layer, rope)


class GPT2Block(Block):
    """GPT-2: pre-LayerNorm, positions already added to the embeddings, a plain GELU MLP."""

    ACTIVATIONS = {"gelu_tanh": lambda h: F.gelu(h, approximate="tanh"), "gelu": F.gelu, "relu": F.relu,
                   "silu": F.silu}

    def __init__(self, config: ModelConfig, backend: Backend):
        super().__init__(config, backend)
        self.activation = self.ACTIVATIONS[config.activation]

    def __call__(self, x, layer: Layer, index: int, start: int, cache: KVCache, rope, capture):
        qkv = layer.qkv.normed(x, layer.attn_norm)  # (T, 3 C)
        x = self.attention(x, qkv, layer, index, start, cache, capture)  # (T, C)
        h = self.activation(layer.mlp_in.normed(x, layer.mlp_norm))  # (T, ffn)
        return layer.mlp_out.add_to(x, h)  # (T, C)


def _gemma_block(config: ModelConfig, backend: Backend) -> Block:
    from inference.model.families.gemma import GemmaBlock  # gemma.py builds on Block, so it is imported when first asked for

    return GemmaBlock(config, backend)


BLOCKS = {"llama": LlamaBlock, "gpt2": GPT2Block, "qwen3": QKNormBlock, "phi3": LlamaBlock,
          "gemma": _gemma_block}  # config.family -> its block


class Decoder:
    def __init__(self, config: ModelConfig, weights: DecoderWeights, backend: Backend):
        self.config, self.weights, self.backend = config, weights, backend
        self.dtype, self.device = backend.dtype, backend.device
        self.kv_dtype = backend.compute_dtype  # int8 weights keep float K/V
        self.forward_count = 0  # every forward pass ever run: lets tests prove a preview ran none
        self.block = BLOCKS[config.family](config, backend)
        self.rotary = RotaryTable(config, self.device) if config.positions == "rope" else None
        self.longrope = LongropeCaches(self.rotary) if self.rotary is not None and self.rotary.longrope else None
        # A decode step runs each layer as one kernels.cpp call (RMSNorm, rotary, gated SiLU) where the
        # kernels run and compute exactly this family's block.
        self.fused_decode = backend.kernels is not None and self.block.fuses_on_kernels
        # prefill_dtype.py: bfloat16 copies of the layers' products for forwards of many rows (None: off)
        self.prefill_weights: DecoderWeights | None = None
        self.prefill_min_rows = 0  # forwards of at least this many rows read them

    @property
    def decode_path(self) -> str:
        """How a decode step runs: each layer one kernels.cpp call, each product on the kernels, or stock ops
        (saying why where the kernels should have run: "stock PyTorch ops: the kernels did not build (…)")."""
        shape = f", {kernel_shape.describe(self.backend)}" if self.backend.kernels is not None else ""
        if self.fused_decode:
            return f"fused kernels{shape}"
        if self.backend.kernels is not None:
            return f"kernels per product{shape}"
        failure = kernels.build_failure() if self.device.type == "cpu" else None
        return f"{STOCK_DECODE}: {failure}" if failure else STOCK_DECODE

    @property
    def int8_notes(self) -> str:
        """What an int8 model's products and head do, for its status line ("int8 products on int16 activations;
        head ranks in 4 bits, best 256 rescored in float"); '' for float models."""
        notes = [describe_int8_path(getattr(self.weights.layers[0].qkv, "path", 0)) if self.weights.layers else "",
                 getattr(self.weights.lm_head, "describe", lambda: "")()]
        return "; ".join(note for note in notes if note)

    def rebind(self, backend: Backend) -> None:
        """Run on `backend` from the next forward on: each float linear rebuilt in its class around the same
        tensors (views into the packed block: the fingerprint, the memory and every KV cache stay as they
        are), the block and the decode route chosen again. Float weights only (int8 is quantised per
        backend); call it between forwards."""
        if not (self.dtype.is_floating_point and backend.dtype == self.dtype and backend.device == self.device):
            raise ValueError(f"cannot rebind {self.dtype} weights on {self.device} to {backend.name}")
        w = self.weights
        for layer in w.layers:
            for role in ("qkv", "o", "mlp_in", "mlp_out"):
                old = getattr(layer, role)
                setattr(layer, role, backend.linear(old.weight, old.bias))
        w.lm_head = backend.linear(w.lm_head.weight, w.lm_head.bias)
        self.backend, self.block = backend, BLOCKS[self.config.family](self.config, backend)
        self.fused_decode = backend.kernels is not None and self.block.fuses_on_kernels

    def new_cache(self, capacity: int) -> KVCache:
        c = self.config
        if self.device.type == "cpu":  # refused in one line before zeros of that size are asked for
            ensure_kv_fits(self.kv_bytes_per_token, min(capacity, c.context_length))
        return KVCache(c.n_layers, c.n_kv_heads, c.head_dim, min(capacity, c.context_length),
                       c.context_length, self.kv_dtype, self.device)

    @property
    def kv_bytes_per_token(self) -> int:
        c = self.config
        return kv_bytes_per_token(c.n_layers, c.n_kv_heads, c.head_dim, self.kv_dtype.itemsize)

    def forward(self, ids: torch.Tensor, start: int, cache: KVCache, *, all_logits: bool = False,
                capture: AttentionCapture | None = None, residuals: ResidualCapture | None = None) -> torch.Tensor:
        """ids: (T,) tokens at positions start..start+T-1. Returns float logits (T or 1, V)."""
        c, w = self.config, self.weights
        T = ids.shape[0]
        end = start + T
        if end > c.context_length:
            raise ValueError(f"position {end - 1} is outside the context window of {c.context_length}")
        cache.reserve(end)
        if self.longrope is not None:  # crossing longrope's original context: the whole sequence again
            ids, start = self.longrope.widen(cache, ids, start)
            if ids.shape[0] > T:
                capture, residuals = _LastRows.of(capture, T), _LastRows.of(residuals, T)
        self.forward_count += 1
        x = self.block.embed(w.embed, ids)  # (T, C)
        if w.pos_embed is not None:
            x = x + w.pos_embed[start:end]  # (T, C)
        if ids.shape[0] == 1 and capture is None and self.fused_decode:
            cos_sin = torch.view_as_real(self.rotary(start, end))[0]  # (hd/2, 2)
            if residuals is None:  # every layer in one call
                x = self.block.decode_all(x, w.layers, start, cache, cos_sin)  # (1, C)
            else:  # layer by layer, each one's output recorded
                for index, layer in enumerate(w.layers):
                    x = self.block.decode_fused(x, layer, index, start, cache, cos_sin)  # (1, C)
                    residuals.record(index, x)
        else:
            rope = self.rotary(start, end)[:, None, :] if self.rotary is not None else None  # (T, 1, hd/2)
            for index, layer in enumerate(self.layers_for(ids.shape[0])):
                x = self.block(x, layer, index, start, cache, rope, capture)  # (T, C)
                if residuals is not None:
                    residuals.record(index, x)
        cache.length = end
        x = x[-T:] if all_logits else x[-1:]  # (T or 1, C): the rows asked for (the last one predicts the next)
        return self.head_logits(x)  # (T or 1, V)

    def layers_for(self, rows: int) -> list[Layer]:
        """The layers a forward of `rows` rows runs: bfloat16 products for a long one where attached."""
        if self.prefill_weights is not None and rows >= self.prefill_min_rows:
            return self.prefill_weights.layers
        return self.weights.layers

    def head_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Rows of the residual stream through the final norm and the head: float logits (rows, V)."""
        w = self.weights
        return self.block.final_logits(w.lm_head.logits(x, w.final_norm).float())


class _LastRows:
    """A capture that passes on only the last `n` rows (query positions) of what it is given: what the
    caller asked for when a longrope crossing widened the call to the whole sequence."""

    def __init__(self, capture, n: int):
        self.capture, self.n = capture, n

    @classmethod
    def of(cls, capture, n: int):
        return None if capture is None else cls(capture, n)

    def record(self, layer: int, t: torch.Tensor) -> None:
        self.capture.record(layer, t[..., -self.n:, :])  # probs (H, T, n) or residual (T, C)
