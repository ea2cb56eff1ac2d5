"""The shape of a model, read from a Hugging Face `config.json` and checked before any weight is read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from inference.errors import ModelFormatError

# HF class name -> the decoder family that runs it.
SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "llama",
    "GPT2LMHeadModel": "gpt2",
    "Qwen3ForCausalLM": "qwen3",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma",
    "Gemma3ForCausalLM": "gemma",
    "Gemma3ForConditionalGeneration": "gemma",  # its text tower; the vision tower is not read
}

# The most any size in a config may be: far above every real model, low enough that nothing is allocated
# from a corrupt or hostile number (a 2^31-layer model is refused here, not when its tensors are listed).
LIMITS = {
    "layers": 1024, "hidden": 1 << 17, "heads": 1024, "head_dim": 4096, "ffn": 1 << 20, "vocab": 1 << 22,
    "context": 1 << 24, "window": 1 << 24,
}
MAX_INT = 1 << 31  # any other integer a config gives (token ids, original context...)
MAX_THETA = 1e12  # a rotary base beyond this has no meaning (real ones: 1e4 to 5e8)
MAX_FACTOR = 1e4  # rope scaling factors, soft-caps and other multipliers

_ACTIVATIONS = {
    "silu": "silu",
    "swish": "silu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}


@dataclass(frozen=True)
class RopeScaling:
    """How rotary frequencies are stretched for a longer window (`linear`, `llama3` or `longrope`).

    longrope (Phi-3/4): each frequency i divided by short_factor[i] while the sequence fits
    `original_context`, by long_factor[i] beyond it, and cos/sin times `attention_factor` throughout."""

    kind: str
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context: int = 8192
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()
    attention_factor: float = 1.0


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # the HF class name, e.g. "LlamaForCausalLM"
    family: str  # "llama" (Llama, Mistral, Qwen2), "qwen3", "phi3" or "gpt2"
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
    activation: str  # "silu" (gated MLP), "gelu_tanh", "gelu", "relu"
    positions: str  # "rope" or "learned"
    tie_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    rope_theta: float | None = None
    rope_scaling: RopeScaling | None = None
    rotary_dim: int | None = None  # the rotated leading dims of each head (partial rotary); None: all
    qk_norm: bool = False  # Qwen3: an RMSNorm over each Q and K head before rotary
    sliding_window: int | None = None
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()

    @property
    def rope_dim(self) -> int:
        """How many leading dims of each head rotary turns (the rest pass through)."""
        return self.rotary_dim or self.head_dim

    @property
    def norm_offset(self) -> float:
        """Added to every stored norm scale when loaded (Gemma stores w of x * (1 + w))."""
        return 0.0

    def window_of(self, layer: int) -> int | None:
        """How many most recent positions `layer` attends to (None: all of them)."""
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
            raise ModelFormatError(f"{source}: expected a JSON object")
        archs = d.get("architectures") or []
        arch = archs[0] if isinstance(archs, list) and archs else None
        if arch is not None and not isinstance(arch, str):
            raise ModelFormatError(f"{source}: 'architectures' must list class names, got {archs!r}"[:200])
        if arch is None and not isinstance(d.get("model_type"), (str, type(None))):
            raise ModelFormatError(f"{source}: 'model_type' must be a string, got {d.get('model_type')!r}"[:200])
        if arch is None:
            arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                    "qwen2": "Qwen2ForCausalLM", "gpt2": "GPT2LMHeadModel",
                    "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
                    "gemma3_text": "Gemma3ForCausalLM",
                    "gemma3": "Gemma3ForConditionalGeneration"}.get(d.get("model_type"))
        if arch not in SUPPORTED_ARCHITECTURES:
            shown = arch or d.get("model_type") or "none given"
            raise ModelFormatError(
                f"{source}: unsupported architecture {shown!r} "
                f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
        reader = _Reader(d, source)
        if SUPPORTED_ARCHITECTURES[arch] == "gpt2":
            return _gpt2_config(arch, reader)
        if SUPPORTED_ARCHITECTURES[arch] == "gemma":
            from inference.model.families.gemma import gemma_config  # gemma.py builds on this module's readers

            return gemma_config(arch, reader)
        return _llama_config(arch, reader)


class _Reader:
    """Typed access to config keys with one-line errors."""

    def __init__(self, d: dict[str, Any], source: str):
        self.d, self.source = d, source

    def fail(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.source}: {message}")

    def int(self, *keys: str, default: int | None = None, minimum: int = 1, maximum: int = MAX_INT) -> int:
        for key in keys:
            value = self.d.get(key)
            if value is not None:
                break
        else:
            if default is None:
                raise self.fail(f"missing {keys[0]!r}")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer, got {value!r}")
        if value < minimum:
            raise self.fail(f"{key!r} must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(f"{key!r} of {value} is beyond the largest supported ({maximum:,})")
        return value

    def size(self, kind: str, *keys: str, default: int | None = None) -> int:
        """A positive size bounded by LIMITS[kind]."""
        return self.int(*keys, default=default, maximum=LIMITS[kind])

    def float(self, key: str, default: float, maximum: float = MAX_FACTOR) -> float:
        value = self.d.get(key, default)
        return _number(self, repr(key), default if value is None else value, maximum)

    def bool(self, key: str, default: bool) -> bool:
        value = self.d.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(f"{key!r} must be true or false, got {value!r}")
        return value

    def token_ids(self, key: str) -> tuple[int, ...]:
        value = self.d.get(key)
        if value is None:
            return ()
        values = value if isinstance(value, list) else [value]
        if len(values) > 1024 or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_INT
                                         for v in values):
            raise self.fail(f"{key!r} must be a token id or a list of them, got {value!r}")
        return tuple(values)

    def activation(self, key: str, default: str) -> str:
        name = self.d.get(key) or default
        if not isinstance(name, str) or name not in _ACTIVATIONS:
            raise self.fail(f"unsupported activation {name!r}")
        return _ACTIVATIONS[name]


def _heads(r: _Reader, hidden: int, n_heads: int, n_kv_heads: int) -> int:
    if n_heads % n_kv_heads:
        raise r.fail(f"{n_heads} attention heads cannot be grouped over {n_kv_heads} key/value heads")
    if r.d.get("head_dim") is not None:
        return r.size("head_dim", "head_dim")
    if hidden % n_heads:
        raise r.fail(f"hidden size {hidden} is not divisible by {n_heads} heads")
    return hidden // n_heads


def _number(r: _Reader, where: str, value, maximum: float = MAX_FACTOR) -> float:
    """A finite number above 0 and at most `maximum` (NaN, inf, 0 and negatives refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise r.fail(f"{where} must be a positive number, got {value!r}"[:200])
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        number = math.inf
    if not (math.isfinite(number) and 0 < number <= maximum):
        raise r.fail(f"{where} must be a positive number (finite, at most {maximum:g}), got {value!r}"[:200])
    return number


def _rope(r: _Reader, head_dim: int) -> tuple[float, RopeScaling | None, int | None]:
    """(theta, scaling, rotary_dim): transformers 5 keeps them together in `rope_parameters`; older configs
    put theta and partial_rotary_factor at the top level and the scaling in `rope_scaling`."""
    params = r.d.get("rope_parameters")
    if params is not None and not isinstance(params, dict):
        raise r.fail("'rope_parameters' must be an object")
    params = params or {}
    theta = params.get("rope_theta", r.d.get("rope_theta"))
    theta = _number(r, "'rope_theta'", 10000.0 if theta is None else theta, MAX_THETA)
    scaling = r.d.get("rope_scaling") or params
    if not isinstance(scaling, dict):
        raise r.fail("'rope_scaling' must be an object")
    partial = _number(r, "'partial_rotary_factor'",
                      scaling.get("partial_rotary_factor", r.d.get("partial_rotary_factor", 1.0)), 1.0)
    rotary_dim = int(head_dim * partial)
    if partial > 1.0 or rotary_dim < 2 or rotary_dim % 2:
        raise r.fail(f"partial_rotary_factor {partial} of head_dim {head_dim} gives {rotary_dim} rotary dims; "
                     "an even number from 2 to head_dim is needed")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind is not None and not isinstance(kind, str):
        raise r.fail(f"rope scaling type must be a string, got {kind!r}"[:200])
    kind = "longrope" if kind == "su" else kind  # Phi-3's early name for it
    rotary = None if rotary_dim == head_dim else rotary_dim
    if kind in (None, "default"):
        return theta, None, rotary
    if kind == "longrope":
        return theta, _longrope(r, scaling, rotary_dim), rotary
    factor = _number(r, f"rope scaling {kind!r} 'factor'", scaling.get("factor"))
    if kind == "linear":
        return theta, RopeScaling("linear", factor), rotary
    if kind == "llama3":
        low = _number(r, "llama3 rope 'low_freq_factor'", scaling.get("low_freq_factor"))
        high = _number(r, "llama3 rope 'high_freq_factor'", scaling.get("high_freq_factor"))
        if high <= low:
            raise r.fail(f"llama3 rope 'high_freq_factor' {high} must be above 'low_freq_factor' {low}")
        original = _Reader(scaling, r.source).size("context", "original_max_position_embeddings")
        return theta, RopeScaling("llama3", factor, low_freq_factor=low, high_freq_factor=high,
                                  original_context=original), rotary
    raise r.fail(f"unsupported rope_scaling type {kind!r} (supported: linear, llama3, longrope)")


def _longrope(r: _Reader, scaling: dict, rotary_dim: int) -> RopeScaling:
    """As transformers' _compute_longrope_parameters: `factor` defaults to max_position_embeddings /
    original_max_position_embeddings, `attention_factor` to sqrt(1 + ln factor / ln original) (1 when the
    factor is at most 1)."""
    factors = {}
    for key in ("short_factor", "long_factor"):
        values = scaling.get(key)
        if not isinstance(values, list) or len(values) != rotary_dim // 2:
            raise r.fail(f"longrope needs '{key}' as a list of {rotary_dim // 2} numbers (one per rotary "
                         f"frequency), got {values!r}"[:200])
        factors[key] = tuple(_number(r, f"longrope '{key}' entries", v) for v in values)
    original = scaling.get("original_max_position_embeddings", r.d.get("original_max_position_embeddings"))
    if isinstance(original, bool) or not isinstance(original, int) or not 1 < original <= LIMITS["context"]:
        raise r.fail(f"longrope needs a 'original_max_position_embeddings' from 2 to {LIMITS['context']:,}, "
                     f"got {original!r}"[:200])
    factor = scaling.get("factor")
    factor = r.size("context", "max_position_embeddings") / original if factor is None else \
        _number(r, "'factor'", factor)
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return RopeScaling("longrope", factor, original_context=original, short_factor=factors["short_factor"],
                       long_factor=factors["long_factor"],
                       attention_factor=_number(r, "'attention_factor'", attention))


def _sliding_window(r: _Reader, arch: str, n_layers: int) -> int | None:
    layer_types = r.d.get("layer_types")
    if arch in ("MistralForCausalLM", "Phi3ForCausalLM"):  # one window on every layer
        window = r.d.get("sliding_window")
        return None if window is None else r.size("window", "sliding_window")
    if arch == "Qwen3ForCausalLM":
        return _qwen3_window(r, n_layers)
    if arch == "Qwen2ForCausalLM" and r.d.get("use_sliding_window"):
        raise r.fail("Qwen2 per-layer sliding-window attention is not supported")
    if layer_types is not None and not isinstance(layer_types, list):
        raise r.fail("'layer_types' must be a list")
    if isinstance(layer_types, list) and any(t != "full_attention" for t in layer_types):
        raise r.fail("per-layer sliding-window attention is not supported")
    return None


def _qwen3_window(r: _Reader, n_layers: int) -> int | None:
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
        raise r.fail(f"'layer_types' must list one type for each of the {n_layers} layers")
    sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    if not sliding:
        return None
    if len(sliding) < n_layers:
        raise r.fail(f"a sliding window on some layers only ({len(sliding)} of {n_layers}, from layer "
                     f"{sliding[0]}) is not supported for Qwen3; only one window on every layer or none")
    return window


def attention_shape(r: _Reader) -> tuple[int, int, int, int]:
    """(hidden, query heads, KV heads, head_dim) of a rotary family, checked against each other."""
    hidden = r.size("hidden", "hidden_size")
    n_heads = r.size("heads", "num_attention_heads")
    n_kv_heads = r.size("heads", "num_key_value_heads", default=n_heads)
    head_dim = _heads(r, hidden, n_heads, n_kv_heads)
    if head_dim % 2:
        raise r.fail(f"head_dim {head_dim} must be even for rotary embeddings")
    return hidden, n_heads, n_kv_heads, head_dim


def _llama_config(arch: str, r: _Reader) -> ModelConfig:
    hidden, n_heads, n_kv_heads, head_dim = attention_shape(r)
    activation = r.activation("hidden_act", "silu")
    if activation != "silu":
        raise r.fail(f"{arch} with activation {r.d.get('hidden_act')!r} is not supported (SwiGLU only)")
    theta, scaling, rotary_dim = _rope(r, head_dim)
    if rotary_dim is not None and arch != "Phi3ForCausalLM":  # transformers turns the whole head there
        raise r.fail(f"partial rotary embeddings are not supported for {arch}")
    attention_bias = r.bool("attention_bias", False)
    n_layers = r.size("layers", "num_hidden_layers")
    return ModelConfig(
        architecture=arch, family=SUPPORTED_ARCHITECTURES[arch],
        n_layers=n_layers, hidden=hidden,
        n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        ffn=r.size("ffn", "intermediate_size"), vocab=r.size("vocab", "vocab_size"),
        context_length=r.size("context", "max_position_embeddings"),
        norm_eps=r.float("rms_norm_eps", 1e-6, maximum=1.0), norm="rms", activation="silu", positions="rope",
        tie_embeddings=r.bool("tie_word_embeddings", False),
        qkv_bias=True if arch == "Qwen2ForCausalLM" else attention_bias,
        o_bias=False if arch == "Qwen2ForCausalLM" else attention_bias,
        mlp_bias=r.bool("mlp_bias", False),
        rope_theta=theta, rope_scaling=scaling, rotary_dim=rotary_dim, qk_norm=arch == "Qwen3ForCausalLM",
        sliding_window=_sliding_window(r, arch, n_layers),
        bos_id=(r.token_ids("bos_token_id") or (None,))[0], eos_ids=r.token_ids("eos_token_id"),
    )


def _gpt2_config(arch: str, r: _Reader) -> ModelConfig:
    for key, wanted in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                        ("add_cross_attention", False)):
        if r.bool(key, wanted) != wanted:
            raise r.fail(f"GPT-2 with {key}={not wanted} is not supported")
    hidden = r.size("hidden", "n_embd", "hidden_size")
    n_heads = r.size("heads", "n_head", "num_attention_heads")
    if hidden % n_heads:
        raise r.fail(f"hidden size {hidden} is not divisible by {n_heads} heads")
    return ModelConfig(
        architecture=arch, family="gpt2",
        n_layers=r.size("layers", "n_layer", "num_hidden_layers"), hidden=hidden,
        n_heads=n_heads, n_kv_heads=n_heads, head_dim=hidden // n_heads,
        ffn=r.size("ffn", "n_inner", default=4 * hidden), vocab=r.size("vocab", "vocab_size"),
        context_length=r.size("context", "n_positions", "n_ctx", "max_position_embeddings"),
        norm_eps=r.float("layer_norm_epsilon", 1e-5, maximum=1.0), norm="layer",
        activation=r.activation("activation_function", "gelu_new"), positions="learned",
        tie_embeddings=r.bool("tie_word_embeddings", True),
        qkv_bias=True, o_bias=True, mlp_bias=True,
        bos_id=(r.token_ids("bos_token_id") or (None,))[0], eos_ids=r.token_ids("eos_token_id"),
    )
