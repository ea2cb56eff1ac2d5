"""Weight-only int8: quantising matrices, their products on each backend, and the rescored int8 head.

A matrix is stored as int8 q with bfloat16 scales, weight ~= q * scale; activations, norms and the KV
cache stay float32. How the product runs depends on the backend (layers.py), chosen at load:
- on the own kernels (`KernelInt8Linear`): a scale per group of INT8_GROUP weights of a row; one row and
  short prefills run on the kernels, longer prefills dequantise the matrix for BLAS. On the kernels the
  products widen the weights to float32 against float32 activations, or, asked for (`int8_path`,
  csrc/int8_integer.h) on a CPU with AVX-512 VNNI or AVX2, quantise the activations to int8 for int32 products;
- on CPU with stock ops (`NibbleInt8Linear`): the same group scales, each int8 weight split into two 4-bit
  halves for torch's group-scaled int4 kernel;
- elsewhere (`Int8Linear`, CUDA): group scales, dequantised for each product (cheap there).
The head ranks every token with its int8 product (on the own kernels: a 4-bit one, `KernelInt4Linear`) and
rescores its best from the float rows (`RescoredHead`). The decoder only sees linears and a head: it never
branches on int8.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from inference.model.layers import SMALL_M_ROWS, Backend, KernelLinear, Linear, Norm

INT8_GROUP = 64  # weights that share one int8 scale along a row
# int8 products of up to this many rows run on the kernels; longer ones dequantise the matrix for BLAS.
# Measured (default model, 2 threads): prefill of 16 tokens 25 ms on the kernels vs 38 ms dequantised,
# 32 tokens 60 vs 51 ms.
KERNEL_ROWS = 16
RESCORED = 64  # tokens an int8 head rescores in float
# The int8 mode's head on the own kernels ranks in 4 bits (csrc/head.h), a scale per INT4_GROUP weights, and
# rescores its best RESCORED_INT4 in float (TOKENSTEP_INT8_HEAD=int8 keeps the int8 head). The default model,
# benchmarks/int8_quality.py (25 prompts; int8 layers on the float path):
#   head          rescored  largest first-step |dp|  perplexity ratio  greedy agreement mean / lowest
#   int8          64        0.0255                   1.0057            98.5 % / 96.0 %
#   int4, g32     64        0.0280                   1.0154            98.5 % / 96.0 %
#   int4, g32     256       0.0263                   1.0102            98.5 % / 96.0 %
#   int4, g64     64        0.0292                   1.0201            98.5 % / 96.0 %
#   (asymmetric g32, 64: 0.0273, 1.0102: no better than rescoring more, and a term more a group)
# The 4-bit head reads 16.6 MB a step against 29.2 (the default model's int8 step: 139 -> 126 MB), and the
# tokens outside its best 256 keep logits within its 4-bit error: they count in the softmax's sum only.
INT4_GROUP = 32  # weights that share one scale in the int4 head (csrc/head.h)
RESCORED_INT4 = 256
INT4_KERNEL_ROWS = 256  # rows of x the 4-bit head takes on the kernels (KernelInt4Linear)
# How int8 products on the own kernels run (the code is csrc/int8_integer.h's int8_path): "float" widens each
# weight to float32 against float32 activations; "int16" (csrc/int16.h, every build) quantises each row of
# activations to int16, one scale per weight group, and sums the products exactly in int32 (vpmaddwd: half the
# float path's work per weight); "integer" quantises each row of activations to int8, one
# scale per INT8_ACT_GROUP of them, and multiplies in int32 on AVX-512 VNNI or, in an AVX2 build, with
# vpmaddubsw ("integer-row": one scale per row; "integer-<n>": one per n, n a multiple of 4). Longer prefills
# (over KERNEL_ROWS rows) dequantise for BLAS on either. TOKENSTEP_INT8_PATH picks one; unset, the linears are
# built on "float" and kernel_shape.choose_int8_path then puts them on "float" or "int16", whichever it measured
# faster on this machine (the same quality; float only when clearly faster, PATH_HANDICAP: passes of several rows
# cost far less on int16), never on "integer":
# - speed: where decode streams memory, both paths read at about the same speed. AVX-512 EPYC with VNNI
#   (2 threads, benchmarks/bench_int8_path.py, two runs): an integer step 1.09-1.10x a float one. AVX2 EPYC
#   (2 threads, each path in its own shape): integer products 1.06-1.19x, steps 1.07-1.13x the float path's,
#   though from the caches on one thread they are 1.5x faster (24.6 against 16.4 G weights/s). So the integer
#   path only pays where decode is bound by compute (one thread: 0.8x the float path's CPU time on VNNI);
# - quality: with int8 activations, a last-bit change anywhere upstream flips roundings, and the default
#   model's first-step probabilities move with it: on "The quick brown fox" the integer path gave p = 0.516
#   (VNNI), and on AVX2 0.530 from a prefill, 0.521 step by step, 0.514 from a 3-token prefill plus a step,
#   against float32's 0.487 and the float path's 0.503 (every way). The report's bound is |dp| <= 0.03
#   (benchmarks/int8_quality.py): the integer path passes or fails it by chance, the float path holds it.
# - the int16 path's report is the float path's (AVX2 EPYC: top-1 equal on all 25 prompts, largest |dp|
#   0.0255, perplexity ratio 1.0057, greedy agreement 98.5 % mean, 96.5 % lowest): its activation step is
#   1/65534 of a group's largest, 250x finer than the weights' own. Its speed, AVX2 EPYC: one 110 MB product
#   1.11x a read of the same bytes against the float path's 1.28x; the model's products as a step runs them
#   0.90-1.01x the float path's at 2 threads (median 0.93), steps 0.96-1.02x (five runs, median 0.98); 0.95x
#   at one thread (products). So the choice between the two is measured at first use, as the kernel shape is
#   (AVX-512: the float path's products took 1.69x a read there, bound by widening).
INT8_ACT_GROUP = 4
INT8_PATHS = {"float": 0, "int16": -16, "integer": INT8_ACT_GROUP, "integer-row": -1}
INT16 = INT8_PATHS["int16"]  # csrc/int16.h's kInt16Path


def quantize_rows(weight: torch.Tensor, group: int = INT8_GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per group of `group` weights along each row: weight ~= q * scale (repeated over the
    group). Returns q (out, in) int8 and scale (out, in / group) bfloat16; a row whose length `group` does
    not divide gets one scale (out, 1).

    Measured on the default model over 25 prompts (first step against float32, norms not folded): one
    scale per row moved the top token's probability by up to 0.076 and swapped the top-1 on two of them;
    groups of 64 by up to 0.026 with no swap, and halved the mean KL divergence (0.0047 -> 0.0024);
    groups of 32 were no better than 64. q is rounded against the rounded bfloat16 scale, so the scale's
    rounding costs nothing beyond the int8 step itself.
    """
    out, size = weight.shape
    group = next((g for g in (group, 32, 16) if size % g == 0), size)
    grouped = weight.reshape(out, size // group, group)
    amax = grouped.abs().amax(dim=2)  # (out, groups)
    scale = (amax / 127).clamp_min(torch.finfo(torch.bfloat16).tiny).to(torch.bfloat16)  # (out, groups)
    q = torch.round(grouped / scale.float()[:, :, None]).clamp_(-128, 127).to(torch.int8)
    return q.reshape(out, size), scale


def quantize_int4(weight: torch.Tensor, group: int = INT4_GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit weights per group of `group` (32, 64, 128 or 256, dividing the row): q = round(w / scale) in
    [-8, 7], scale = amax / 7 (bfloat16). Returns the packed weights (out, in / 2) uint8 in csrc/head.h's
    layout (per block of 32: byte j holds q[j] + 8 in its low nibble, q[j + 16] + 8 in its high one) and the
    scales (out, in / group) bfloat16."""
    out, size = weight.shape
    if group not in (32, 64, 128, 256) or size % group:
        raise ValueError(f"int4 groups: 32, 64, 128 or 256 weights dividing the row (asked {group} of {size})")
    grouped = weight.reshape(out, size // group, group)
    amax = grouped.abs().amax(dim=2)  # (out, groups)
    scale = (amax / 7).clamp_min(torch.finfo(torch.bfloat16).tiny).to(torch.bfloat16)
    q = (torch.round(grouped / scale.float()[:, :, None]).clamp_(-8, 7) + 8).to(torch.uint8)  # (out, groups, group)
    blocks = q.reshape(out, size // 32, 2, 16)  # per block of 32: weights 0..15, 16..31
    packed = blocks[:, :, 0, :] | (blocks[:, :, 1, :] << 4)  # (out, in / 32, 16)
    return packed.reshape(out, size // 2).contiguous(), scale


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """quantize_int4's packed weights (out, in / 2) times their scales, as float32 (out, in), with stock ops."""
    out, half = packed.shape
    blocks = packed.reshape(out, half // 16, 1, 16)
    q = torch.cat([blocks & 0x0F, blocks >> 4], dim=2).reshape(out, 2 * half).float() - 8  # (out, in)
    return (q.reshape(out, scale.shape[1], -1) * scale.float()[:, :, None]).reshape(out, 2 * half)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q (out, in) int8 times its scales (out, groups), as float32 (out, in), with stock ops."""
    out, size = q.shape
    return (q.reshape(out, scale.shape[1], -1).float() * scale.float()[:, :, None]).reshape(out, size)


def int8_path(kernels) -> str:
    """The path int8 products on the own kernels are built on: TOKENSTEP_INT8_PATH, else "float" (which
    kernel_shape.choose_int8_path may then change to "int16", measured faster)."""
    code = kernels.integer_code()  # "vnni", "avx2" or "" (none)
    wanted = os.environ.get("TOKENSTEP_INT8_PATH", "").strip().lower() or "float"
    path_code(wanted)  # refuses an unknown name
    if wanted not in ("float", "int16") and not code:  # every build of the kernels has the int16 path
        _say_once(f"[tokenstep] TOKENSTEP_INT8_PATH={wanted}: no integer int8 code for this CPU (AVX-512 without "
                  "VNNI); using float")
        return "float"
    return wanted


def int8_path_forced() -> bool:
    """Whether TOKENSTEP_INT8_PATH names the path (else kernel_shape measures float against int16 at first use)."""
    return bool(os.environ.get("TOKENSTEP_INT8_PATH", "").strip())


def use_int8_path(weights, name: str) -> None:
    """Every int8 product of `weights` on the kernels (the layers', an int8 head's) from the next forward on path
    `name` (the fused step's gathered arguments follow the path)."""
    code = path_code(name)
    for lin in weights.linears():
        lin.use_int8_path(code)


def path_code(name: str) -> int:
    """A path's name -> csrc/int8_integer.h's int8_path (0 float, INT16 int16 activations, n > 0 integer with n
    activations per scale, -1 integer with one scale per row)."""
    if name in INT8_PATHS:
        return INT8_PATHS[name]
    n = name.removeprefix("integer-")
    if n.isdigit() and int(n) > 0 and int(n) % 4 == 0:
        return int(n)
    raise ValueError(f"TOKENSTEP_INT8_PATH={name!r}: one of {', '.join(INT8_PATHS)} or integer-<multiple of 4>")


def describe_int8_path(code: int) -> str:
    """What a path code means for a model's status line: '' for the float path (and float models)."""
    if code == 0:
        return ""
    if code == INT16:
        return "int8 products on int16 activations"
    return f"int8 products on int8 activations ({'a scale per row' if code < 0 else f'a scale per {code}'})"


@functools.lru_cache(maxsize=None)
def _say_once(line: str) -> None:
    print(line, file=sys.stderr)


def int8_linear(weight: torch.Tensor, bias: torch.Tensor | None, backend: Backend) -> Linear:
    """weight (out, in), float, quantised for this backend's int8 product; bias stays float."""
    device = backend.device
    if backend.kernels is not None:
        q, scale = quantize_rows(weight.float())
        return KernelInt8Linear(q.to(device).contiguous(), bias, kernels=backend.kernels, scale=scale.to(device),
                                path=path_code(int8_path(backend.kernels)))
    if device.type == "cpu":
        return nibble_int8_linear(weight.float(), bias)
    q, scale = quantize_rows(weight.float())
    return Int8Linear(q.to(device).contiguous(), bias, scale.to(device))


def int8_head(float_rows: torch.Tensor, backend: Backend) -> RescoredHead:
    """The head (V, C) of the int8 mode, keeping `float_rows` to rescore its top tokens: in 4 bits on the own
    kernels (int4_head), else int8.

    Measured on the default model (benchmarks/int8_quality.py): an int8 head alone moved the first-step
    probability of the top token by up to 0.034; with its top tokens rescored from the float rows, by no
    more than a float head does. The float rows stay in memory (the embedding lookup reads them anyway
    when tied) but a decode step reads only the rescored ones.
    """
    if int4_head(backend.kernels) and float_rows.shape[1] % INT4_GROUP == 0:
        packed, scale = quantize_int4(float_rows.float())
        return RescoredHead(KernelInt4Linear(packed, None, scale, kernels=backend.kernels), float_rows, RESCORED_INT4)
    return RescoredHead(int8_linear(float_rows, None, backend), float_rows)


def int4_head(kernels) -> bool:
    """Whether the int8 mode's head ranks in 4 bits here: on the own kernels, unless TOKENSTEP_INT8_HEAD=int8."""
    wanted = os.environ.get("TOKENSTEP_INT8_HEAD", "").strip().lower() or "int4"
    if wanted not in ("int4", "int8"):
        raise ValueError(f"TOKENSTEP_INT8_HEAD={wanted!r}: int4 or int8")
    return kernels is not None and wanted == "int4"


@dataclass
class Int8Linear(Linear):
    """int8 weights with group scales, dequantised to float32 for each product (stock ops)."""

    scale: torch.Tensor | None = None  # (out, groups) bfloat16

    def matrix(self) -> torch.Tensor:
        return dequantize(self.weight, self.scale)  # a transient (out, in) float32


def nibble_int8_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> NibbleInt8Linear:
    """weight (out, in) float32 quantised as quantize_rows does (the own kernels' int8 weights and group scales),
    each int8 weight then stored as two 4-bit halves for torch's int4 kernel (NibbleInt8Linear).

    That kernel takes (out, in) 4-bit weights, out a multiple of 16, with a bfloat16 scale and zero per group of
    32 or 64 along a row: each weight is (nibble - 8) * scale + zero, in float32. A weight q + 128 = 16 h + l
    (h, l in 0..15) of group scale s is two of them: h with scale 16 s and zero 0, l with scale s and zero 8 s,
    each exact (16 s and 8 s are exact in bfloat16 too), and (h - 8) 16 s + l s = q s. The high halves take the
    first `in` columns and the low ones the next `in`, against the activations twice. Rows and columns the
    kernel does not take are padded with zeros (which change no group's largest weight).
    """
    out, size = weight.shape
    padded = F.pad(weight, (0, -size % 32, 0, -out % 16))
    q, scale = quantize_rows(padded)  # a group of 64 or 32: the padded width is a multiple of 32
    unsigned = q.to(torch.int32) + 128  # (out, in) in 0..255
    halves = torch.cat([unsigned >> 4, unsigned & 15], dim=1)  # (out, 2 in): the high halves, then the low
    packed = torch._convert_weight_to_int4pack_for_cpu(halves, 1)  # (out, in) uint8; innerKTiles: unused on CPU
    s = scale.float()  # (out, G)
    scales = torch.cat([16 * s, s], dim=1)  # (out, 2 G)
    zeros = torch.cat([torch.zeros_like(s), 8 * s], dim=1)
    scale_zeros = torch.stack([scales.t(), zeros.t()], dim=-1).to(torch.bfloat16).contiguous()  # (2 G, out, 2)
    return NibbleInt8Linear(packed, bias, scale_zeros, out_features=out, in_features=size)


@dataclass
class NibbleInt8Linear(Linear):
    """int8 weights with group scales on CPU with stock ops, on torch's int4 kernel (nibble_int8_linear).

    Why not one scale per row on torch's int8 kernel, as this path had: on the default model that moved the
    first step's top-token probability by up to 0.095 and swapped the top-1 on 2 of benchmarks/int8_quality.py's
    25 prompts; these group scales stay within 0.026 with no swap (the own kernels with an int8 head: 0.0255).
    Measured there: the row scales were the error (0.076 and the 2 swaps with float32 activations; bfloat16
    activations with float weights alone 0.017), spread over every kind of layer (group scales in any one kind
    still left 0.028-0.072 and 1-3 swaps). A second row-scaled int8 matrix for the rounding residual reached
    float32's numbers but read twice the bytes (a decode step 0.72x float32's time, against 0.49x for these in
    the same run); float16 activations on the int8 kernel ran a product 16x slower.
    Speed (benchmarks/bench_int8_stock.py, 2 threads, AVX-512 EPYC, two runs): a decode step 0.55-0.62x
    float32's on stock ops and 1.12-1.24x the row-scaled one's (the kernel does two multiply-adds a weight);
    prefill of 16 tokens 0.52-0.57x float32's, of 128 0.93-1.05x, of 512 1.18x (row-scaled: 0.78x), since
    it is bound by those multiply-adds. Weights 265 MB (row-scaled 248, float32 538, the float embedding
    table included): each group's scale and zero cost 1/8 byte a weight.
    """

    scale_zeros: torch.Tensor | None = None  # (2 in / group, out, 2) bfloat16: each group's scale and zero
    out_features: int = field(default=0, metadata={"derived": True})  # the matrix's shape before padding
    in_features: int = field(default=0, metadata={"derived": True})

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        y = self.product(x)
        y = y if alpha == 1.0 else y.mul_(alpha)
        return y if self.bias is None else y.add_(self.bias)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = self.product(x)
        return residual + (y if self.bias is None else y.add_(self.bias))  # the residual stays float32

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, in) @ the weights.T as float32 (T, out): the kernel takes bfloat16 activations (rounded, as
        torch's int8 kernel did) and sums in float32, rounding its result to bfloat16 once."""
        padded_rows, padded_size = self.weight.shape
        x = x.to(torch.bfloat16)
        if self.in_features != padded_size:
            x = F.pad(x, (0, padded_size - self.in_features))
        group = 2 * padded_size // self.scale_zeros.shape[0]
        y = torch._weight_int4pack_mm_for_cpu(torch.cat([x, x], dim=1), self.weight, group, self.scale_zeros)
        return (y if padded_rows == self.out_features else y[:, :self.out_features]).float()


@dataclass
class KernelInt8Linear(KernelLinear):
    """int8 weights with group scales on the own kernels, for up to KERNEL_ROWS rows; longer prefills
    dequantise the matrix (on the kernels too) for BLAS."""

    scale: torch.Tensor | None = field(default=None)  # (out, groups) bfloat16
    path: int = field(default=0, metadata={"derived": True})  # path_code: how products on the kernels run

    def describe(self) -> str:
        return describe_int8_path(self.path)

    def use_int8_path(self, code: int) -> None:
        self.path = code

    def on_kernels(self, x: torch.Tensor) -> bool:
        return x.shape[0] <= KERNEL_ROWS

    def matrix(self) -> torch.Tensor:
        return self.kernels.dequantize_int8(self.weight, self.scale)  # a transient (out, in) float32

    def _gemv(self, x, alpha, residual, rms_eps, glu, norm_weight) -> torch.Tensor:
        if self.path == INT16:  # one row (several: the float path's gemv_int8, in the same call)
            return self.kernels.gemv_int8_int16(self.weight, self.scale, x, alpha, self.bias, residual, rms_eps, glu,
                                                norm_weight)
        if self.path:  # one row or a short prefill (on_kernels)
            return self.kernels.gemv_int8_integer(self.weight, self.scale, x, alpha, self.bias, residual, rms_eps,
                                                  glu, norm_weight, self.path)
        return self.kernels.gemv_int8(self.weight, self.scale, x, alpha, self.bias, residual, rms_eps, glu,
                                      norm_weight)


@dataclass
class KernelInt4Linear(Linear):
    """A head's rows as 4-bit weights (quantize_int4) on the own kernels, against activations quantised to int8
    per group: only to rank the vocabulary inside a RescoredHead, which takes its best tokens' logits again in
    float. Up to INT4_KERNEL_ROWS rows on csrc/head.h, one pass over the weights a row (the logit lens's
    30 rows of the default model: 18 ms, against 215 ms to dequantise the matrix); more dequantise it for BLAS."""

    scale: torch.Tensor | None = None  # (out, in / INT4_GROUP) bfloat16
    kernels: object = field(default=None, metadata={"derived": True})  # torch.ops.tokenstep

    def matrix(self) -> torch.Tensor:
        return dequantize_int4(self.weight, self.scale)  # a transient (out, in) float32

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        if x.shape[0] <= INT4_KERNEL_ROWS and self.bias is None:
            return self.kernels.gemv_int4(self.weight, self.scale, x.contiguous(), alpha)  # (T, out)
        return super().__call__(x, alpha)


@dataclass
class RescoredHead:
    """An int8 (or 4-bit) head that ranks every token; its best `rescored` get their logits again from the float
    rows.

    The top candidates carry nearly all the probability and every number the candidate view shows;
    rescoring them costs `rescored` rows read, against the whole float head.
    """

    linear: Linear  # the int8 (or 4-bit) product (V, C)
    float_rows: torch.Tensor  # (V, C): the head in float (the embedding table when tied)
    rescored: int = field(default=RESCORED, metadata={"derived": True})  # tokens whose logits are taken again

    @property
    def weight(self) -> torch.Tensor:
        return self.linear.weight

    @property
    def scale(self) -> torch.Tensor:
        return self.linear.scale

    @property
    def path(self) -> int:
        return self.linear.path

    def use_int8_path(self, code: int) -> None:
        self.linear.use_int8_path(code)

    def describe(self) -> str:
        bits = "4" if isinstance(self.linear, KernelInt4Linear) else "8"
        return f"head ranks in {bits} bits, best {self.rescored} rescored in float"

    def logits(self, x: torch.Tensor, final_norm: Norm) -> torch.Tensor:
        lin = self.linear
        on_kernels = isinstance(lin, KernelInt4Linear) or isinstance(lin, KernelInt8Linear) and lin.path in (0, INT16)
        if (x.shape[0] <= SMALL_M_ROWS and on_kernels and lin.bias is None and final_norm.kind == "rms"
                and final_norm.weight is not None):  # a decode step, a pass of a few rows: one kernel call, each
            # row's logits as a step of its own gives them
            return lin.kernels.head_rescored(lin.weight, lin.scale, x, final_norm.weight, final_norm.eps,
                                             self.float_rows, self.rescored, lin.path)  # (rows, V)
        h = final_norm(x)  # (T, C)
        logits = self.linear(h)  # (T, V)
        top = logits.topk(min(self.rescored, logits.shape[-1]), dim=-1).indices  # (T, K)
        rows = self.float_rows[top]  # (T, K, C)
        exact = torch.bmm(rows, h[:, :, None]).squeeze(-1)  # (T, K)
        return logits.scatter_(1, top, exact)
