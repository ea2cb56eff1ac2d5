"""bfloat16 prefill: the products of a many-row forward (a prompt) in bfloat16, decode in float32.

A float32 model on CPU decodes on its own kernels (one row per product, bound by memory bandwidth, where
float32 keeps the exact numbers); a prefill of many rows goes to BLAS and is bound by compute. On a CPU
with bfloat16 dot products (AVX512_BF16 or AMX-BF16) those products run about twice as fast in
bfloat16. `attach` keeps a bfloat16 copy of every layer matrix for that; the decoder (decoder.py) reads it
for forwards of at least PREFILL_ROWS rows. Only the products change: the residual stream, norms,
rotary, attention, the K/V written to the cache (float32) and the head (one row, float32) stay as they
were, so a decode step after a bf16 prefill reads float32 K/V and runs exactly as before.

Opt-in (load_model's prefill_dtype, `trace --prefill-dtype`), not a default: on an AVX512_BF16 EPYC it
prefilled 1.5-1.9x faster for +209 MB resident (default model), but swapped one test prompt's top-1 (a
near tie), which the quality criteria do not allow (benchmarks/RESULTS.md, bench_prefill_dtype.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from inference.model import kernel_shape
from inference.errors import ModelFormatError
from inference.model.layers import Linear
from inference.settings import MAX_SPECULATE

PREFILL_DTYPE_CHOICES = ("float32", "bfloat16")
# Forwards of at least this many rows take the bfloat16 products: longer than any speculative verify pass
# (1 + MAX_SPECULATE rows), so those keep float32's numbers and speculation its same-tokens promise.
PREFILL_ROWS = MAX_SPECULATE + 2
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs with bfloat16 dot products


def cpu_flags() -> set[str]:
    return set(kernel_shape.cpu_identity()["flags"])  # /proc/cpuinfo's, read once


def cpu_has_bf16(flags: set[str] | None = None) -> bool:
    return bool(set(BF16_FLAGS) & (cpu_flags() if flags is None else flags))


@dataclass
class Bf16Linear(Linear):
    """A float32 projection's bfloat16 copy: float32 in and out, the product in bfloat16."""

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        y = F.linear(x.to(torch.bfloat16), self.weight, self.bias).float()  # (T, out)
        return y if alpha == 1.0 else y.mul_(alpha)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return residual + self(x)  # (T, out), the sum in float32


def bf16_copy(linear: Linear) -> Bf16Linear:
    bias = None if linear.bias is None else linear.bias.to(torch.bfloat16)
    return Bf16Linear(linear.matrix().to(torch.bfloat16).contiguous(), bias)


def prefill_weights(weights):
    """A model.DecoderWeights whose layers' products are bfloat16 copies; the embeddings, norms and the
    head are the float32 ones (shared, not copied)."""
    layers = [replace(layer, qkv=bf16_copy(layer.qkv), o=bf16_copy(layer.o), mlp_in=bf16_copy(layer.mlp_in),
                      mlp_out=bf16_copy(layer.mlp_out)) for layer in weights.layers]
    return replace(weights, layers=layers)


def copy_bytes(prefill) -> int:
    """Bytes of the bfloat16 copies (what the mode adds to the float32 weights)."""
    return sum(t.numel() * t.element_size() for layer in prefill.layers
               for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)
               for t in (lin.weight, lin.bias) if t is not None)


def attach(decoder, min_rows: int = PREFILL_ROWS) -> int:
    """Give a float32 decoder bfloat16 copies for forwards of at least `min_rows` rows; their bytes."""
    if decoder.dtype != torch.float32:
        raise ValueError(f"bfloat16 prefill copies float32 weights, not {decoder.dtype}")
    decoder.prefill_weights = prefill_weights(decoder.weights)
    decoder.prefill_min_rows = min_rows
    return copy_bytes(decoder.prefill_weights)


def check(prefill_dtype: str, device: str, dtype: str, flags: set[str] | None = None) -> None:
    """A ModelFormatError unless `prefill_dtype` is a choice that runs (and pays) here."""
    if prefill_dtype not in PREFILL_DTYPE_CHOICES:
        raise ModelFormatError(f"unknown prefill dtype {prefill_dtype!r} (choose from "
                               f"{', '.join(PREFILL_DTYPE_CHOICES)})")
    if prefill_dtype == "float32":
        return
    if device != "cpu" or dtype != "float32":
        raise ModelFormatError(f"--prefill-dtype bfloat16 is for float32 weights on CPU (here {dtype} on {device})")
    if not cpu_has_bf16(flags):
        raise ModelFormatError("--prefill-dtype bfloat16 needs a CPU with bfloat16 dot products "
                               "(avx512_bf16 or amx_bf16); without them it is slower than float32")
