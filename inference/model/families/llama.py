"""Llama and the families that share its layer: Mistral, Qwen2 (`llama`) and Qwen3 (`qwen3`: an RMSNorm over
each Q and K head before rotary); Phi-3 (phi3.py) builds on the same parts.

Pre-RMSNorm, rotary Q/K, grouped-query attention, a gated SiLU MLP: on the own kernels one decode step of
such a layer is one kernels call (`fused_decode`). What each reads from config.json, the tensors it
keeps (HF and GGUF names), and the GGUF architectures it imports.
"""

from __future__ import annotations

from typing import Any, Callable

from inference.messages import say, shown
from inference.model.families.parts import (BlockTraits, GgufArch, Layout, TensorSpec, head_vector, projection,
                                            table, untied, vector)
from inference.model.families.reading import (ConfigReader, attention_shape, no_layer_windows, one_window,
                                              read_rope)

ARCHITECTURES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2"}
QWEN3_ARCHITECTURES = {"Qwen3ForCausalLM": "qwen3"}

# llama.cpp permutes Llama's Q and K rows for its rotary layout; qwen2, qwen3 and phi3 keep HF's order
GGUF = {"llama": GgufArch("LlamaForCausalLM", permuted_rotary=True), "qwen2": GgufArch("Qwen2ForCausalLM")}
QWEN3_GGUF = {"qwen3": GgufArch("Qwen3ForCausalLM")}

BLOCK = BlockTraits(gated_mlp=True, fused_decode=True)


def read_config(arch: str, r: ConfigReader, partial_rotary: bool = False,
                window: Callable[[ConfigReader, str, int], int | None] | None = None) -> dict[str, Any]:
    """Llama, Mistral, Qwen2 (and the shared keys of Qwen3 and Phi-3, with their own `window`)."""
    hidden, n_heads, n_kv_heads, head_dim = attention_shape(r)
    activation = r.activation("hidden_act", "silu")
    if activation != "silu":
        raise r.fail(say("config.activation_only", arch=arch, name=shown(r.d.get("hidden_act")), only="SwiGLU"))
    theta, scaling, rotary_dim = read_rope(r, head_dim)
    if rotary_dim is not None and not partial_rotary:  # transformers turns the whole head there
        raise r.fail(say("config.partial_rotary", arch=arch))
    attention_bias = r.bool("attention_bias", False)
    n_layers = r.size("layers", "num_hidden_layers")
    return dict(
        n_layers=n_layers, hidden=hidden, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        ffn=r.size("ffn", "intermediate_size"), vocab=r.size("vocab", "vocab_size"),
        context_length=r.size("context", "max_position_embeddings"),
        norm_eps=r.float("rms_norm_eps", 1e-6, maximum=1.0), norm="rms", activation="silu", positions="rope",
        tie_embeddings=r.bool("tie_word_embeddings", False),
        qkv_bias=True if arch == "Qwen2ForCausalLM" else attention_bias,
        o_bias=False if arch == "Qwen2ForCausalLM" else attention_bias,
        mlp_bias=r.bool("mlp_bias", False),
        rope_theta=theta, rope_scaling=scaling, rotary_dim=rotary_dim,
        sliding_window=(window or _window)(r, arch, n_layers), **r.special_tokens())


def _window(r: ConfigReader, arch: str, n_layers: int) -> int | None:
    if arch == "MistralForCausalLM":  # one window on every layer
        return one_window(r)
    if arch == "Qwen2ForCausalLM" and r.d.get("use_sliding_window"):
        raise r.fail(say("config.qwen2_windows"))
    no_layer_windows(r)
    return None


def read_qwen3_config(arch: str, r: ConfigReader) -> dict[str, Any]:
    return {**read_config(arch, r, window=_qwen3_window), "qk_norm": True}


def _qwen3_window(r: ConfigReader, arch: str, n_layers: int) -> int | None:
    """Qwen3 keeps a window only with use_sliding_window, on the layers `layer_types` marks (by default
    those from max_window_layers on); one window on every layer is supported, a mix is not."""
    if not r.bool("use_sliding_window", False) or r.d.get("sliding_window") is None:
        return None
    window = r.size("window", "sliding_window")
    types = r.d.get("layer_types")
    if types is None:
        first = r.int("max_window_layers", default=28, minimum=0)
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers:
        raise r.fail(say("config.layer_types_count", layers=n_layers))
    sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    if not sliding:
        return None
    if len(sliding) < n_layers:
        raise r.fail(say("config.qwen3_windows", sliding=len(sliding), layers=n_layers, first=sliding[0]))
    return window


LAYER, ATTN, MLP = "model.layers.{i}.", "model.layers.{i}.self_attn.", "model.layers.{i}.mlp."


def hidden_of(c) -> int:
    return c.hidden


def q_dim_of(c) -> int:
    return c.q_dim


def kv_dim_of(c) -> int:
    return c.kv_dim


def ffn_of(c) -> int:
    return c.ffn


INPUTS = (TensorSpec("embed", "model.embed_tokens.weight", table, "token_embd.weight"),)
OUTPUTS = (TensorSpec("final_norm", "model.norm.weight", vector, "output_norm.weight"),
           TensorSpec("head", "lm_head.weight", table, "output.weight", untied))
NORMS = (TensorSpec("attn_norm", LAYER + "input_layernorm.weight", vector, "blk.{i}.attn_norm.weight"),
         TensorSpec("mlp_norm", LAYER + "post_attention_layernorm.weight", vector, "blk.{i}.ffn_norm.weight"))
QKV = (*projection("q", ATTN + "q_proj", q_dim_of, hidden_of, lambda c: c.qkv_bias, "blk.{i}.attn_q", gguf_bias=True),
       *projection("k", ATTN + "k_proj", kv_dim_of, hidden_of, lambda c: c.qkv_bias, "blk.{i}.attn_k", gguf_bias=True),
       *projection("v", ATTN + "v_proj", kv_dim_of, hidden_of, lambda c: c.qkv_bias, "blk.{i}.attn_v", gguf_bias=True))
O = projection("o", ATTN + "o_proj", hidden_of, q_dim_of, lambda c: c.o_bias, "blk.{i}.attn_output")
MLP_PROJECTIONS = (
    *projection("gate", MLP + "gate_proj", ffn_of, hidden_of, lambda c: c.mlp_bias, "blk.{i}.ffn_gate"),
    *projection("up", MLP + "up_proj", ffn_of, hidden_of, lambda c: c.mlp_bias, "blk.{i}.ffn_up"),
    *projection("down", MLP + "down_proj", hidden_of, ffn_of, lambda c: c.mlp_bias, "blk.{i}.ffn_down"))
QK_NORMS = (TensorSpec("q_norm", ATTN + "q_norm.weight", head_vector, "blk.{i}.attn_q_norm.weight"),
            TensorSpec("k_norm", ATTN + "k_norm.weight", head_vector, "blk.{i}.attn_k_norm.weight"))

LAYOUT = Layout(inputs=INPUTS, layer=(*NORMS, *QKV, *O, *MLP_PROJECTIONS), outputs=OUTPUTS)
QWEN3_LAYOUT = Layout(inputs=INPUTS, layer=(*NORMS, *QKV, *QK_NORMS, *O, *MLP_PROJECTIONS), outputs=OUTPUTS)
