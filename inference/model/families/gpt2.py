"""GPT-2: pre-LayerNorm (with a shift), learned positions added to the embeddings, a plain MLP (GELU by
default), biases everywhere; its Conv1D layers store each matrix as (in, out)."""

from __future__ import annotations

from typing import Any, Callable

from inference.messages import say
from inference.model.families.parts import BlockTraits, Layout, TensorSpec, table, untied, vector
from inference.model.families.reading import ConfigReader

ARCHITECTURES = {"GPT2LMHeadModel": "gpt2"}
BLOCK = BlockTraits(gated_mlp=False, conv1d=True)


def read_config(arch: str, r: ConfigReader) -> dict[str, Any]:
    for key, wanted in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                        ("add_cross_attention", False)):
        if r.bool(key, wanted) != wanted:
            raise r.fail(say("config.gpt2_flag", key=key, value=not wanted))
    hidden = r.size("hidden", "n_embd", "hidden_size")
    n_heads = r.size("heads", "n_head", "num_attention_heads")
    if hidden % n_heads:
        raise r.fail(say("config.heads_divide", hidden=hidden, heads=n_heads))
    return dict(
        n_layers=r.size("layers", "n_layer", "num_hidden_layers"), hidden=hidden,
        n_heads=n_heads, n_kv_heads=n_heads, head_dim=hidden // n_heads,
        ffn=r.size("ffn", "n_inner", default=4 * hidden), vocab=r.size("vocab", "vocab_size"),
        context_length=r.size("context", "n_positions", "n_ctx", "max_position_embeddings"),
        norm_eps=r.float("layer_norm_epsilon", 1e-5, maximum=1.0), norm="layer",
        activation=r.activation("activation_function", "gelu_new"), positions="learned",
        tie_embeddings=r.bool("tie_word_embeddings", True),
        qkv_bias=True, o_bias=True, mlp_bias=True, **r.special_tokens())


def canonical(name: str) -> str:
    """Checkpoints saved from the bare GPT2Model have no "transformer." prefix."""
    return name if name.startswith(("transformer.", "lm_head.")) else "transformer." + name


LAYER = "transformer.h.{i}."


def _conv1d(role: str, name: str, inp: Callable, out: Callable) -> tuple[TensorSpec, TensorSpec]:
    return (TensorSpec(role, LAYER + name + ".weight", lambda c: (inp(c), out(c))),
            TensorSpec(role + "_bias", LAYER + name + ".bias", lambda c: (out(c),)))


def _layer_norm(role: str, name: str) -> tuple[TensorSpec, TensorSpec]:
    return TensorSpec(role, name + ".weight", vector), TensorSpec(role + "_bias", name + ".bias", vector)


def _hidden(c) -> int:
    return c.hidden


# Roles as weights.build_layer knows them: `qkv` fused, the MLP's `up` (c_fc) and `down` (c_proj).
LAYOUT = Layout(
    inputs=(TensorSpec("embed", "transformer.wte.weight", table),
            TensorSpec("positions", "transformer.wpe.weight", lambda c: (c.context_length, c.hidden))),
    layer=(*_layer_norm("attn_norm", LAYER + "ln_1"), *_conv1d("qkv", "attn.c_attn", _hidden, lambda c: 3 * c.hidden),
           *_conv1d("o", "attn.c_proj", _hidden, _hidden), *_layer_norm("mlp_norm", LAYER + "ln_2"),
           *_conv1d("up", "mlp.c_fc", _hidden, lambda c: c.ffn), *_conv1d("down", "mlp.c_proj", lambda c: c.ffn, _hidden)),
    outputs=(*_layer_norm("final_norm", "transformer.ln_f"), TensorSpec("head", "lm_head.weight", table, present=untied)),
    canonical=canonical)
