"""Laying the checked checkpoint tensors (checkpoint.py) out for `model.Decoder`."""

from __future__ import annotations

import ctypes
import hashlib
import mmap

import torch

from . import kernels as decode_kernels
from .checkpoint import READ_BATCH_BYTES
from .config import ModelConfig
from .model import DecoderWeights, Layer, Linear, Norm, slot_value, weight_slots

def _fold(norm_weight, norm_bias, weight, bias):
    """Fold a norm's affine (x_hat * g + b) into the projection after it: W' = W g, b' = W b + c."""
    folded_bias = bias
    if norm_bias is not None:
        shift = weight @ norm_bias  # (out,)
        folded_bias = shift if bias is None else bias + shift
    return weight * norm_weight[None, :], folded_bias


def _interleave_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder each head's rows from HF's (first half, second half) to (even, odd) rotary pairs."""
    rest = t.shape[1:]
    return t.reshape(n_heads, 2, -1, *rest).transpose(1, 2).reshape(-1, *rest)


INT8_GROUP = 64  # weights that share one int8 scale along a row


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


def build_weights(c: ModelConfig, hf: dict[str, torch.Tensor], dtype: torch.dtype,
                  device: torch.device, fold_norms: bool = True) -> DecoderWeights:
    """Fuse, fold and place the checked HF tensors; consumes `hf` to keep peak memory low.

    dtype int8 means int8 matrices with group-wise scales (quantize_rows), float32 for the rest (the
    embedding table included). Norms are then not folded: a norm's scale multiplied into the columns
    would widen each group's range and so its int8 step.
    """
    quantized = dtype == torch.int8
    float_dtype = torch.float32 if quantized else dtype
    fold_norms = fold_norms and not quantized
    # Group-wise scales need kernels.cpp on CPU (or a CUDA device, where dequantising is cheap). Without
    # it, one scale per row, shaped (out,), lets torch's int8 kernel run (model.py): less exact but faster
    # than float32 (117 vs 67 tokens/s here), where dequantising per token ran at 8 tokens/s.
    per_row = device.type == "cpu" and decode_kernels.ops() is None

    def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if per_row:
            q, scale = quantize_rows(weight, weight.shape[1])
            return q, scale.view(-1)
        return quantize_rows(weight)

    def take(name):
        return hf.pop(name, None)

    def place(t):
        return None if t is None else t.to(device=device, dtype=float_dtype).contiguous()

    def matrix(weight) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight as stored, its int8 scale or None)."""
        if not quantized:
            return place(weight), None
        q, scale = quantize(weight.float())
        return q.to(device).contiguous(), scale.to(device)

    def norm(weight, bias) -> Norm:
        return Norm(c.norm, c.norm_eps, c.hidden, place(weight), place(bias))

    def linear(weight, bias, norm_weight=None, norm_bias=None) -> tuple[Linear, Norm | None]:
        """A projection and the norm before it (None if none); the norm folded in when `fold_norms`."""
        has_norm = norm_weight is not None
        if has_norm and fold_norms:
            weight, bias = _fold(norm_weight, norm_bias, weight, bias)
            norm_weight = norm_bias = None
        stored, scale = matrix(weight)
        return Linear(stored, place(bias), scale), norm(norm_weight, norm_bias) if has_norm else None

    layers = []
    for i in range(c.n_layers):
        if c.family == "gpt2":
            p = f"transformer.h.{i}."
            qkv, attn_norm = linear(take(p + "attn.c_attn.weight").t(), take(p + "attn.c_attn.bias"),
                                    take(p + "ln_1.weight"), take(p + "ln_1.bias"))
            o, _ = linear(take(p + "attn.c_proj.weight").t(), take(p + "attn.c_proj.bias"))
            mlp_in, mlp_norm = linear(take(p + "mlp.c_fc.weight").t(), take(p + "mlp.c_fc.bias"),
                                      take(p + "ln_2.weight"), take(p + "ln_2.bias"))
            mlp_out, _ = linear(take(p + "mlp.c_proj.weight").t(), take(p + "mlp.c_proj.bias"))
        else:
            p = f"model.layers.{i}."
            a = p + "self_attn."
            q_w = _interleave_heads(take(a + "q_proj.weight"), c.n_heads)
            k_w = _interleave_heads(take(a + "k_proj.weight"), c.n_kv_heads)
            qkv_w = torch.cat([q_w, k_w, take(a + "v_proj.weight")])  # (q_dim + 2 kv_dim, C)
            qkv_b = None
            if c.qkv_bias:
                qkv_b = torch.cat([_interleave_heads(take(a + "q_proj.bias"), c.n_heads),
                                   _interleave_heads(take(a + "k_proj.bias"), c.n_kv_heads),
                                   take(a + "v_proj.bias")])
            qkv, attn_norm = linear(qkv_w, qkv_b, take(p + "input_layernorm.weight"))
            o, _ = linear(take(a + "o_proj.weight"), take(a + "o_proj.bias"))
            m = p + "mlp."
            gate_up_w = torch.cat([take(m + "gate_proj.weight"), take(m + "up_proj.weight")])  # (2 ffn, C)
            gate_up_b = torch.cat([take(m + "gate_proj.bias"), take(m + "up_proj.bias")]) if c.mlp_bias else None
            mlp_in, mlp_norm = linear(gate_up_w, gate_up_b, take(p + "post_attention_layernorm.weight"))
            mlp_out, _ = linear(take(m + "down_proj.weight"), take(m + "down_proj.bias"))
        layers.append(Layer(attn_norm, qkv, o, mlp_norm, mlp_in, mlp_out))

    if c.family == "gpt2":
        embed = place(take("transformer.wte.weight"))
        pos_embed = place(take("transformer.wpe.weight"))
        final_norm = norm(take("transformer.ln_f.weight"), take("transformer.ln_f.bias"))
    else:
        embed = place(take("model.embed_tokens.weight"))
        pos_embed = None
        final_norm = norm(take("model.norm.weight"), None)
    head = take("lm_head.weight")  # saved by some checkpoints even when tied
    head = embed if c.tie_embeddings else place(head)
    if quantized:
        # Measured on the default model (benchmarks/int8_quality.py): an int8 head alone moved the
        # first-step probability of the top token by up to 0.034; with its top tokens rescored from the
        # float rows, by no more than a float head does. The float rows stay in memory (the embedding
        # lookup reads them anyway when tied) but a decode step reads only the rescored ones.
        q, scale = quantize(head)
        lm_head, head_rows = Linear(q, scale=scale), head
    else:
        lm_head, head_rows = Linear(head), None
    hf.clear()
    weights = DecoderWeights(embed, pos_embed, layers, final_norm, lm_head, head_rows)
    if device.type == "cpu":
        pack(weights)
    return weights


