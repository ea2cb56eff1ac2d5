"""The shape of a model, read from a Hugging Face `config.json` and checked before any weight is read.

`ModelConfig.from_hf` finds the family of the config's architecture in the registry (families/registry.py)
and lets that family's reader read the keys (families/<family>.py, with families/reading.py's typed
readers); every field any family sets is here, with the value a family without it means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.errors import ModelFormatError

from inference.messages import say, shown
from inference.model.families import registry
from inference.model.families.reading import ConfigReader, RopeScaling


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # the HF class name, e.g. "LlamaForCausalLM"
    family: str  # its row in families/registry.py: "llama" (Llama, Mistral, Qwen2), "qwen3", "phi3", "gpt2", "gemma"
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context_length: int
    norm_eps: float
    norm: str  # "rms" or "layer"
    activation: str  # "silu", "gelu_tanh", "gelu", "relu" (gated or not: the family's BlockTraits)
    positions: str  # "rope" or "learned"
    tie_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    rope_theta: float | None = None
    rope_scaling: RopeScaling | None = None
    rotary_dim: int | None = None  # the rotated leading dims of each head (partial rotary); None: all
    qk_norm: bool = False  # Qwen3, Gemma 3: an RMSNorm over each Q and K head before rotary
    sliding_window: int | None = None  # one window on every layer
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()
    norm_offset: float = 0.0  # added to every stored norm scale when loaded (Gemma stores w of x * (1 + w))
    layer_windows: tuple[int, ...] = ()  # per layer: its sliding window, 0 for a global layer (Gemma)
    query_scale: float = 1.0  # Q is multiplied by this (Gemma: sqrt(head_dim / query_pre_attn_scalar))
    attn_softcap: float | None = None  # scores capped as cap * tanh(s / cap) (Gemma 2)
    final_softcap: float | None = None  # the same for the final logits
    local_rope_theta: float | None = None  # the windowed layers' own rotary base (Gemma 3)
    local_rope_scaling: RopeScaling | None = None

    @property
    def rope_dim(self) -> int:
        """How many leading dims of each head rotary turns (the rest pass through)."""
        return self.rotary_dim or self.head_dim

    def window_of(self, layer: int) -> int | None:
        """How many most recent positions `layer` attends to (None: all of them)."""
        if self.layer_windows:
            return self.layer_windows[layer] or None
        return self.sliding_window

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @classmethod
    def from_hf(cls, d: dict[str, Any], source: str = "config.json") -> "ModelConfig":
        """Validate a config.json dict; any problem is one ModelFormatError line naming `source`."""
        if not isinstance(d, dict):
            raise ModelFormatError(say("load.not_object", path=source))
        archs = d.get("architectures") or []
        arch = archs[0] if isinstance(archs, list) and archs else None
        if arch is not None and not isinstance(arch, str):
            raise ModelFormatError(say("file.in", path=source,
                                       problem=say("config.architectures", value=shown(archs))))
        if arch is None and not isinstance(d.get("model_type"), (str, type(None))):
            raise ModelFormatError(say("file.in", path=source,
                                       problem=say("config.model_type", value=shown(d.get("model_type")))))
        if arch is None:
            arch = registry.architecture_of_model_type(d.get("model_type"))
        family = registry.by_architecture(arch)
        if family is None:
            named = arch or d.get("model_type") or "none given"
            raise ModelFormatError(say("load.architecture", path=source, architecture=named,
                                       supported=say("load.supported", names=", ".join(registry.architectures()))))
        return cls(architecture=arch, family=family.name, **family.read_config(arch, ConfigReader(d, source)))
