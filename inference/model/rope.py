"""Rotary position embedding: the frequencies of each family's rope, their cos + i sin table, the rotation.

Weights store each Q and K head's rotated dims as interleaved (even, odd) pairs (weights.py), so rotary
embedding is one complex multiply per pair. A head of `head_dim` dims has head_dim / 2 pairs; with partial
rotary (Phi-3/4-mini: `rotary_dim` = 0.75 head_dim) only the first rotary_dim / 2 pairs turn, and the
table holds 1 + 0i for the rest, which leaves them exactly as they are (a * 1 - b * 0 = a), on the stock
path and in csrc/layer.h's fused decode layer alike.

longrope (Phi-3/4) follows transformers: cos/sin are scaled by `attention_factor`, and a sequence of at
most `original_context` positions takes the short factors, a longer one the long factors at every
position. So the step that first makes the sequence longer than that recomputes the whole sequence (every
layer's hidden states change, not only the rotation), as transformers' generate() does for Phi-3
(`prepare_inputs_for_generation` drops its cache there): `LongropeCaches` keeps the ids each cache holds
and widens that one call to the whole sequence; a rewind back below the length crosses back the same way.
Each step's logits then equal a full forward of the sequence so far.
"""

from __future__ import annotations

import math
import weakref

import torch

from inference.model.config import ModelConfig


def rope_inv_freq(config: ModelConfig, long: bool = False) -> torch.Tensor:
    """Rotary frequencies of the rotated pairs, (rope_dim / 2,) float32, as transformers computes them;
    `long`: longrope's long factors."""
    dim = config.rope_dim
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    s = config.rope_scaling
    if s is not None and s.kind == "longrope":
        factors = torch.tensor(s.long_factor if long else s.short_factor, dtype=torch.float32)
        return 1.0 / (factors * config.rope_theta ** exponents)
    inv_freq = 1.0 / (config.rope_theta ** exponents)
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


class RotaryTable:
    """cos + i sin of each (position, pair), grown on demand; pairs past rope_dim / 2 hold 1 + 0i."""

    def __init__(self, config: ModelConfig, device: torch.device):
        self.config, self.device = config, device
        s = config.rope_scaling
        self.longrope = s if s is not None and s.kind == "longrope" else None
        self.tables = {False: self._empty(), True: self._empty()}  # longrope's long factors? -> table

    def _empty(self) -> torch.Tensor:
        return torch.empty(0, self.config.head_dim // 2, dtype=torch.complex64, device=self.device)

    def long_at(self, end: int) -> bool:
        """Whether a sequence of `end` positions takes longrope's long factors."""
        return self.longrope is not None and end > self.longrope.original_context

    def __call__(self, start: int, end: int, long: bool | None = None) -> torch.Tensor:
        """(end - start, head_dim / 2) complex64, for a sequence that is `end` long unless `long` is given."""
        long = self.long_at(end) if long is None else long
        table = self.tables[long]
        if end > table.shape[0]:
            size = min(self.config.context_length, max(end, 2 * table.shape[0], 1024))
            table = self.tables[long] = self._build(size, long)
        return table[start:end]

    def _build(self, size: int, long: bool) -> torch.Tensor:
        c = self.config
        positions = torch.arange(size, dtype=torch.int64).float()
        freqs = torch.outer(positions, rope_inv_freq(c, long))  # (size, rope_dim / 2)
        scale = self.longrope.attention_factor if self.longrope is not None else 1.0
        turned = torch.polar(torch.full_like(freqs, scale), freqs)
        kept = torch.ones(size, (c.head_dim - c.rope_dim) // 2, dtype=torch.complex64)  # pass-through pairs
        return torch.cat([turned, kept], dim=1).to(self.device)  # (size, head_dim / 2)


class LongropeCaches:
    """The token ids each KV cache holds and whether its positions were computed with the long factors."""

    def __init__(self, table: RotaryTable):
        self.table = table
        self.held: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cache -> (ids, long)

    def widen(self, cache, ids: torch.Tensor, start: int) -> tuple[torch.Tensor, int]:
        """(ids, start) to compute: as given, or the whole sequence from 0 when its end crosses the
        original context from where the cached positions were computed."""
        end = start + ids.shape[0]
        long = self.table.long_at(end)
        held_ids, held_long = self.held.get(cache, (ids[:0], long))
        prefix = held_ids[:start]
        if start > 0 and held_long != long and prefix.shape[0] == start:
            ids, start = torch.cat([prefix, ids]), 0
        self.held[cache] = (torch.cat([prefix, ids]) if start > 0 else ids.clone(), long)
        return ids, start


def rotate(qk: torch.Tensor, rope: torch.Tensor, head_dim: int) -> None:
    """Rotary embedding of Q and K heads in place: each (even, odd) pair times cos + i sin.
    qk: (T, heads * hd); rope: (T, 1, hd / 2)."""
    pairs = qk.view(qk.shape[0], -1, head_dim // 2, 2)  # (T, H + KV, hd/2, 2)
    if qk.dtype in (torch.float32, torch.float64):
        torch.view_as_complex(pairs).mul_(rope)
    else:  # no complex type for bf16 / fp16: rotate in float32, round once
        qk.copy_(torch.view_as_real(torch.view_as_complex(pairs.float()) * rope).flatten(-3))
