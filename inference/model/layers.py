"""The compute backend, chosen once at load, and the float building blocks that run on it.

`select_backend(device, dtype)` decides how this model's products and decode attention run:
- "kernels": CPU, float32 or int8 weights, with the own kernels of inference/kernels/csrc (built by inference/kernels):
  one-row products (and short int8 prefills, quant.py) and decode attention go to them, and a decode
  step of a block that matches `decode_layer` runs each layer as one call;
- "torch-cpu": CPU with stock ops (no compiler, another instruction set, TOKENSTEP_KERNELS=0, or bf16 /
  fp16 weights): one-row float32 products as bmm over row blocks;
- "torch-cuda" (any other device): stock ops, one fused SDPA kernel for decode attention.
Weights are built into the backend's classes (`Backend.linear`, `Backend.norm`, quant.int8_linear), so
no product asks which backend it is on: a class looks only at how many rows it was given.
The decoder (model.py) calls every projection as `linear(x)`, `linear.add_to(residual, x)`,
`linear.normed(x, norm)`, `linear.normed_glu(x, norm)` or, for the head, `linear.logits(x, norm)`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import torch
import torch.nn.functional as F

from inference import kernels as own_kernels

# Rows of x up to which float32 products run on the kernels' small-M products rather than BLAS (measured:
# benchmarks/bench_small_m.py, RESULTS.md "Several positions per pass").
SMALL_M_ROWS = 16

AttendOne = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Backend:
    name: str  # "kernels", "torch-cpu" or "torch-<device type>"
    device: torch.device
    dtype: torch.dtype  # the weights' dtype; int8 means weight-only int8 (quant.py)
    kernels: object | None  # torch.ops.tokenstep on "kernels"
    # Decode attention: q (1, H * hd) over keys, values (KV, n, hd) -> (1, H * hd).
    attend_one: AttendOne
    row_block_parts: int = 0  # > 1: one-row float32 products split into this many row blocks

    @property
    def compute_dtype(self) -> torch.dtype:
        """Activations, norms and the KV cache: the weights' own float dtype; float32 for int8 weights."""
        return self.dtype if self.dtype.is_floating_point else torch.float32

    def linear(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Linear:
        """A float projection in this backend's class."""
        if self.kernels is not None:
            return KernelLinear(weight, bias, kernels=self.kernels)
        if self.row_block_parts > 1 and weight.shape[0] % self.row_block_parts == 0:
            return RowBlockLinear(weight, bias, parts=self.row_block_parts)
        return Linear(weight, bias)

    def norm(self, kind: str, eps: float, size: int, weight: torch.Tensor | None,
             bias: torch.Tensor | None) -> Norm:
        return Norm(kind, eps, size, weight, bias, gain_on_host=self.device.type == "cpu")


def select_backend(device: torch.device | str, dtype: torch.dtype, allow_own_kernels: bool = True,
                   progress=None) -> Backend:
    """The backend for weights of `dtype` on `device`: the own kernels where they build and run, else stock
    ops (`allow_own_kernels=False` asks for stock ops even where the kernels run). A first build of the
    kernels is reported to `progress` as the stage "compile"."""
    device = torch.device(device)
    kernels = None
    if allow_own_kernels and device.type == "cpu" and dtype in (torch.float32, torch.int8):
        kernels = own_kernels.ops_reporting(progress)
    if kernels is not None:
        return Backend("kernels", device, dtype, kernels, functools.partial(_attend_one_on_kernels, kernels))
    if device.type == "cpu":
        zero = torch.zeros((), dtype=dtype if dtype.is_floating_point else torch.float32)
        # Only float32: bf16 bmm over blocks measured 1.8x slower than bf16 F.linear, which is threaded.
        parts = torch.get_num_threads() if dtype == torch.float32 else 0
        return Backend("torch-cpu", device, dtype, None, functools.partial(_attend_one_stock, zero), parts)
    return Backend(f"torch-{device.type}", device, dtype, None, _attend_one_sdpa)


def _attend_one_on_kernels(kernels, q, keys, values):
    """Scores, softmax and the weighted sum in one call."""
    return kernels.attend_one(q.reshape(1, -1), keys, values, keys.shape[2] ** -0.5)


def _attend_one_stock(zero, q, keys, values):
    # On CPU SDPA takes its generic path for one query (measured 1.6x slower than these three ops).
    kv_heads, _, head_dim = keys.shape
    grouped = q.view(kv_heads, -1, head_dim)  # (KV, group, hd): the query heads that share one KV head
    scores = torch.baddbmm(zero, grouped, keys.mT, alpha=head_dim ** -0.5)  # (KV, group, n)
    probs = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32))  # (KV, group, n)
    return torch.bmm(probs.to(values.dtype), values).view(1, -1)  # (1, H * hd)


