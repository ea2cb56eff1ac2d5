"""The decoder, readable top to bottom: embeddings -> N x (attention, MLP) -> final norm -> lm head.

One `forward(ids, start, cache)` serves both phases:
- prefill: T prompt tokens at positions start..start+T-1 in one pass; a causal mask keeps each position
  from seeing later ones, and the last row sees the whole prompt;
- decode: one new token (T = 1) that reads every cached position and adds its own K/V.

Weights are laid out for speed when loaded (see `weights.py`): Q/K/V fused into one matrix, gate/up
fused into one, and each pre-norm's scale folded into the projection after it. Q and K rows of each head
are stored in interleaved (even, odd) order, so rotary embedding is one complex multiply; attention
scores q.k are unchanged by that shared reordering of head dimensions.
Decode on CPU reads every weight once per token, so its one-row products go to the kernels of
kernels.cpp where they can be built (float32 and int8 weights, float32 activations), else to bmm over
row blocks (float32); prefill's many rows go to the BLAS GEMM as usual. int8 matrices (a scale per group
of weights in a row) take short prefills on the kernels too; longer ones dequantise the matrix to float32
first. Without the kernels, int8 on CPU has one scale per row and runs on torch's int8 kernel.
Shapes: T = tokens in this call, n = positions in the cache after it, C = hidden, V = vocab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F

from . import kernels as decode_kernels
from .config import ModelConfig
from .kv_cache import KVCache, kv_bytes_per_token


# int8 products of up to this many rows run on kernels.cpp; longer ones dequantise the matrix for BLAS.
# Measured (default model, 2 threads): prefill of 16 tokens 25 ms on the kernels vs 38 ms dequantised,
# 32 tokens 60 vs 51 ms.
KERNEL_ROWS = 16


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q (out, in) int8 times its scales (out, groups), as float32 (out, in), with stock ops."""
    out, size = q.shape
    return (q.reshape(out, scale.shape[1], -1).float() * scale.float()[:, :, None]).reshape(out, size)


