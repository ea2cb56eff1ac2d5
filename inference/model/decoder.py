"""The decoder, readable top to bottom: embeddings -> N x block (attention, MLP) -> final norm -> head.

One `forward(ids, start, cache)` serves both phases:
- prefill: T prompt tokens at positions start..start+T-1 in one pass; a causal mask keeps each position
  from seeing later ones, and the last row sees the whole prompt;
- decode: one new token (T = 1) that reads every cached position and adds its own K/V.

Every family's layer is one `Block`, driven by its config and its family's BlockTraits (families/registry.py):
pre-norm (RMSNorm or LayerNorm), rotary Q/K (after a per-head RMSNorm where the config has one; partial
rotary and longrope live in the rotary table, rope.py; a windowed layer's own rotary base), grouped-query
attention, and a gated MLP (activation(gate) * up) or a plain one; with `norms_after` a norm after each
branch too, and soft-capped scores and logits where the config has caps (Gemma 2 and 3). Every layer
shares `Block.attend`, whose routes are: decode (one query, the backend's `attend_one`), prefill
(many queries under the causal mask, SDPA), captured (the weights written out for the attention view;
soft-capped scores take it for many queries) and a soft-capped decode step (`capped_step`). On the own
kernels a layer whose traits say `fused_decode` (Llama, Mistral, Qwen2/3, Phi-3, Gemma 3; not soft-capped
scores) runs a decode step of every layer in one kernels call and one parallel region (`layers.decode_layers`,
csrc/step.h; a captured step, one call per layer: `layers.decode_layer`, or decode_layers over one layer for
Gemma's, the same bits); that too is decided once, at construction, and
`Decoder.decode_path` says which way a step runs. A forward of 2 to 16 rows on those families (float32 or int8)
(a verify pass, a short prompt) runs every layer in one kernels call too (`Block.rows_all`, csrc/rows.h: each row
gets the bits of its own decode step); on CUDA a decode step is a captured graph, replayed (graph_step.py). Every
route hands the residual stream between layers to a `ResidualCapture` when one is given (the logit lens), so
capturing it never leaves the fused path of one position (a pass of several rows or a graph step with a capture
runs layer by layer through torch instead).

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
import os
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

import torch
import torch.nn.functional as F

from inference.model import kernel_shape
from inference import kernels
from inference.model.config import ModelConfig
from inference.model.families import registry
from inference.model.families.parts import BlockTraits
from inference.events import STOCK_DECODE
from inference.model.graph_step import GRAPHS_ENV, CudaGraphs, GraphSteps, Replayer, graphs_refusal
from inference.model.kv_cache import KVCache, kv_bytes_per_token
from inference.model.layers import (ACTIVATION_CODES, SMALL_M_ROWS, Backend, DecodeArguments, Linear, Norm,
                                    decode_arguments, decode_layer, decode_layers, decode_rows, slot_value, weight_slots)
from inference.host import ensure_kv_fits
from inference.model.rope import LongropeCaches, RotaryTable, rotate


@dataclass
class Layer:
    attn_norm: Norm
    qkv: Linear  # (q_dim + 2 kv_dim, C): rows of Q, then K, then V
    o: Linear  # (C, q_dim)
    mlp_norm: Norm
    mlp_in: Linear  # gated: (2 ffn, C) gate rows then up rows; else (ffn, C)
    mlp_out: Linear  # (C, ffn)
    q_norm: Norm | None = None  # Qwen3, Gemma 3: RMSNorm over each Q head (hd), its weight in the rows' rotary order
    k_norm: Norm | None = None  # the same over each K head
    post_attn_norm: Norm | None = None  # norms_after: over attention's output before it joins the residual
    post_mlp_norm: Norm | None = None  # the same over the MLP's output


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


ACTIVATIONS = {"gelu_tanh": lambda h: F.gelu(h, approximate="tanh"), "gelu": F.gelu, "relu": F.relu, "silu": F.silu}


def _rms32(norm: Norm, x: torch.Tensor) -> torch.Tensor:
    """RMSNorm in float32 (or wider), rounded once to x's dtype, as transformers' Gemma norms do."""
    wide = torch.promote_types(x.dtype, torch.float32)
    return F.rms_norm(x.to(wide), (norm.size,), norm.weight.to(wide), norm.eps).to(x.dtype)


class Block:
    """One layer of any family: what its config and its family's BlockTraits say, on the backend's products."""

    def __init__(self, config: ModelConfig, backend: Backend, traits: BlockTraits):
        self.config, self.traits, self.device = config, traits, backend.device
        self.attend_one, self.kernels = backend.attend_one, backend.kernels
        self.softcap = config.attn_softcap  # scores capped as cap * tanh(s / cap): explicit attention
        self.activation = ACTIVATIONS[config.activation]
        self.local_rotary = None  # a windowed layer's own rotary base
        if config.local_rope_theta is not None:
            local = replace(config, rope_theta=config.local_rope_theta, rope_scaling=config.local_rope_scaling)
            self.local_rotary = RotaryTable(local, backend.device)
        # Whether decode_layers (csrc/step.h) computes exactly this layer for one position: the family says so, and
        # the config asks nothing the kernels lack (soft-capped scores, an activation other than silu / gelu, Q
        # scaled with no q norm to carry the scale).
        self.fuses_on_kernels = (traits.fused_decode and traits.gated_mlp and self.softcap is None
                                 and config.activation in ACTIVATION_CODES
                                 and (config.query_scale == 1.0 or config.qk_norm))
        # Gemma's layers (norms after each branch, GeGLU, windows on some layers, their own rotary base) are beyond
        # decode_layer (csrc/layer.h, one layer of Llama's kind): a step whose residual stream is captured runs
        # decode_layers over one layer at a time instead.
        self.one_layer_calls = (traits.norms_after or config.activation != "silu" or self.local_rotary is not None
                                or config.query_scale != 1.0 or bool(config.layer_windows))
        self._arguments = None  # (layers, their decode_layers arguments), gathered at the first fused step
        self._layer_arguments: dict[int, tuple[Layer, DecodeArguments]] = {}  # one_layer_calls: per layer index

    def embed(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The embedding rows of `ids`: (T, C)."""
        if not self.traits.scaled_embeddings:
            return table[ids]
        scale = torch.tensor(math.sqrt(self.config.hidden), dtype=table.dtype, device=table.device)
        return table[ids] * scale  # (T, C)

    def final_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """What the head's float logits become before anything reads them: (rows, V)."""
        cap = self.config.final_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def __call__(self, x, layer: Layer, index: int, start: int, cache: KVCache, rope, capture):
        qkv = layer.qkv.normed(x, layer.attn_norm)  # (T, q_dim + 2 kv_dim)
        if rope is not None:
            self.position(qkv, layer, index, start, rope)
        x = self.attention(x, qkv, layer, index, start, cache, capture)  # (T, C)
        return self.residual(x, layer.mlp_out, self.mlp(x, layer), layer.post_mlp_norm)  # (T, C)

    def position(self, qkv: torch.Tensor, layer: Layer, index: int, start: int, rope) -> None:
        """Q and K heads normed (where the layer has the norms), then rotary, in place (partial rotary: the
        table keeps the rest); then Q scaled where the config says."""
        c = self.config
        T = qkv.shape[0]
        if layer.q_norm is not None:
            for norm, first, heads in ((layer.q_norm, 0, c.n_heads), (layer.k_norm, c.q_dim, c.n_kv_heads)):
                part = qkv[:, first:first + heads * c.head_dim].view(T, heads, c.head_dim)  # (T, heads, hd)
                part.copy_(_rms32(norm, part) if self.traits.float32_norms else norm(part))
        if self.local_rotary is not None and c.window_of(index):
            rope = self.local_rotary(start, start + T)[:, None, :]  # (T, 1, hd / 2)
        rotate(qkv[:, :c.q_dim + c.kv_dim], rope, c.head_dim)
        if c.query_scale != 1.0:
            qkv[:, :c.q_dim].mul_(c.query_scale)

    def residual(self, x, projection: Linear, h, norm_after: Norm | None) -> torch.Tensor:
        """x + projection(h), normed first where the family norms each branch's output: (T, C)."""
        if norm_after is None:
            return projection.add_to(x, h)  # fused into one matmul call
        return x + _rms32(norm_after, projection(h))

    def mlp(self, x, layer: Layer) -> torch.Tensor:
        """The MLP before its output product: activation(gate) * up, or activation(mlp_in x). (T, ffn)"""
        if not self.traits.gated_mlp:
            return self.activation(layer.mlp_in.normed(x, layer.mlp_norm))
        if self.config.activation == "silu":
            return layer.mlp_in.normed_glu(x, layer.mlp_norm)  # one kernels call where they run
        gate, up = layer.mlp_in.normed(x, layer.mlp_norm).chunk(2, dim=-1)  # (T, ffn) each
        return self.activation(gate).mul_(up)

    def attention(self, x, qkv, layer: Layer, index: int, start: int, cache: KVCache,
                  capture: AttentionCapture | None) -> torch.Tensor:
        """x + W_o attention(Q, cached K/V), storing this call's K/V. qkv: (T, q_dim + 2 kv_dim) with Q and
        K already positioned."""
        return self.residual(x, layer.o, self.attend(qkv, index, start, cache, capture), layer.post_attn_norm)

    def attend(self, qkv, index: int, start: int, cache: KVCache, capture: AttentionCapture | None) -> torch.Tensor:
        """attention(Q, cached K/V) before W_o, storing this call's K/V: (T, q_dim)."""
        c = self.config
        T = qkv.shape[0]
        if self.softcap is not None and capture is None and T == 1:
            return self.capped_step(qkv, index, start, cache)
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

    def capped_step(self, qkv, index: int, start: int, cache: KVCache) -> torch.Tensor:
        """A soft-capped decode step (one query, nothing captured): reads only its window and scores each KV
        head's group of queries at once, rather than every position through the mask. (1, q_dim)"""
        c = self.config
        keys, values = cache.write(index, start, qkv[:, c.q_dim:].view(1, 2, c.n_kv_heads, c.head_dim))
        window = c.window_of(index)
        if window is not None and keys.shape[1] > window:
            keys, values = keys[:, -window:], values[:, -window:]  # (KV, window, hd)
        wide = torch.promote_types(qkv.dtype, torch.float32)
        grouped = qkv[:, :c.q_dim].reshape(c.n_kv_heads, -1, c.head_dim).to(wide)  # (KV, group, hd)
        scores = grouped @ keys.to(wide).mT / math.sqrt(c.head_dim)  # (KV, group, n)
        probs = (torch.tanh(scores / self.softcap) * self.softcap).softmax(dim=-1)
        return (probs @ values.to(wide)).reshape(1, c.q_dim).to(qkv.dtype)  # (1, H * hd)

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

    def windows(self, first: int, count: int) -> list[int]:
        """The windows of layers first..first+count-1 (0: every position), as decode_layers takes them."""
        return [self.config.window_of(i) or 0 for i in range(first, first + count)]

    def local_cos_sin(self, start: int, end: int) -> torch.Tensor | None:
        """cos and sin of positions start..end-1 in the windowed layers' own rotary base: (T, hd / 2, 2), or None
        where they rotate as the others do."""
        return None if self.local_rotary is None else torch.view_as_real(self.local_rotary(start, end))

    def decode_fused(self, x, layer: Layer, index: int, position: int, cache: KVCache, rope,
                     local_rope) -> torch.Tensor:
        """The same steps for one new position as one kernels call. rope, local_rope: (hd / 2, 2) cos, sin."""
        c = self.config
        if self.one_layer_calls:
            kvs = [cache.layer(index)]
            return decode_layers(self.kernels, x, self.layer_arguments(layer, index), kvs, position, rope, local_rope,
                                 c.n_heads)  # (1, C)
        return decode_layer(self.kernels, x, layer, cache.layer(index), position, rope, c.n_heads,
                            c.sliding_window or 0)  # (1, C)

    def decode_all(self, x, layers: list[Layer], position: int, cache: KVCache, rope, local_rope) -> torch.Tensor:
        """decode_fused over every layer in one kernels call."""
        kvs = cache.layers()[:len(layers)]  # a model cut after some layers (tests) has a cache of all
        return decode_layers(self.kernels, x, self.arguments(layers), kvs, position, rope, local_rope,
                             self.config.n_heads)  # (1, C)

    def rows_all(self, x, layers: list[Layer], positions: torch.Tensor, kvs, tables: torch.Tensor | None,
                 rope, local_rope) -> torch.Tensor:
        """decode_all for 2 to 16 rows: row m at positions[m] over kvs, each layer's cache (a
        verify pass: one sequence), or each layer's paged pool with the rows' block `tables` (a scheduler step).
        rope, local_rope: (M, hd / 2, 2) cos, sin of each row's position."""
        return decode_rows(self.kernels, x, self.arguments(layers), kvs, positions, tables, rope, local_rope,
                           self.config.n_heads)  # (M, C)

    def _gathered(self, layers: list[Layer], first: int) -> DecodeArguments:
        c = self.config
        return decode_arguments(layers, self.windows(first, len(layers)), c.activation, c.query_scale)

    def arguments(self, layers: list[Layer]) -> DecodeArguments:
        """decode_layers' arguments for `layers`, gathered once per list of layers and int8 path (a block lives
        until Decoder.rebind, which replaces the linears and the block; a benchmark may switch the linears' path
        in place)."""
        path = layers[0].qkv.path
        if self._arguments is None or self._arguments[0] is not layers or self._arguments[1].path != path:
            self._arguments = (layers, self._gathered(layers, 0))
        return self._arguments[1]

    def layer_arguments(self, layer: Layer, index: int) -> DecodeArguments:
        """decode_layers' arguments for layer `index` alone (one_layer_calls), gathered once per layer and path."""
        known = self._layer_arguments.get(index)
        if known is None or known[0] is not layer or known[1].path != layer.qkv.path:
            known = self._layer_arguments[index] = (layer, self._gathered([layer], index))
        return known[1]