def _attend_one_sdpa(q, keys, values):
    """One fused kernel on CUDA."""
    kv_heads, _, head_dim = keys.shape
    grouped = q.view(kv_heads, -1, head_dim)  # (KV, group, hd)
    return F.scaled_dot_product_attention(grouped, keys, values).reshape(1, -1)  # (1, H * hd)


@dataclass
class Linear:
    """y = alpha * (x @ weight.T) + bias on stock torch ops; the other backends' and int8's products
    derive from it and take over the calls they run better."""

    weight: torch.Tensor  # (out, in)
    bias: torch.Tensor | None = None  # (out,)
    # What every product answers, so that no caller asks with getattr: an int8 product's scales (quant.py; None for
    # float weights) and the path its products take on the kernels (quant.path_code; 0: float activations).
    scale: ClassVar[torch.Tensor | None] = None
    path: ClassVar[int] = 0

    def describe(self) -> str:
        """What this product does beyond a float one, for the model's status line ('' for a float product)."""
        return ""

    def use_int8_path(self, code: int) -> None:
        """Take int8 products on the kernels on path `code` (quant.path_code) from the next call on: a product
        without int8 weights on the kernels has none to change."""

    def matrix(self) -> torch.Tensor:
        """The (out, in) float matrix a BLAS product reads."""
        return self.weight

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        weight = self.matrix()
        if alpha != 1.0:
            return torch.addmm(self.bias, x, weight.t(), alpha=alpha) if self.bias is not None \
                else torch.mm(x, weight.t()).mul_(alpha)
        return F.linear(x, weight, self.bias)  # (T, out)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """residual + self(x), fused into one matmul call."""
        if self.bias is not None:
            residual = residual + self.bias
        return torch.addmm(residual, x, self.matrix().t())  # (T, out)

    def normed(self, x: torch.Tensor, norm: Norm) -> torch.Tensor:
        """self(norm(x))."""
        h, gain = norm.with_gain(x)  # (T, C), norm(x) = gain * h
        return self(h, gain)

    def normed_glu(self, x: torch.Tensor, norm: Norm) -> torch.Tensor:
        """silu(gate) * up of self(norm(x)), whose rows are the gate's then the up projection's."""
        gate, up = self.normed(x, norm).chunk(2, dim=-1)  # (T, ffn) each
        return F.silu(gate).mul_(up)  # (T, ffn)

    def logits(self, x: torch.Tensor, final_norm: Norm) -> torch.Tensor:
        """The head's product of the final norm of x: (T, V)."""
        return self(final_norm(x))


@dataclass
class RowBlockLinear(Linear):
    """Float32 on CPU with stock ops: a one-row product as bmm over `parts` row blocks.

    A (1, in) x (in, out) product goes to a BLAS GEMV that uses one thread on CPU and reaches about a
    third of the memory bandwidth (measured); bmm over row blocks streams the matrix on every thread.
    The blocks are views taken per call, so they follow the weight wherever packing moves it.
    """

    parts: int = field(default=1, metadata={"derived": True})
    zero: torch.Tensor = field(default_factory=lambda: torch.zeros(()), metadata={"derived": True})

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        if x.shape[0] != 1:
            return super().__call__(x, alpha)
        bias = self.zero if self.bias is None else self.bias.view(self.parts, -1, 1)  # (P, out / P, 1)
        return torch.baddbmm(bias, self._blocks(), self._column(x), alpha=alpha).view(1, -1)  # (1, out)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1:
            return super().add_to(residual, x)
        if self.bias is not None:
            residual = residual + self.bias
        blocked = residual.view(self.parts, -1, 1)  # (P, out / P, 1)
        return torch.baddbmm(blocked, self._blocks(), self._column(x)).view(1, -1)  # (1, out)

    def _blocks(self) -> torch.Tensor:
        return self.weight.view(self.parts, -1, self.weight.shape[1])  # (P, out / P, in)

    def _column(self, x: torch.Tensor) -> torch.Tensor:
        # Strides (0, 1, in) take bmm to its batched BLAS call, one block per thread; an (in, 1) column
        # with strides (.., 1, 1) falls back to a serial loop (measured 4x slower).
        x = x if x.is_contiguous() else x.contiguous()
        return x.as_strided((self.parts, x.shape[1], 1), (0, 1, x.shape[1]))  # (P, in, 1)


