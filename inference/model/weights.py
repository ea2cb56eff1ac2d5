"""The decoder's runtime weights, built from the checked HF tensors (checkpoint.py) for one backend.

What `build_weights` does to them, so that decoder.py reads them fast:
- fuses Q/K/V into one matrix and gate/up into one (GPT-2's Conv1D (in, out) matrices are transposed);
- folds each pre-norm's scale (and a LayerNorm's shift) into the projection after it;
- reorders each Q and K head's rows from HF's (first half, second half) into interleaved (even, odd)
  rotary pairs, so rotary embedding is one complex multiply (partial rotary: the rotated rows only;
  Qwen3's per-head q/k norm weights in the same order);
- for dtype int8, quantises every matrix (quant.py) and leaves the norms unfolded: a norm's scale
  multiplied into the columns would widen each group's range and so its int8 step;
- on CPU, packs everything into one block in decode order (packing.py).
One function builds every family's layer, as the family's BlockTraits say (families/registry.py);
`build_weights` adds the embeddings, the final norm and the head.
"""

from __future__ import annotations

import torch

from inference.model import quant
from inference.model.checkpoint import take_ends, take_layer
from inference.model.config import ModelConfig
from inference.model.layers import Backend, Linear, Norm
from inference.model.decoder import DecoderWeights, Layer
from inference.model.families import registry
from inference.model.families.parts import BlockTraits
from inference.model.packing import pack


def _fold(norm_weight, norm_bias, weight, bias):
    """Fold a norm's affine (x_hat * g + b) into the projection after it: W' = W g, b' = W b + c."""
    folded_bias = bias
    if norm_bias is not None:
        shift = weight @ norm_bias  # (out,)
        folded_bias = shift if bias is None else bias + shift
    return weight * norm_weight[None, :], folded_bias