@dataclass
class Linear:
    """y = alpha * (x @ weight.T) + bias; int8 weights carry a scale per group of each row's weights."""

    weight: torch.Tensor  # (out, in): float, or int8 when `scale` is set
    bias: torch.Tensor | None = None  # (out,)
    # bfloat16 int8 dequantisation scales: (out, groups) for kernels.cpp or dequantising, (out,) for
    # torch's int8 kernel (weights.py chooses)
    scale: torch.Tensor | None = None
    # Derived at load by `split_rows` for one-row products on CPU; views or constants, not weights.
    row_blocks: torch.Tensor | None = field(default=None, metadata={"derived": True})  # (P, out / P, in)
    row_bias: torch.Tensor | None = field(default=None, metadata={"derived": True})  # (P, out / P, 1) or ()
    kernels: object | None = field(default=None, metadata={"derived": True})  # torch.ops.tokenstep

    def split_rows(self, parts: int) -> None:
        """Give one-row products `parts` row blocks, which bmm runs on parallel threads.

        A (1, in) x (in, out) product goes to a BLAS GEMV that uses one thread on CPU and reaches about a
        third of the memory bandwidth (measured); bmm over row blocks streams the matrix on every thread.
        """
        out = self.weight.shape[0]
        # Only float32: bf16 bmm over blocks measured 1.8x slower than bf16 F.linear, which is threaded.
        if self.weight.dtype != torch.float32 or parts < 2 or out % parts:
            return
        self.row_blocks = self.weight.view(parts, out // parts, -1)
        self.row_bias = (self.weight.new_zeros(()) if self.bias is None
                         else self.bias.view(parts, out // parts, 1))

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        if self._on_kernels(x):
            return self._kernel(x, alpha)
        if self._on_stock_int8(x):
            y = self._stock_int8(x)
            y = y if alpha == 1.0 else y.mul_(alpha)
            return y if self.bias is None else y.add_(self.bias)
        if self.row_blocks is not None and x.shape[0] == 1:
            return torch.baddbmm(self.row_bias, self.row_blocks, self._column(x), alpha=alpha).view(1, -1)
        weight = self._float_weight()
        if alpha != 1.0:
            return torch.addmm(self.bias, x, weight.t(), alpha=alpha) if self.bias is not None \
                else torch.mm(x, weight.t()).mul_(alpha)
        return F.linear(x, weight, self.bias)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """residual + self(x), fused into one matmul call."""
        if self._on_kernels(x):
            return self._kernel(x, 1.0, residual)
        if self._on_stock_int8(x):
            y = self._stock_int8(x)
            return residual + (y if self.bias is None else y.add_(self.bias))  # the residual stays float32
        if self.bias is not None:
            residual = residual + self.bias
        if self.row_blocks is not None and x.shape[0] == 1:
            blocked = residual.view(self.row_blocks.shape[0], -1, 1)  # (P, out / P, 1)
            return torch.baddbmm(blocked, self.row_blocks, self._column(x)).view(1, -1)
        return torch.addmm(residual, x, self._float_weight().t())  # (T, out)

    def normed(self, x: torch.Tensor, norm: Norm, glu: bool = False) -> torch.Tensor:
        """self(norm(x)); with `glu`, silu(gate) * up of that product's two halves (`fuses_glu`).

        On the kernels an RMSNorm is one more pass over x inside the same call (its weight folded into
        this matrix, or applied to x there)."""
        if self.fuses_norm(x, norm):
            return self._kernel(x, 1.0, rms_eps=norm.eps, glu=glu, norm_weight=norm.weight)
        if glu:
            raise ValueError("a fused gated product needs the kernels and one row (see fuses_glu)")
        h, gain = norm.with_gain(x)  # (T, C), norm(x) = gain * h
        return self(h, gain)

    def fuses_glu(self, x: torch.Tensor, norm: Norm) -> bool:
        """Whether `normed(x, norm, glu=True)` runs here: on the kernels, for one row."""
        return self.fuses_norm(x, norm) and x.shape[0] == 1

    def fuses_norm(self, x: torch.Tensor, norm: Norm) -> bool:
        """Whether `normed(x, norm)` applies the norm inside the kernel's product."""
        return self._on_kernels(x) and norm.kind == "rms"  # kernels run float32 / int8 models: float32 norms

    def _on_kernels(self, x: torch.Tensor) -> bool:
        rows = x.shape[0]
        return self.kernels is not None and (rows == 1 or (self.scale is not None and rows <= KERNEL_ROWS))

    def _on_stock_int8(self, x: torch.Tensor) -> bool:
        """Scales shaped (out,): one per row, for torch's own int8 kernel (CPU without kernels.cpp)."""
        return self.scale is not None and self.scale.dim() == 1

    def _stock_int8(self, x: torch.Tensor) -> torch.Tensor:
        """x @ (q * scale).T as float32: the stock kernel is fast only with bfloat16 activations and
        scales (measured 8x slower with float32 ones)."""
        return torch._weight_int8pack_mm(x.to(torch.bfloat16), self.weight, self.scale).float()

    def _float_weight(self) -> torch.Tensor:
        """The matrix in float: int8 ones dequantised for this product (a transient (out, in) float32)."""
        if self.scale is None:
            return self.weight
        if self.kernels is not None:
            return self.kernels.dequantize_int8(self.weight, self.scale)
        return dequantize(self.weight, self.scale)

    def _kernel(self, x: torch.Tensor, alpha: float, residual: torch.Tensor | None = None,
                rms_eps: float = -1.0, glu: bool = False,
                norm_weight: torch.Tensor | None = None) -> torch.Tensor:
        """(T, out), or (1, out / 2) with glu; rms_eps >= 0 scales each row of x by 1 / rms first (and
        by norm_weight per column)."""
        x = x if x.is_contiguous() else x.contiguous()
        if residual is not None and not residual.is_contiguous():
            residual = residual.contiguous()
        if self.scale is None:
            return self.kernels.gemv_f32(self.weight, x, alpha, self.bias, residual, rms_eps, glu, norm_weight)
        return self.kernels.gemv_int8(self.weight, self.scale, x, alpha, self.bias, residual, rms_eps, glu,
                                      norm_weight)

    def _column(self, x: torch.Tensor) -> torch.Tensor:
        # Strides (0, 1, in) take bmm to its batched BLAS call, one block per thread; an (in, 1) column
        # with strides (.., 1, 1) falls back to a serial loop (measured 4x slower).
        x = x if x.is_contiguous() else x.contiguous()
        return x.as_strided((self.row_blocks.shape[0], x.shape[1], 1), (0, 1, x.shape[1]))  # (P, in, 1)


@dataclass
class Norm:
    """RMSNorm or LayerNorm. weight/bias are None when folded into the next projection."""

    kind: str  # "rms" or "layer"
    eps: float
    size: int
    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "rms":
            return F.rms_norm(x, (self.size,), self.weight, self.eps)
        return F.layer_norm(x, (self.size,), self.weight, self.bias, self.eps)

    def with_gain(self, x: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(h, g) with norm(x) = g * h, for the next projection to apply g as its matmul alpha.

        An RMSNorm of one row on CPU is x (times its weight, unless folded) times 1/rms: one reduction and
        a host read (free on CPU) replace the five small ops of the norm. Elsewhere (prefill, CUDA,
        LayerNorm) g is 1.
        """
        if self.kind == "rms" and x.shape[0] == 1 and x.device.type == "cpu":
            norm = torch.linalg.vector_norm(x, dtype=torch.promote_types(x.dtype, torch.float32))
            mean_square = float(norm) ** 2 / self.size
            gain = 1.0 / math.sqrt(mean_square + self.eps)
            return (x, gain) if self.weight is None else (x * self.weight, gain)  # (1, C)
        return self(x), 1.0


@dataclass
class Layer:
    attn_norm: Norm
    qkv: Linear  # (q_dim + 2 kv_dim, C): rows of Q, then K, then V
    o: Linear  # (C, q_dim)
    mlp_norm: Norm
    mlp_in: Linear  # gated: (2 ffn, C) gate rows then up rows; else (ffn, C)
    mlp_out: Linear  # (C, ffn)


@dataclass
class DecoderWeights:
    embed: torch.Tensor  # (V, C)
    pos_embed: torch.Tensor | None  # (context, C) for learned positions
    layers: list[Layer]
    final_norm: Norm
    lm_head: Linear  # (V, C); shares `embed` when tied
    head_rows: torch.Tensor | None = None  # (V, C) float rows of an int8 head, to rescore its top tokens

    def linears(self) -> list[Linear]:
        return [lin for layer in self.layers for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)] + \
            [self.lm_head]

    def tensors(self) -> list[torch.Tensor]:
        """Every distinct runtime tensor once (shared ones counted once)."""
        seen: dict[int, torch.Tensor] = {}
        for t in (slot_value(owner, key) for owner, key in weight_slots(self)):
            seen.setdefault(id(t), t)
        return list(seen.values())


def weight_slots(obj):
    """(owner, key) of every tensor slot under obj: dataclass fields (not derived ones) and list items,
    depth first in field order. `slot_value` reads one; weights.pack rebinds them."""
    items = enumerate(obj) if isinstance(obj, list) else (
        (name, getattr(obj, name)) for name, f in obj.__dataclass_fields__.items() if not f.metadata.get("derived"))
    for key, value in items:
        if isinstance(value, torch.Tensor):
            yield obj, key
        elif isinstance(value, list) or hasattr(value, "__dataclass_fields__"):
            yield from weight_slots(value)


def slot_value(owner, key):
    return owner[key] if isinstance(owner, list) else getattr(owner, key)


class AttentionCapture(Protocol):
    def record(self, layer: int, probs: torch.Tensor) -> None:
        """probs: (heads, T, n) attention weights of this call's queries over all cached positions."""


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    """Rotary frequencies per pair of head dimensions (float32, as transformers computes them)."""
    dim = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    s = config.rope_scaling
    if s is None:
        return inv_freq
    if s.kind == "linear":
        return inv_freq / s.factor
    # llama3: long wavelengths slowed by `factor`, short ones kept, a smooth blend between.
    low_freq_wavelen = s.original_context / s.low_freq_factor
    high_freq_wavelen = s.original_context / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (s.original_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


RESCORED = 64  # tokens an int8 head rescores in float


class Decoder:
    def __init__(self, config: ModelConfig, weights: DecoderWeights, dtype: torch.dtype,
                 device: torch.device):
        self.config, self.weights = config, weights
        self.dtype, self.device = dtype, torch.device(device)
        self.kv_dtype = dtype if dtype.is_floating_point else torch.float32  # int8 weights keep float K/V
        self._rope_table = torch.empty(0, config.head_dim // 2, dtype=torch.complex64, device=self.device)
        self.forward_count = 0  # every forward pass ever run: lets tests prove a preview ran none
        self._zero = torch.zeros((), dtype=self.kv_dtype, device=self.device)  # a baddbmm input to ignore
        self.kernels = None  # kernels.cpp's ops where they run (CPU, float32 or int8 weights)
        if self.device.type == "cpu":
            kernels = self.kernels = decode_kernels.ops() if dtype in (torch.float32, torch.int8) else None
            for linear in weights.linears():
                if kernels is not None:
                    linear.kernels = kernels
                else:
                    linear.split_rows(torch.get_num_threads())

    def _fuses_layers(self) -> bool:
        """Whether a decode step runs each layer as one kernels.cpp call (RMSNorm, rotary, gated SiLU)."""
        c = self.config
        return (self.kernels is not None and c.positions == "rope" and c.activation == "silu"
                and all(layer.attn_norm.kind == "rms" and layer.mlp_norm.kind == "rms"
                        for layer in self.weights.layers))

    def new_cache(self, capacity: int) -> KVCache:
        c = self.config
        return KVCache(c.n_layers, c.n_kv_heads, c.head_dim, min(capacity, c.context_length),
                       c.context_length, self.kv_dtype, self.device)

    @property
    def kv_bytes_per_token(self) -> int:
        c = self.config
        return kv_bytes_per_token(c.n_layers, c.n_kv_heads, c.head_dim, self.kv_dtype.itemsize)

    def _rope(self, start: int, end: int) -> torch.Tensor:
        """cos + i sin of each (position, frequency), grown on demand. (end - start, head_dim / 2)."""
        if end > self._rope_table.shape[0]:
            size = min(self.config.context_length, max(end, 2 * self._rope_table.shape[0], 1024))
            positions = torch.arange(size, dtype=torch.int64).float()
            freqs = torch.outer(positions, rope_inv_freq(self.config))  # (size, head_dim / 2)
            self._rope_table = torch.polar(torch.ones_like(freqs), freqs).to(self.device)
        return self._rope_table[start:end]

    def forward(self, ids: torch.Tensor, start: int, cache: KVCache, *, all_logits: bool = False,
                capture: AttentionCapture | None = None) -> torch.Tensor:
        """ids: (T,) tokens at positions start..start+T-1. Returns float logits (T or 1, V)."""
        c, w = self.config, self.weights
        T = ids.shape[0]
        end = start + T
        if end > c.context_length:
            raise ValueError(f"position {end - 1} is outside the context window of {c.context_length}")
        cache.reserve(end)
        self.forward_count += 1
        x = w.embed[ids]  # (T, C)
        if w.pos_embed is not None:
            x = x + w.pos_embed[start:end]  # (T, C)
        if T == 1 and capture is None and self._fuses_layers():
            x = self._decode_layers(x, start, cache)
        else:
            rope = self._rope(start, end)[:, None, :] if c.positions == "rope" else None  # (T, 1, hd/2)
            for index, layer in enumerate(w.layers):
                x = self._attention(x, layer, index, start, cache, rope, capture)  # (T, C)
                x = self._mlp(x, layer)  # (T, C)
        cache.length = end
        if not all_logits:
            x = x[-1:]  # (1, C): only the last position predicts the next token
        if w.head_rows is None and w.lm_head.fuses_norm(x, w.final_norm):  # the norm inside the product
            return w.lm_head.normed(x, w.final_norm).float()  # (1, V)
        h = w.final_norm(x)  # (T or 1, C)
        logits = w.lm_head(h)  # (T or 1, V)
        if w.head_rows is not None:
            logits = self._rescore_top(h, logits)
        return logits.float()

    def _decode_layers(self, x: torch.Tensor, position: int, cache: KVCache) -> torch.Tensor:
        """Every layer for one new position, one kernels.cpp call each: the same steps as _attention and
        _mlp (see decode_layer there), without a Python round trip between them."""
        c = self.config
        rope = torch.view_as_real(self._rope(position, position + 1))[0]  # (hd/2, 2): cos, sin
        window = c.sliding_window or 0
        for index, layer in enumerate(self.weights.layers):
            linears = (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)
            x = self.kernels.decode_layer(
                x, [lin.weight for lin in linears], [lin.scale for lin in linears],
                [lin.bias for lin in linears], [layer.attn_norm.weight, layer.mlp_norm.weight],
                cache.layer(index), position, rope, c.n_heads, layer.attn_norm.eps, layer.mlp_norm.eps,
                window)  # (1, C)
        return x

    def _rescore_top(self, h: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """An int8 head ranks every token; its best RESCORED get their logits again from the float rows.

        The top candidates carry nearly all the probability and every number the candidate view shows;
        rescoring them costs RESCORED rows read, against the whole float head (see weights.py for the
        measured effect on quality).
        """
        top = logits.topk(min(RESCORED, logits.shape[-1]), dim=-1).indices  # (T, K)
        rows = self.weights.head_rows[top]  # (T, K, C)
        exact = torch.bmm(rows, h[:, :, None]).squeeze(-1)  # (T, K)
        return logits.scatter_(1, top, exact)

    def _attention(self, x, layer: Layer, index: int, start: int, cache: KVCache, rope, capture):
        c = self.config
        T, hd = x.shape[0], c.head_dim
        qkv = layer.qkv.normed(x, layer.attn_norm)  # (T, q_dim + 2 kv_dim)
        if rope is not None:
            self._rotate(qkv[:, :c.q_dim + c.kv_dim], rope)
        q = qkv[:, :c.q_dim].view(T, c.n_heads, hd)  # (T, H, hd)
        kv = qkv[:, c.q_dim:].view(T, 2, c.n_kv_heads, hd)  # (T, 2, KV, hd)
        keys, values = cache.write(index, start, kv)  # (KV, n, hd) each
        if capture is not None:
            out = self._attend_captured(q, keys, values, start, index, capture)
        elif T == 1:
            out = self._attend_one(q, keys, values)
        else:
            out = self._attend_many(q, keys, values, start)
        return layer.o.add_to(x, out)  # (T, C)

    def _rotate(self, qk: torch.Tensor, rope: torch.Tensor) -> None:
        """Rotary embedding of the Q and K heads in place: each (even, odd) pair times cos + i sin."""
        pairs = qk.view(qk.shape[0], -1, self.config.head_dim // 2, 2)  # (T, H + KV, hd/2, 2)
        if qk.dtype in (torch.float32, torch.float64):
            torch.view_as_complex(pairs).mul_(rope)
        else:  # no complex type for bf16 / fp16: rotate in float32, round once
            qk.copy_(torch.view_as_real(torch.view_as_complex(pairs.float()) * rope).flatten(-3))

    def _attend_one(self, q, keys, values):
        """Decode: one query per head, no mask (it may see every cached position)."""
        c = self.config
        group = c.n_heads // c.n_kv_heads
        window = c.sliding_window
        if window is not None and keys.shape[1] > window:
            keys, values = keys[:, -window:], values[:, -window:]  # (KV, window, hd)
        # The query heads sharing one KV head become that head's `group` query rows.
        grouped = q.view(c.n_kv_heads, group, c.head_dim)  # (KV, group, hd)
        if self.device.type != "cpu":  # one fused kernel on CUDA
            return F.scaled_dot_product_attention(grouped, keys, values).reshape(1, c.q_dim)  # (1, H * hd)
        if self.kernels is not None:  # scores, softmax and the weighted sum in one call
            return self.kernels.attend_one(q.reshape(1, c.q_dim), keys, values, c.head_dim ** -0.5)
        # On CPU SDPA takes its generic path for one query (measured 1.6x slower than these three ops).
        scores = torch.baddbmm(self._zero, grouped, keys.mT, alpha=c.head_dim ** -0.5)  # (KV, group, n)
        probs = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32))  # (KV, group, n)
        probs = probs.to(values.dtype)
        return torch.bmm(probs, values).view(1, c.q_dim)  # (1, H * hd)

    def _mask(self, T: int, start: int, n: int) -> torch.Tensor:
        """(T, n) True where query position start+i may see key position j."""
        q_pos = torch.arange(start, start + T, device=self.device)[:, None]  # (T, 1)
        k_pos = torch.arange(n, device=self.device)[None, :]  # (1, n)
        allowed = k_pos <= q_pos
        if self.config.sliding_window is not None:
            allowed &= k_pos > q_pos - self.config.sliding_window
        return allowed  # (T, n)

    def _attend_many(self, q, keys, values, start):
        """Prefill: T queries at once under the causal mask."""
        c = self.config
        T, n = q.shape[0], keys.shape[1]
        # A batch dimension of 1: on CPU only 4-D inputs reach the flash kernel (3-D ones take the
        # generic path, measured 4x slower at 512 tokens).
        queries, keys, values = q.transpose(0, 1)[None], keys[None], values[None]  # (1, H or KV, T or n, hd)
        gqa = c.n_heads != c.n_kv_heads
        if start == 0 and (c.sliding_window is None or n <= c.sliding_window):
            out = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=gqa)
        else:
            out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=self._mask(T, start, n),
                                                 enable_gqa=gqa)  # (1, H, T, hd)
        return out[0].transpose(0, 1).reshape(T, c.q_dim)  # (T, H * hd)

    def _attend_captured(self, q, keys, values, start, index, capture):
        """Same attention with the weights written out, for the attention view."""
        c = self.config
        T, n = q.shape[0], keys.shape[1]
        group = c.n_heads // c.n_kv_heads
        queries = q.transpose(0, 1).float()  # (H, T, hd)
        k = keys.float().repeat_interleave(group, dim=0)  # (H, n, hd)
        v = values.float().repeat_interleave(group, dim=0)  # (H, n, hd)
        scores = queries @ k.transpose(1, 2) / math.sqrt(c.head_dim)  # (H, T, n)
        scores = scores.masked_fill(~self._mask(T, start, n), float("-inf"))
        probs = scores.softmax(dim=-1)  # (H, T, n)
        capture.record(index, probs)
        out = probs @ v  # (H, T, hd)
        return out.transpose(0, 1).reshape(T, c.q_dim).to(q.dtype)  # (T, H * hd)

    def _mlp(self, x, layer: Layer):
        act = self.config.activation
        if act == "silu" and layer.mlp_in.fuses_glu(x, layer.mlp_norm):
            return layer.mlp_out.add_to(x, layer.mlp_in.normed(x, layer.mlp_norm, glu=True))  # (T, C)
        h = layer.mlp_in.normed(x, layer.mlp_norm)  # (T, 2 ffn) or (T, ffn)
        if act == "silu":
            gate, up = h.chunk(2, dim=-1)  # (T, ffn) each
            h = F.silu(gate).mul_(up)  # (T, ffn)
        elif act == "gelu_tanh":
            h = F.gelu(h, approximate="tanh")
        elif act == "gelu":
            h = F.gelu(h)
        else:
            h = F.relu(h)
        return layer.mlp_out.add_to(x, h)  # (T, C)