@dataclass
class KernelLinear(Linear):
    """Float32 weights on the own kernels for up to `most_rows` rows (decode, verify passes); more rows (prefill) go
    to BLAS.

    On the kernels an RMSNorm before the product is one more pass over x inside the same call (its
    weight folded into the matrix, or applied to x there), and a gated MLP's silu(gate) * up is taken
    before anything is written out.
    """

    kernels: object = field(default=None, metadata={"derived": True})  # torch.ops.tokenstep
    # The most rows of x a product takes on the kernels (csrc/f32.h: up to 16, each weight row read once for all of
    # them, as a verify pass of a few drafts needs); more go to BLAS. 1: one row only (before issue 38).
    most_rows: ClassVar[int] = SMALL_M_ROWS

    def on_kernels(self, x: torch.Tensor) -> bool:
        return x.shape[0] <= self.most_rows

    def __call__(self, x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        return self._kernel(x, alpha) if self.on_kernels(x) else super().__call__(x, alpha)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self._kernel(x, 1.0, residual) if self.on_kernels(x) else super().add_to(residual, x)

    def normed(self, x: torch.Tensor, norm: Norm) -> torch.Tensor:
        if self.on_kernels(x) and norm.kind == "rms":
            return self._kernel(x, 1.0, rms_eps=norm.eps, norm_weight=norm.weight)
        return super().normed(x, norm)

    def normed_glu(self, x: torch.Tensor, norm: Norm) -> torch.Tensor:
        if x.shape[0] == 1 and norm.kind == "rms":
            return self._kernel(x, 1.0, rms_eps=norm.eps, glu=True, norm_weight=norm.weight)  # (1, ffn)
        return super().normed_glu(x, norm)

    def logits(self, x: torch.Tensor, final_norm: Norm) -> torch.Tensor:
        if self.on_kernels(x) and final_norm.kind == "rms":
            return self.normed(x, final_norm)
        return super().logits(x, final_norm)

    def _kernel(self, x: torch.Tensor, alpha: float, residual: torch.Tensor | None = None,
                rms_eps: float = -1.0, glu: bool = False,
                norm_weight: torch.Tensor | None = None) -> torch.Tensor:
        """(T, out), or (1, out / 2) with glu; rms_eps >= 0 scales each row of x by 1 / rms first (and
        by norm_weight per column)."""
        x = x if x.is_contiguous() else x.contiguous()
        if residual is not None and not residual.is_contiguous():
            residual = residual.contiguous()
        return self._gemv(x, alpha, residual, rms_eps, glu, norm_weight)

    def _gemv(self, x, alpha, residual, rms_eps, glu, norm_weight) -> torch.Tensor:
        return self.kernels.gemv_f32(self.weight, x, alpha, self.bias, residual, rms_eps, glu, norm_weight)


ACTIVATION_CODES = {"silu": 0, "gelu_tanh": 1, "gelu": 2}  # decode_layers' `activation` (csrc/step.h Activation)


def _layer_args(layer, query_scale: float = 1.0) -> tuple[list, list, list, list]:
    """A layer's (matrices, scales, biases, norms) as csrc/step.h's decode_layers takes them: the norms before
    attention and the MLP (None where folded into the next matrix), then the q/k norms over each head where the
    layer has them (Qwen3, Gemma 3; Q's scaled by the config's query_scale), then the norms after attention and the
    MLP where it has them (Gemma; the q/k slots None without q/k norms)."""
    linears = (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out)
    norms = [layer.attn_norm.weight, layer.mlp_norm.weight]
    post = layer.post_attn_norm is not None
    if layer.q_norm is not None:  # an RMSNorm over each Q and K head (eps as attn_norm's)
        q = layer.q_norm.weight if query_scale == 1.0 else layer.q_norm.weight * query_scale
        norms += [q, layer.k_norm.weight]
    elif post:
        norms += [None, None]
    if post:
        norms += [layer.post_attn_norm.weight, layer.post_mlp_norm.weight]
    return [lin.weight for lin in linears], [lin.scale for lin in linears], [lin.bias for lin in linears], norms


def decode_layer(kernels, x: torch.Tensor, layer, kv: torch.Tensor, position: int, rope: torch.Tensor,
                 n_heads: int, window: int) -> torch.Tensor:
    """A Llama-style layer (RMSNorm, rotary, grouped-query attention, gated SiLU) for one new position in
    one kernels call; its linears are KernelLinear. kv: the layer's cache (2, KV, capacity, hd); rope:
    (hd / 2, 2) cos and sin of `position`; window: attend to the last `window` positions (0: all)."""
    return kernels.decode_layer(x, *_layer_args(layer), kv, position, rope, n_heads, layer.attn_norm.eps,
                                layer.mlp_norm.eps, window, layer.qkv.path)  # (1, C)


@dataclass(frozen=True)
class DecodeArguments:
    """decode_layers' and decode_rows' per-model arguments for a list of layers, gathered once (Block.arguments:
    the lists of 120 tensors of a 30-layer model took ~0.1 ms a step to gather)."""
    mats: list
    scales: list
    biases: list
    norms: list
    attn_eps: float  # the first layer's: one config for all
    mlp_eps: float
    path: int  # the int8 path
    windows: list[int]  # each layer's (0: every position)
    activation: int  # ACTIVATION_CODES


def decode_arguments(layers: list, windows: list[int], activation: str = "silu",
                     query_scale: float = 1.0) -> DecodeArguments:
    """decode_layers' per-layer arguments for `layers`, each with its window (0: all positions)."""
    mats, scales, biases, norms = [], [], [], []
    for layer in layers:
        for into, part in zip((mats, scales, biases, norms), _layer_args(layer, query_scale)):
            into += part
    first = layers[0]
    return DecodeArguments(mats, scales, biases, norms, first.attn_norm.eps, first.mlp_norm.eps, first.qkv.path,
                           list(windows), ACTIVATION_CODES[activation])


def decode_layers(kernels, x: torch.Tensor, a: DecodeArguments, kvs, position: int, rope: torch.Tensor,
                  local_rope: torch.Tensor | None, n_heads: int) -> torch.Tensor:
    """decode_layer over every layer in one kernels call, in one parallel region (csrc/step.h: no
    Python, dispatch or thread start-up between layers or products). kvs: each layer's cache; rope: (hd / 2, 2)
    cos and sin of `position`; local_rope: the same for the windowed layers where they have their own base."""
    return kernels.decode_layers(x, a.mats, a.scales, a.biases, a.norms, kvs, position, rope, local_rope, n_heads,
                                 a.attn_eps, a.mlp_eps, a.windows, a.activation, a.path)  # (1, C)


def decode_rows(kernels, x: torch.Tensor, a: DecodeArguments, kvs, positions: torch.Tensor, tables: torch.Tensor | None,
                rope: torch.Tensor, local_rope: torch.Tensor | None, n_heads: int) -> torch.Tensor:
    """decode_layers for 2 to 16 rows of x in one kernels call (csrc/rows.h; float32 or int8 weights): row m at
    positions[m] writes its K/V there and attends over its cache up to it. kvs: each layer's cache (2, KV,
    capacity, hd), which all rows share (tables None: one sequence, a verify pass), or each layer's paged pool
    (blocks, 2, KV, B, hd) with `tables` (M, width) int64, row m's block table. rope, local_rope: (M, hd / 2, 2)."""
    return kernels.decode_rows(x, a.mats, a.scales, a.biases, a.norms, kvs, positions, tables, rope, local_rope,
                               n_heads, a.attn_eps, a.mlp_eps, a.windows, a.activation, a.path)  # (M, C)


@dataclass
class Norm:
    """RMSNorm or LayerNorm. weight/bias are None when folded into the next projection."""

    kind: str  # "rms" or "layer"
    eps: float
    size: int
    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    gain_on_host: bool = False  # CPU: one row's RMSNorm hands its 1/rms to the next product (with_gain)

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
        if self.kind == "rms" and x.shape[0] == 1 and self.gain_on_host:
            norm = torch.linalg.vector_norm(x, dtype=torch.promote_types(x.dtype, torch.float32))
            mean_square = float(norm) ** 2 / self.size
            gain = 1.0 / math.sqrt(mean_square + self.eps)
            return (x, gain) if self.weight is None else (x * self.weight, gain)  # (1, C)
        return self(x), 1.0


def weight_slots(obj):
    """(owner, key) of every tensor slot under obj: dataclass fields (not derived ones) and list items,
    depth first in field order. `slot_value` reads one; packing.pack rebinds them."""
    items = enumerate(obj) if isinstance(obj, list) else (
        (name, getattr(obj, name)) for name, f in obj.__dataclass_fields__.items() if not f.metadata.get("derived"))
    for key, value in items:
        if isinstance(value, torch.Tensor):
            yield obj, key
        elif isinstance(value, list) or hasattr(value, "__dataclass_fields__"):
            yield from weight_slots(value)


def slot_value(owner, key):
    return owner[key] if isinstance(owner, list) else getattr(owner, key)
