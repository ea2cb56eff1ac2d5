"""Phi-3 and Phi-4-mini (`phi3`): Llama's layer (llama.py) with Q, K, V rows in one `qkv_proj` and gate then up
rows in one `gate_up_proj` (llama.cpp keeps both fused too: `attn_qkv`, and `ffn_up` of 2 ffn rows), no
biases; partial rotary (Phi-4-mini turns 0.75 of each head), longrope, one sliding window on every layer."""

from __future__ import annotations

from typing import Any

from inference.model.families import llama
from inference.model.families.parts import GgufArch, Layout, never, projection
from inference.model.families.reading import ConfigReader, one_window

ARCHITECTURES = {"Phi3ForCausalLM": "phi3"}
GGUF = {"phi3": GgufArch("Phi3ForCausalLM")}  # rows in HF's order (NeoX rotary in llama.cpp)
BLOCK = llama.BLOCK  # split back into Llama's Q, K, V and gate, up by weights.build_layer


def read_config(arch: str, r: ConfigReader) -> dict[str, Any]:
    """Llama's keys, partial rotary allowed, one sliding window on every layer."""
    return llama.read_config(arch, r, partial_rotary=True, window=_every_layer_window)


def _every_layer_window(r: ConfigReader, arch: str, n_layers: int) -> int | None:
    return one_window(r)


LAYOUT = Layout(inputs=llama.INPUTS, outputs=llama.OUTPUTS, layer=(
    *llama.NORMS,
    *projection("qkv", llama.ATTN + "qkv_proj", lambda c: c.q_dim + 2 * c.kv_dim, llama.hidden_of, never,
                "blk.{i}.attn_qkv"),
    *projection("o", llama.ATTN + "o_proj", llama.hidden_of, llama.q_dim_of, never, "blk.{i}.attn_output"),
    *projection("gate_up", llama.MLP + "gate_up_proj", lambda c: 2 * c.ffn, llama.hidden_of, never, "blk.{i}.ffn_up"),
    *projection("down", llama.MLP + "down_proj", llama.hidden_of, llama.ffn_of, never, "blk.{i}.ffn_down")))
