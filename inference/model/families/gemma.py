"""Gemma 2 and Gemma 3 (text): their config reader, their tensors and their layer's traits.

What differs from Llama, as transformers computes it (decoder.Block and weights.build_layer run it):
- every RMSNorm scales by (1 + w) (`norm_offset` 1), in float32; four per layer: before and after attention,
  before and after the MLP (the "after" ones normalise the branch's output before it is added to the
  residual stream: `norms_after`);
- the embeddings are multiplied by sqrt(hidden) (in the embedding dtype: 55.4256 becomes 55.5 in bf16);
- the MLP is GeGLU: gelu_tanh(gate) * up;
- scores are scaled by query_pre_attn_scalar^-1/2 rather than head_dim^-1/2: Q is multiplied by
  sqrt(head_dim / query_pre_attn_scalar) once (`query_scale`), so every attention route keeps its usual
  1/sqrt(head_dim);
- Gemma 2 soft-caps the scores (cap * tanh(s / cap)) and the final logits; capped scores cannot go through
  SDPA or the one-query kernels, so they are computed explicitly (decoder.Block.captured for many queries,
  Block.capped_step for a decode step);
- layers alternate between a sliding window and global attention (`layer_types`, or every
  `sliding_window_pattern`-th layer global); the KV cache keeps every position, each layer reads its window;
- Gemma 3 normalises Q and K per head (RMSNorm, 1 + w) before rotary, and rotates local layers with
  `rope_local_base_freq` and global ones with `rope_theta` (plus its scaling, linear in the 4B-27B models).
An image-text Gemma 3 checkpoint (Gemma3ForConditionalGeneration) is read for its text tower: the config
under `text_config`, the tensors under `language_model.` (`canonical`); the vision tower is not read. On the
own kernels a Gemma 3 decode step runs every layer in one call (`fused_decode`; csrc/step.h has the norms after
each branch, GeGLU, the per-layer windows and the local rotary base; Q's scale rides on its q norm); Gemma 2's
soft-capped scores keep it on the backend's linears, layer by layer. From GGUF (store/gguf/convert.py): its config from llama.cpp's metadata (`gguf_config`),
its SentencePiece vocabulary, its norms' 1 + w back to w.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from inference.errors import ModelFormatError
from inference.messages import say, shown
from inference.model.families import llama
from inference.model.families.parts import BlockTraits, GgufArch, Layout, TensorSpec, head_vector, vector
from inference.model.families.reading import MAX_THETA, ConfigReader, RopeScaling, attention_shape, read_rope

ARCHITECTURES = {"Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
                 "Gemma3ForConditionalGeneration": "gemma3"}  # its text tower; the vision tower is not read
BLOCK = BlockTraits(gated_mlp=True, norms_after=True, float32_norms=True, scaled_embeddings=True, fused_decode=True)

# transformers' defaults for keys a config.json may leave out (the Gemma 3 image-text configs keep only
# what differs in `text_config`).
_DEFAULTS: dict[str, dict[str, Any]] = {
    "Gemma2ForCausalLM": dict(
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
        query_pre_attn_scalar=256, sliding_window=4096, sliding_window_pattern=2, final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0, bos_token_id=2, eos_token_id=1),
    "Gemma3ForCausalLM": dict(
        vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, max_position_embeddings=131072, rms_norm_eps=1e-6,
        rope_theta=1_000_000.0, rope_local_base_freq=10000.0, query_pre_attn_scalar=256, sliding_window=4096,
        sliding_window_pattern=6, final_logit_softcapping=None, attn_logit_softcapping=None, bos_token_id=2,
        eos_token_id=1),
}
_DEFAULTS["Gemma3ForConditionalGeneration"] = _DEFAULTS["Gemma3ForCausalLM"]


def _text_config(arch: str, r: ConfigReader) -> ConfigReader:
    """The text model's keys with transformers' defaults under them (an image-text config's `text_config`,
    its token ids and tying falling back to the outer config's)."""
    d = r.d
    if arch == "Gemma3ForConditionalGeneration":
        text = d.get("text_config")
        if not isinstance(text, dict):
            raise r.fail(say("config.an_object", key="text_config"))
        outer = {k: d[k] for k in ("bos_token_id", "eos_token_id", "tie_word_embeddings") if k in d}
        d = {**outer, **text}
    return ConfigReader({**_DEFAULTS[arch], **d}, r.source)


def _softcap(r: ConfigReader, key: str) -> float | None:
    return None if r.d.get(key) is None else r.float(key, 0.0)


def _layer_windows(r: ConfigReader, n_layers: int) -> tuple[int, ...]:
    """Each layer's window (0: global) from `layer_types`, else from `sliding_window_pattern`."""
    types = r.d.get("layer_types")
    if types is not None:
        kinds = {"sliding_attention", "full_attention"}
        if not isinstance(types, list) or len(types) != n_layers or not all(t in kinds for t in types):
            raise r.fail(say("config.layer_types_of", layers=n_layers, kinds=sorted(kinds)))
        sliding = [t == "sliding_attention" for t in types]
    else:
        pattern = r.size("layers", "sliding_window_pattern")
        sliding = [(i + 1) % pattern != 0 for i in range(n_layers)]
    window = 0 if r.d.get("sliding_window") is None else r.size("window", "sliding_window")
    return tuple(window if s else 0 for s in sliding)


def _whole_head_rope(r: ConfigReader, head_dim: int) -> tuple[float, RopeScaling | None]:
    """(theta, scaling) of rotary over whole heads, as Gemma has it."""
    theta, scaling, rotary_dim = read_rope(r, head_dim)
    if rotary_dim is not None or (scaling is not None and scaling.kind == "longrope"):
        raise r.fail(say("config.gemma_rope"))
    return theta, scaling


def _ropes(arch: str, r: ConfigReader, head_dim: int) -> tuple[tuple[float, RopeScaling | None],
                                                               tuple[float, RopeScaling | None] | None]:
    """(global theta, scaling), and the local layers' (None: the same as the global ones)."""
    if arch == "Gemma2ForCausalLM":
        return _whole_head_rope(r, head_dim), None
    params = r.d.get("rope_parameters")
    if isinstance(params, dict) and {"full_attention", "sliding_attention"} & params.keys():
        # transformers 5: one rope_parameters object per layer type.
        def of(kind: str, theta_key: str) -> tuple[float, RopeScaling | None]:
            sub = params.get(kind) or {}
            if not isinstance(sub, dict):
                raise r.fail(say("config.rope_parameters_of", kind=kind))
            return _whole_head_rope(ConfigReader({"rope_parameters": sub, "rope_theta": r.d.get(theta_key)},
                                                 r.source), head_dim)

        return of("full_attention", "rope_theta"), of("sliding_attention", "rope_local_base_freq")
    # transformers 4: rope_theta and rope_scaling are the global layers'; local ones have their own base.
    return _whole_head_rope(r, head_dim), (r.float("rope_local_base_freq", 10000.0, MAX_THETA), None)


def read_config(arch: str, outer: ConfigReader) -> dict[str, Any]:
    r = _text_config(arch, outer)
    if r.d.get("use_bidirectional_attention"):
        raise r.fail(say("config.bidirectional"))
    hidden, n_heads, n_kv_heads, head_dim = attention_shape(r)
    activation = r.activation("hidden_activation", r.d.get("hidden_act") or "gelu_pytorch_tanh")
    if activation not in ("gelu_tanh", "gelu"):
        raise r.fail(say("config.activation_only", arch=arch, name=shown(activation), only="GeGLU"))
    n_layers = r.size("layers", "num_hidden_layers")
    (theta, scaling), local = _ropes(arch, r, head_dim)
    bias = r.bool("attention_bias", False)
    return dict(
        n_layers=n_layers, hidden=hidden, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        ffn=r.size("ffn", "intermediate_size"), vocab=r.size("vocab", "vocab_size"),
        context_length=r.size("context", "max_position_embeddings"),
        norm_eps=r.float("rms_norm_eps", 1e-6, maximum=1.0), norm="rms", activation=activation, positions="rope",
        tie_embeddings=r.bool("tie_word_embeddings", True), qkv_bias=bias, o_bias=bias, mlp_bias=False,
        rope_theta=theta, rope_scaling=scaling, **r.special_tokens(), norm_offset=1.0,
        layer_windows=_layer_windows(r, n_layers),
        query_scale=math.sqrt(head_dim / r.float("query_pre_attn_scalar", 256.0)),
        attn_softcap=_softcap(r, "attn_logit_softcapping"), final_softcap=_softcap(r, "final_logit_softcapping"),
        qk_norm=arch != "Gemma2ForCausalLM",
        local_rope_theta=local[0] if local else None, local_rope_scaling=local[1] if local else None)


def canonical(name: str) -> str:
    """Gemma 3 image-text checkpoints keep the text tower under `language_model.` (transformers 4 names:
    language_model.model.layers..., language_model.lm_head; transformers 5: model.language_model.layers...)."""
    for prefix, canonical_prefix in (("language_model.model.", "model."), ("language_model.lm_head.", "lm_head."),
                                     ("model.language_model.", "model.")):
        if name.startswith(prefix):
            return canonical_prefix + name[len(prefix):]
    return name


def _qk_norm(c) -> bool:
    return c.qk_norm


# Llama's projections; a norm before and after attention and the MLP, (1 + w) each; Gemma 3 adds a per-head
# RMSNorm of Q and K. Always tied (a saved head is the embedding table).
LAYOUT = Layout(
    inputs=llama.INPUTS,
    layer=(TensorSpec("attn_norm", llama.LAYER + "input_layernorm.weight", vector, "blk.{i}.attn_norm.weight"),
           TensorSpec("post_attn_norm", llama.LAYER + "post_attention_layernorm.weight", vector,
                      "blk.{i}.post_attention_norm.weight"),
           TensorSpec("mlp_norm", llama.LAYER + "pre_feedforward_layernorm.weight", vector, "blk.{i}.ffn_norm.weight"),
           TensorSpec("post_mlp_norm", llama.LAYER + "post_feedforward_layernorm.weight", vector,
                      "blk.{i}.post_ffw_norm.weight"),
           TensorSpec("q_norm", llama.ATTN + "q_norm.weight", head_vector, "blk.{i}.attn_q_norm.weight", _qk_norm),
           TensorSpec("k_norm", llama.ATTN + "k_norm.weight", head_vector, "blk.{i}.attn_k_norm.weight", _qk_norm),
           *llama.QKV, *llama.O, *llama.MLP_PROJECTIONS),
    outputs=llama.OUTPUTS,
    canonical=canonical)


_LARGEST = {"gemma2": 46, "gemma3": 62}  # layers of the 27B model, whose scores use hidden / heads


def gguf_config(meta, arch: str, tied: bool, n_vocab: int) -> dict:
    """config.json of a Gemma2ForCausalLM / Gemma3ForCausalLM from the GGUF metadata (`meta`: convert.py's
    checked reader). What llama.cpp's converter leaves out are its fixed values: Gemma 3 layers are global
    every 6th (`sliding_window_pattern` 6, unless the file gives a number or one flag per layer), its local
    layers rotate with base 10000, and the scores are scaled by 1/sqrt(head_dim), except the 27B models (62
    layers for Gemma 3, 46 for Gemma 2), scaled by 1/sqrt(hidden / heads) as their query_pre_attn_scalar says.
    Q and K rows are not permuted (llama.cpp rotates Gemma in the NeoX layout, HF's own); its norms are stored
    as 1 + w, from which convert.py takes `norm_offset` again."""
    p = arch + "."
    n_heads = meta.size(p + "attention.head_count", "heads")
    hidden = meta.size(p + "embedding_length", "hidden")
    n_layers = meta.size(p + "block_count", "layers")
    head_dim = meta.size(p + "attention.key_length", "head_dim", max(hidden // n_heads, 1))
    eps = meta.number(p + "attention.layer_norm_rms_epsilon", 1e-6)
    pattern = meta.get(p + "attention.sliding_window_pattern", 2 if arch == "gemma2" else 6)
    if isinstance(pattern, (list, tuple)):  # one flag per layer: True for a sliding-window layer
        if len(pattern) != n_layers:
            raise ModelFormatError(say("gguf.sliding_pattern", path=meta.path.name, flags=len(pattern),
                                       layers=n_layers))
        sliding = [bool(flag) for flag in pattern]
    else:  # every pattern-th layer is global
        pattern = meta.size(p + "attention.sliding_window_pattern", "layers", pattern)
        sliding = [(i + 1) % pattern != 0 for i in range(n_layers)]
    config = {
        "architectures": ["Gemma2ForCausalLM" if arch == "gemma2" else "Gemma3ForCausalLM"],
        "model_type": "gemma2" if arch == "gemma2" else "gemma3_text",
        "hidden_size": hidden,
        "intermediate_size": meta.size(p + "feed_forward_length", "ffn"),
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": meta.size(p + "attention.head_count_kv", "heads", n_heads),
        "head_dim": head_dim,
        "max_position_embeddings": meta.size(p + "context_length", "context"),
        "rms_norm_eps": float(str(np.float32(eps))),  # GGUF stores float32: 1e-6 reads 9.99999997e-07
        "rope_theta": meta.number(p + "rope.freq_base", 10000.0 if arch == "gemma2" else 1_000_000.0),
        "query_pre_attn_scalar": hidden // n_heads if n_layers == _LARGEST[arch] else head_dim,
        "sliding_window": meta.size(p + "attention.sliding_window", "window"),
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
        "vocab_size": n_vocab,
        "tie_word_embeddings": tied,
        "hidden_activation": "gelu_pytorch_tanh",
        "attention_bias": False,
        "torch_dtype": "float32",
    }
    if arch == "gemma2":
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):  # None: no cap
            config[key] = meta.number(p + key, math.nan) if meta.get(p + key) is not None else None
    else:
        config["rope_local_base_freq"] = 10000.0
        rope_type = meta.get(p + "rope.scaling.type", "none")
        if rope_type == "linear":
            config["rope_scaling"] = {"rope_type": "linear", "factor": meta.number(p + "rope.scaling.factor", math.nan)}
        elif rope_type not in ("none", None):
            raise ModelFormatError(say("gguf.rope_scaling", path=meta.path.name, kind=rope_type))
    for key, name in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                      ("eos_token_id", "tokenizer.ggml.eos_token_id"),
                      ("pad_token_id", "tokenizer.ggml.padding_token_id")):
        if meta.get(name) is not None:
            config[key] = meta.count(name, minimum=0)
    return config


GGUF = {"gemma2": GgufArch("Gemma2ForCausalLM", config=gguf_config, tokenizer="sentencepiece"),
        "gemma3": GgufArch("Gemma3ForCausalLM", config=gguf_config, tokenizer="sentencepiece")}