HUGE_PAGE = 2 << 20
PACK_ALIGN = 64  # each tensor starts on a cache line


def _release_freed_memory() -> None:
    """Hand the heap's freed pages back to the OS now (glibc keeps them for reuse; freed weights would
    otherwise still count: 1.47 GB resident against 0.77 for the float32 default model)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _arena(nbytes: int) -> torch.Tensor:
    """nbytes of zeroed memory (uint8), on transparent huge pages where the OS offers them.

    A private anonymous mapping advised MADV_HUGEPAGE (the allocator's own memory gets huge pages only
    with THP "always", which most distributions leave at "madvise"). Elsewhere a plain tensor.
    """
    if not (hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_PRIVATE")):
        return torch.zeros(nbytes, dtype=torch.uint8)
    whole_pages = -(-nbytes // HUGE_PAGE) * HUGE_PAGE  # the last page whole, so it can be a huge one too
    region = mmap.mmap(-1, whole_pages + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        region.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # THP compiled out or disabled: still one aligned block
        pass
    raw = torch.frombuffer(region, dtype=torch.uint8)  # keeps `region` alive as long as any view
    start = -raw.data_ptr() % HUGE_PAGE
    return raw[start:start + nbytes]


def pack(weights: DecoderWeights) -> None:
    """Move every tensor into one block of memory, in the order a decode step reads them.

    Measured on an Intel Xeon VM (2 threads, default model): separate 538 MB buffers streamed at 23 to
    31 GB/s depending on where each landed, huge-page ones at a steady 29.5. One forward: float32 23.5-24.0
    ms as loaded, 23.3-23.6 packed, 22.7 packed on huge pages; int8 10.9, 10.0, 9.4 ms. The cost is at
    load: on that VM first-touching huge pages took 0.8 s for 538 MB (0.1 s with small pages). Layer by
    layer, then the final norm and the head, so a step is one sweep from the first byte to the last (the
    embedding table, of which a step reads one row, sits with the tied head). Values, dtypes, shapes and
    sharing are unchanged.
    """
    order = [*weight_slots(weights.layers), *weight_slots(weights.final_norm), *weight_slots(weights.lm_head),
             *((weights, name) for name in ("head_rows", "embed", "pos_embed")
               if getattr(weights, name) is not None)]
    groups: dict[int, list] = {}  # id(tensor) -> [tensor, slots...]: shared tensors packed once
    for owner, key in order:
        t = slot_value(owner, key)
        groups.setdefault(id(t), [t]).append((owner, key))
    sizes = [-(-group[0].numel() * group[0].element_size() // PACK_ALIGN) * PACK_ALIGN for group in groups.values()]
    _release_freed_memory()  # what building the weights freed, before the block grows
    block, offset, since_release = _arena(sum(sizes)), 0, 0
    for group, size in zip(list(groups.values()), sizes):
        t = group[0]
        view = block[offset:offset + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
        view.copy_(t)
        for owner, key in group[1:]:
            if isinstance(owner, list):
                owner[key] = view
            else:
                setattr(owner, key, view)
        offset += size
        group.clear()  # the original is freed as soon as its copy is in place: the peak stays low
        del t
        since_release += size
        if since_release >= READ_BATCH_BYTES:
            _release_freed_memory()
            since_release = 0
    _release_freed_memory()


def fingerprint(weights: DecoderWeights) -> str:
    """sha256 over every runtime tensor's bytes: proves a run left the weights untouched."""
    digest = hashlib.sha256()
    for t in weights.tensors():
        digest.update(str((tuple(t.shape), t.dtype)).encode())
        flat = t.detach().contiguous().view(-1)
        digest.update(flat.view(torch.uint8).cpu().numpy().data)
    return digest.hexdigest()[:16]


def weights_bytes(weights: DecoderWeights) -> int:
    return sum(t.numel() * t.element_size() for t in weights.tensors())