class Decoder:
    # The most rows a forward runs in one kernels call (takes_rows); 1: none, each layer through Python (a benchmark's
    # "before": benchmarks/bench_small_m.py).
    most_fused_rows: ClassVar[int] = SMALL_M_ROWS

    def __init__(self, config: ModelConfig, weights: DecoderWeights, backend: Backend):
        self.config, self.weights, self.backend = config, weights, backend
        self.dtype, self.device = backend.dtype, backend.device
        self.kv_dtype = backend.compute_dtype  # int8 weights keep float K/V
        self.forward_count = 0  # every forward pass ever run: lets tests prove a preview ran none
        self.traits = registry.family(config.family).block
        self.block = Block(config, backend, self.traits)
        self.rotary = RotaryTable(config, self.device) if config.positions == "rope" else None
        self.longrope = LongropeCaches(self.rotary) if self.rotary is not None and self.rotary.longrope else None
        # A decode step runs each layer as one kernels call (RMSNorm, rotary, gated SiLU) where the
        # kernels run and compute exactly this family's block.
        self.fused_decode = backend.kernels is not None and self.block.fuses_on_kernels
        # prefill_dtype.py: bfloat16 copies of the layers' products for forwards of many rows (None: off)
        self.prefill_weights: DecoderWeights | None = None
        self.prefill_min_rows = 0  # forwards of at least this many rows read them
        # Decode steps captured once per cache and size class and replayed (graph_step.py): on CUDA unless
        # TOKENSTEP_CUDA_GRAPHS=0 or the family's layers take routes a graph cannot (graphs_refusal).
        self.graphs: GraphSteps | None = None
        if self.device.type == "cuda" and os.environ.get(GRAPHS_ENV, "1") != "0":
            self.use_graphs(CudaGraphs())

    def use_graphs(self, replayer: Replayer | None) -> str | None:
        """Decode steps through `replayer` from the next step on (None: eager steps); returns why not when this
        decoder's steps cannot be captured (and leaves them eager)."""
        refusal = graphs_refusal(self) if replayer is not None else None
        self.graphs = GraphSteps(self, replayer) if replayer is not None and refusal is None else None
        return refusal

    @property
    def decode_path(self) -> str:
        """How a decode step runs: each layer one kernels call, each product on the kernels, or stock ops
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
        notes = [self.weights.layers[0].qkv.describe() if self.weights.layers else "", self.weights.lm_head.describe()]
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
        self.backend, self.block = backend, Block(self.config, backend, self.traits)
        self.fused_decode = backend.kernels is not None and self.block.fuses_on_kernels
        if self.graphs is not None:  # captured around the old linears: captured again
            self.use_graphs(self.graphs.replayer)

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
        if ids.shape[0] == 1 and capture is None and residuals is None and self.graphs is not None:
            logits = self.graphs.step(ids, start, cache)  # a captured step, replayed (graph_step.py)
            cache.length = end
            return logits  # (1, V)
        x = self.block.embed(w.embed, ids)  # (T, C)
        if w.pos_embed is not None:
            x = x + w.pos_embed[start:end]  # (T, C)
        if ids.shape[0] == 1 and capture is None and self.fused_decode:
            cos_sin = torch.view_as_real(self.rotary(start, end))[0]  # (hd/2, 2)
            local = self.block.local_cos_sin(start, end)
            local = None if local is None else local[0]
            if residuals is None:  # every layer in one call
                x = self.block.decode_all(x, w.layers, start, cache, cos_sin, local)  # (1, C)
            else:  # layer by layer, each one's output recorded
                for index, layer in enumerate(w.layers):
                    x = self.block.decode_fused(x, layer, index, start, cache, cos_sin, local)  # (1, C)
                    residuals.record(index, x)
        elif self.takes_rows(ids.shape[0]) and capture is None and residuals is None:  # every layer in one call
            rows = ids.shape[0]
            positions = torch.arange(start, start + rows)
            cos_sin = torch.view_as_real(self.rotary(start, start + rows))  # (rows, hd/2, 2)
            x = self.block.rows_all(x, w.layers, positions, cache.layers()[:len(w.layers)], None, cos_sin,
                                    self.block.local_cos_sin(start, start + rows))  # (T, C)
        else:
            rope = self.rotary(start, end)[:, None, :] if self.rotary is not None else None  # (T, 1, hd/2)
            for index, layer in enumerate(self.layers_for(ids.shape[0])):
                x = self.block(x, layer, index, start, cache, rope, capture)  # (T, C)
                if residuals is not None:
                    residuals.record(index, x)
        cache.length = end
        x = x[-T:] if all_logits else x[-1:]  # (T or 1, C): the rows asked for (the last one predicts the next)
        return self.head_logits(x)  # (T or 1, V)

    def takes_rows(self, rows: int) -> bool:
        """Whether a forward of `rows` (2 to 16) rows runs every layer in one kernels call (csrc/rows.h): the
        fused decode's families, float32 or int8 weights, not the bfloat16 copies of long prefills."""
        return (self.fused_decode and 1 < rows <= self.most_fused_rows
                and self.layers_for(rows) is self.weights.layers)

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
