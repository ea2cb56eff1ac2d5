"""The decoder's runtime weights, built from the checked HF tensors (checkpoint.py) for one backend.

What `build_weights` does to them, so that model.py reads them fast:
- fuses Q/K/V into one matrix and gate/up into one (GPT-2's Conv1D (in, out) matrices are transposed);
- folds each pre-norm's scale (and a LayerNorm's shift) into the projection after it;
- reorders each Q and K head's rows from HF's (first half, second half) into interleaved (even, odd)
  rotary pairs, so rotary embedding is one complex multiply (partial rotary: the rotated rows only;
  Qwen3's per-head q/k norm weights in the same order);
- for dtype int8, quantises every matrix (quant.py) and leaves the norms unfolded: a norm's scale
  multiplied into the columns would widen each group's range and so its int8 step;
- on CPU, packs everything into one block in decode order (packing.py).
One function per family builds a layer; `build_weights` adds the embeddings, the final norm and the head.
"""

from __future__ import annotations

import torch

from inference.model import quant
from inference.model.checkpoint import take_ends, take_layer
from inference.model.config import ModelConfig
from inference.model.layers import Backend, Linear, Norm
from inference.model.decoder import DecoderWeights, Layer
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


def llama_layer(t: dict[str, torch.Tensor | None], c: ModelConfig, parts: BackendParts) -> Layer:
    """Llama, Mistral, Qwen2, Qwen3: fused QKV with interleaved rotary rows, fused gate/up; Qwen3's q/k
    norm weights (over one head) reordered as the rows they scale."""
    def fused_qkv(suffix: str) -> torch.Tensor:
        return torch.cat([_interleave_heads(t["q" + suffix], c.n_heads, c.rope_dim),
                          _interleave_heads(t["k" + suffix], c.n_kv_heads, c.rope_dim), t["v" + suffix]])

    qkv_w = fused_qkv("")  # (q_dim + 2 kv_dim, C)
    qkv_b = fused_qkv("_bias") if c.qkv_bias else None
    qkv, attn_norm = parts.linear(qkv_w, qkv_b, t["attn_norm"])
    o, _ = parts.linear(t["o"], t["o_bias"])
    gate_up_w = torch.cat([t["gate"], t["up"]])  # (2 ffn, C)
    gate_up_b = torch.cat([t["gate_bias"], t["up_bias"]]) if c.mlp_bias else None
    mlp_in, mlp_norm = parts.linear(gate_up_w, gate_up_b, t["mlp_norm"])
    mlp_out, _ = parts.linear(t["down"], t["down_bias"])
    layer = Layer(attn_norm, qkv, o, mlp_norm, mlp_in, mlp_out)
    if c.qk_norm:
        for role in ("q_norm", "k_norm"):
            weight = parts.place(_interleave_heads(t[role], 1, c.rope_dim))
            setattr(layer, role, parts.backend.norm("rms", c.norm_eps, c.head_dim, weight, None))
    return layer


def phi3_layer(t: dict[str, torch.Tensor | None], c: ModelConfig, parts: BackendParts) -> Layer:
    """Phi-3/4-mini: the checkpoint's fused qkv and gate_up split into Llama's roles, then as Llama."""
    q, k, v = t.pop("qkv").split([c.q_dim, c.kv_dim, c.kv_dim])
    gate, up = t.pop("gate_up").chunk(2)
    return llama_layer({**t, "q": q, "k": k, "v": v, "gate": gate, "up": up, "q_bias": None, "k_bias": None,
                        "v_bias": None, "gate_bias": None, "up_bias": None}, c, parts)


def gpt2_layer(t: dict[str, torch.Tensor | None], c: ModelConfig, parts: BackendParts) -> Layer:
    """GPT-2: Conv1D matrices transposed to (out, in); LayerNorms with a shift."""
    qkv, attn_norm = parts.linear(t["qkv"].t(), t["qkv_bias"], t["attn_norm"], t["attn_norm_bias"])
    o, _ = parts.linear(t["o"].t(), t["o_bias"])
    mlp_in, mlp_norm = parts.linear(t["mlp_in"].t(), t["mlp_in_bias"], t["mlp_norm"], t["mlp_norm_bias"])
    mlp_out, _ = parts.linear(t["mlp_out"].t(), t["mlp_out_bias"])
    return Layer(attn_norm, qkv, o, mlp_norm, mlp_in, mlp_out)


def _gemma_layer(t: dict[str, torch.Tensor | None], c: ModelConfig, parts: BackendParts) -> Layer:
    from inference.model.families.gemma import gemma_layer  # gemma.py builds on llama_layer, so it is imported when first asked for

    return gemma_layer(t, c, parts)


LAYER_BUILDERS = {"llama": llama_layer, "gpt2": gpt2_layer, "qwen3": llama_layer, "phi3": phi3_layer,
                  "gemma": _gemma_layer}  # config.family -> its layer


def build_weights(c: ModelConfig, hf: dict[str, torch.Tensor], backend: Backend) -> DecoderWeights:
    """Fuse, fold and place the checked HF tensors for `backend`; consumes `hf` to keep peak memory low."""
    parts = BackendParts(c, backend)
    build_layer = LAYER_BUILDERS[c.family]
    layers = [build_layer(take_layer(hf, c, i), c, parts) for i in range(c.n_layers)]
    ends = take_ends(hf, c)
    hf.clear()
    embed = parts.place(ends["embed"])
    pos_embed = parts.place(ends.get("positions"))
    final_scale = ends["final_norm"] + c.norm_offset if c.norm_offset else ends["final_norm"]
    final_norm = parts.norm(final_scale, ends.get("final_norm_bias"))
    head = embed if c.tie_embeddings else parts.place(ends["head"])
    lm_head = quant.int8_head(head, backend) if parts.quantized else backend.linear(head)
    weights = DecoderWeights(embed, pos_embed, layers, final_norm, lm_head)
    if backend.device.type == "cpu":
        pack(weights)
    return weights