def _interleave_heads(t: torch.Tensor, n_heads: int, rotary_dim: int | None = None) -> torch.Tensor:
    """Reorder each head's rotated rows from HF's (first half, second half) to (even, odd) rotary pairs;
    with partial rotary only the first `rotary_dim` rows of each head turn (pairs (i, i + rotary_dim / 2)
    in HF's rotate_half), and the rows after them stay where they are."""
    rest = t.shape[1:]
    heads = t.reshape(n_heads, -1, *rest)  # (heads, hd, ...)
    rot = rotary_dim or heads.shape[1]
    turned = heads[:, :rot].reshape(n_heads, 2, rot // 2, *rest).transpose(1, 2).reshape(n_heads, rot, *rest)
    return torch.cat([turned, heads[:, rot:]], dim=1).reshape(-1, *rest)


class BackendParts:
    """Makes the backend's linears and norms from HF tensors, on its device and in its float dtype."""

    def __init__(self, config: ModelConfig, backend: Backend):
        self.config, self.backend = config, backend
        self.quantized = backend.dtype == torch.int8
        self.float_dtype = backend.compute_dtype

    def place(self, t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.to(device=self.backend.device, dtype=self.float_dtype).contiguous()

    def norm(self, weight, bias=None) -> Norm:
        c = self.config
        return self.backend.norm(c.norm, c.norm_eps, c.hidden, self.place(weight), self.place(bias))

    def linear(self, weight, bias, norm_weight=None, norm_bias=None) -> tuple[Linear, Norm | None]:
        """A projection and the norm before it (None if none), the norm folded in unless quantised."""
        has_norm = norm_weight is not None
        if has_norm and not self.quantized:
            weight, bias = _fold(norm_weight, norm_bias, weight, bias)
            norm_weight = norm_bias = None
        if self.quantized:
            projection = quant.int8_linear(weight, self.place(bias), self.backend)
        else:
            projection = self.backend.linear(self.place(weight), self.place(bias))
        return projection, self.norm(norm_weight, norm_bias) if has_norm else None


def build_layer(t: dict[str, torch.Tensor | None], c: ModelConfig, parts: BackendParts, traits: BlockTraits) -> Layer:
    """A layer from its checked HF tensors by role (checkpoint.take_layer), for every family: fused QKV with
    interleaved rotary rows (from q, k, v, or a checkpoint's fused qkv), the MLP's input (gate and up rows,
    fused; or a plain `up`), each pre-norm (plus the family's norm_offset) folded into the product after it,
    and the norms that stay (per-head Q/K, after-branch) as the family's traits say."""
    matrix = _transposed if traits.conv1d else _as_stored
    attn_norm, mlp_norm = t["attn_norm"], t["mlp_norm"]
    if c.norm_offset:
        attn_norm, mlp_norm = attn_norm + c.norm_offset, mlp_norm + c.norm_offset
    qkv, attn_norm = parts.linear(*_qkv(t, c, matrix), attn_norm, t.get("attn_norm_bias"))
    o, _ = parts.linear(matrix(t["o"]), t["o_bias"])
    mlp_in, mlp_norm = parts.linear(*_mlp_in(t, c, matrix, traits), mlp_norm, t.get("mlp_norm_bias"))
    mlp_out, _ = parts.linear(matrix(t["down"]), t["down_bias"])
    return Layer(attn_norm, qkv, o, mlp_norm, mlp_in, mlp_out,
                 q_norm=_kept_norm(t.get("q_norm"), c.head_dim, c, parts, traits, interleave=True),
                 k_norm=_kept_norm(t.get("k_norm"), c.head_dim, c, parts, traits, interleave=True),
                 post_attn_norm=_kept_norm(t.get("post_attn_norm"), c.hidden, c, parts, traits),
                 post_mlp_norm=_kept_norm(t.get("post_mlp_norm"), c.hidden, c, parts, traits))


def _as_stored(weight: torch.Tensor) -> torch.Tensor:
    return weight


def _transposed(weight: torch.Tensor) -> torch.Tensor:
    """A Conv1D (in, out) matrix as (out, in)."""
    return weight.t()


def _qkv(t, c: ModelConfig, matrix) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(q_dim + 2 kv_dim, C) rows of Q, K, V and their bias (None without): each rotated head's rows in
    interleaved rotary order; a checkpoint's fused qkv (Phi-3) split first, kept whole without rotary (GPT-2)."""
    if "qkv" in t and c.positions != "rope":
        return matrix(t["qkv"]), t["qkv_bias"]
    if "qkv" in t:
        t = {**t, **dict(zip("qkv", matrix(t["qkv"]).split([c.q_dim, c.kv_dim, c.kv_dim]))),
             **{f"{part}_bias": None for part in "qkv"}}
        if t.get("qkv_bias") is not None:
            t.update(zip(("q_bias", "k_bias", "v_bias"), t["qkv_bias"].split([c.q_dim, c.kv_dim, c.kv_dim])))

    def fused(suffix: str) -> torch.Tensor:
        return torch.cat([_interleave_heads(t["q" + suffix], c.n_heads, c.rope_dim),
                          _interleave_heads(t["k" + suffix], c.n_kv_heads, c.rope_dim), t["v" + suffix]])

    return fused(""), fused("_bias") if t["q_bias"] is not None else None


def _mlp_in(t, c: ModelConfig, matrix, traits: BlockTraits) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The MLP's input product: gate rows then up rows (gated; a checkpoint's fused gate_up as it is split
    from), else the plain `up`."""
    if not traits.gated_mlp:
        return matrix(t["up"]), t["up_bias"]
    if "gate_up" in t:
        gate, up = matrix(t["gate_up"]).chunk(2)
        gate_bias, up_bias = t["gate_up_bias"].chunk(2) if t.get("gate_up_bias") is not None else (None, None)
    else:
        gate, up, gate_bias, up_bias = matrix(t["gate"]), matrix(t["up"]), t["gate_bias"], t["up_bias"]
    return torch.cat([gate, up]), torch.cat([gate_bias, up_bias]) if gate_bias is not None else None


def _kept_norm(weight, size: int, c: ModelConfig, parts: BackendParts, traits: BlockTraits,
               interleave: bool = False) -> Norm | None:
    """An RMSNorm that is not folded into a product (None without its weight): over one head (its scale in
    the rows' interleaved rotary order) or the hidden size; in float32 or wider, scale plus the family's
    norm_offset, where the traits say so, else the backend's."""
    if weight is None:
        return None
    scale = _interleave_heads(weight, 1, c.rope_dim) if interleave else weight
    if traits.float32_norms:
        wide = torch.promote_types(parts.backend.compute_dtype, torch.float32)  # float32, or float64 if wider
        return Norm("rms", c.norm_eps, size, (scale + c.norm_offset).to(parts.backend.device, wide).contiguous())
    return parts.backend.norm("rms", c.norm_eps, size, parts.place(scale), None)


def build_weights(c: ModelConfig, hf: dict[str, torch.Tensor], backend: Backend) -> DecoderWeights:
    """Fuse, fold and place the checked HF tensors for `backend`; consumes `hf` to keep peak memory low."""
    parts = BackendParts(c, backend)
    traits = registry.family(c.family).block
    layers = [build_layer(take_layer(hf, c, i), c, parts, traits) for i in range(c.n_layers)]
    ends = take_ends(hf, c)
    hf.clear()
    embed = parts.place(ends["embed"])
    pos_embed = parts.place(ends.get("positions"))
    final_scale = ends["final_norm"] + c.norm_offset if c.norm_offset else ends["final_norm"]
    final_norm = parts.norm(final_scale, ends.get("final_norm_bias"))
    head = embed if c.tie_embeddings else parts.place(ends["head"])
    lm_head = quant.int8_head(head, backend) if parts.quantized else backend.linear(head)
    weights = DecoderWeights(embed, pos_embed, layers, final_norm, lm_head)
    del ends, embed, pos_embed, head  # the weights hold them now: pack frees each original once it is copied
    if backend.device.type == "cpu":
        pack(weights)
    return weights
