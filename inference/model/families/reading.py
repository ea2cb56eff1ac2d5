"""What a family's config reader reads a `config.json` with: typed keys with one-line errors (`ConfigReader`),
the bounds every size is held to (`LIMITS`), and the readers families share (`read_rope`, `attention_shape`).

Torch-free, as every family description is: the GUI's model picker reads configs through these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from inference.errors import ModelFormatError
from inference.messages import Message, say, shown

# The most any size in a config may be: far above every real model, low enough that nothing is allocated
# from a corrupt or hostile number (a 2^31-layer model is refused here, not when its tensors are listed).
LIMITS = {
    "layers": 1024, "hidden": 1 << 17, "heads": 1024, "head_dim": 4096, "ffn": 1 << 20, "vocab": 1 << 22,
    "context": 1 << 24, "window": 1 << 24,
}
MAX_INT = 1 << 31  # any other integer a config gives (token ids, original context...)
MAX_THETA = 1e12  # a rotary base beyond this has no meaning (real ones: 1e4 to 5e8)
MAX_FACTOR = 1e4  # rope scaling factors, soft-caps and other multipliers

ACTIVATIONS = {
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


class ConfigReader:
    """Typed access to config keys with one-line errors naming `source`."""

    def __init__(self, d: dict[str, Any], source: str):
        self.d, self.source = d, source

    def fail(self, problem: Message | str) -> ModelFormatError:
        """`problem` (a Message; a family's rarer refusal may still be English) in the "{source}: {problem}" shape."""
        return ModelFormatError(say("file.in", path=self.source, problem=problem))

    def int(self, *keys: str, default: int | None = None, minimum: int = 1, maximum: int = MAX_INT) -> int:
        for key in keys:
            value = self.d.get(key)
            if value is not None:
                break
        else:
            if default is None:
                raise self.fail(say("config.missing", key=keys[0]))
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(say("config.integer", key=key, value=shown(value)))
        if value < minimum:
            raise self.fail(say("config.at_least", key=key, low=minimum, value=value))
        if value > maximum:
            raise self.fail(say("config.too_large", key=key, value=value, high=maximum))
        return value

    def size(self, kind: str, *keys: str, default: int | None = None) -> int:
        """A positive size bounded by LIMITS[kind]."""
        return self.int(*keys, default=default, maximum=LIMITS[kind])

    def float(self, key: str, default: float, maximum: float = MAX_FACTOR) -> float:
        value = self.d.get(key, default)
        return self.number(repr(key), default if value is None else value, maximum)

    def number(self, where: str, value, maximum: float = MAX_FACTOR) -> float:
        """A finite number above 0 and at most `maximum` (NaN, inf, 0 and negatives refused)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(say("config.positive", where=where, value=shown(value)))
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float
            number = math.inf
        if not (math.isfinite(number) and 0 < number <= maximum):
            raise self.fail(say("config.positive_at_most", where=where, high=maximum, value=shown(value)))
        return number

    def bool(self, key: str, default: bool) -> bool:
        value = self.d.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(say("config.bool", key=key, value=shown(value)))
        return value

    def token_ids(self, key: str) -> tuple[int, ...]:
        value = self.d.get(key)
        if value is None:
            return ()
        values = value if isinstance(value, list) else [value]
        if len(values) > 1024 or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_INT
                                         for v in values):
            raise self.fail(say("config.token_ids", key=key, value=shown(value)))
        return tuple(values)

    def special_tokens(self) -> dict[str, Any]:
        """bos_id and eos_ids, as ModelConfig fields."""
        return {"bos_id": (self.token_ids("bos_token_id") or (None,))[0], "eos_ids": self.token_ids("eos_token_id")}

    def activation(self, key: str, default: str) -> str:
        name = self.d.get(key) or default
        if not isinstance(name, str) or name not in ACTIVATIONS:
            raise self.fail(say("config.activation", name=shown(name)))
        return ACTIVATIONS[name]


def head_dim(r: ConfigReader, hidden: int, n_heads: int, n_kv_heads: int) -> int:
    """`head_dim` where the config gives it, else hidden / heads; the heads checked to group."""
    if n_heads % n_kv_heads:
        raise r.fail(say("config.heads_group", heads=n_heads, kv_heads=n_kv_heads))
    if r.d.get("head_dim") is not None:
        return r.size("head_dim", "head_dim")
    if hidden % n_heads:
        raise r.fail(say("config.heads_divide", hidden=hidden, heads=n_heads))
    return hidden // n_heads


def attention_shape(r: ConfigReader) -> tuple[int, int, int, int]:
    """(hidden, query heads, KV heads, head_dim) of a rotary family, checked against each other."""
    hidden = r.size("hidden", "hidden_size")
    n_heads = r.size("heads", "num_attention_heads")
    n_kv_heads = r.size("heads", "num_key_value_heads", default=n_heads)
    dim = head_dim(r, hidden, n_heads, n_kv_heads)
    if dim % 2:
        raise r.fail(say("config.head_dim_odd", dim=dim))
    return hidden, n_heads, n_kv_heads, dim


def read_rope(r: ConfigReader, head_dim: int) -> tuple[float, RopeScaling | None, int | None]:
    """(theta, scaling, rotary_dim): transformers 5 keeps them together in `rope_parameters`; older configs
    put theta and partial_rotary_factor at the top level and the scaling in `rope_scaling`."""
    params = r.d.get("rope_parameters")
    if params is not None and not isinstance(params, dict):
        raise r.fail(say("config.an_object", key="rope_parameters"))
    params = params or {}
    theta = params.get("rope_theta", r.d.get("rope_theta"))
    theta = r.number("'rope_theta'", 10000.0 if theta is None else theta, MAX_THETA)
    scaling = r.d.get("rope_scaling") or params
    if not isinstance(scaling, dict):
        raise r.fail(say("config.an_object", key="rope_scaling"))
    partial = r.number("'partial_rotary_factor'",
                       scaling.get("partial_rotary_factor", r.d.get("partial_rotary_factor", 1.0)), 1.0)
    rotary_dim = int(head_dim * partial)
    if partial > 1.0 or rotary_dim < 2 or rotary_dim % 2:
        raise r.fail(say("config.rotary", partial=partial, head_dim=head_dim, rotary=rotary_dim))
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind is not None and not isinstance(kind, str):
        raise r.fail(say("config.rope_type", value=shown(kind)))
    kind = "longrope" if kind == "su" else kind  # Phi-3's early name for it
    rotary = None if rotary_dim == head_dim else rotary_dim
    if kind in (None, "default"):
        return theta, None, rotary
    if kind == "longrope":
        return theta, _longrope(r, scaling, rotary_dim), rotary
    factor = r.number(f"rope scaling {kind!r} 'factor'", scaling.get("factor"))
    if kind == "linear":
        return theta, RopeScaling("linear", factor), rotary
    if kind == "llama3":
        low = r.number("llama3 rope 'low_freq_factor'", scaling.get("low_freq_factor"))
        high = r.number("llama3 rope 'high_freq_factor'", scaling.get("high_freq_factor"))
        if high <= low:
            raise r.fail(say("config.llama3_order", high=high, low=low))
        original = ConfigReader(scaling, r.source).size("context", "original_max_position_embeddings")
        return theta, RopeScaling("llama3", factor, low_freq_factor=low, high_freq_factor=high,
                                  original_context=original), rotary
    raise r.fail(say("config.rope_unsupported", kind=kind))


def _longrope(r: ConfigReader, scaling: dict, rotary_dim: int) -> RopeScaling:
    """As transformers' _compute_longrope_parameters: `factor` defaults to max_position_embeddings /
    original_max_position_embeddings, `attention_factor` to sqrt(1 + ln factor / ln original) (1 when the
    factor is at most 1)."""
    factors = {}
    for key in ("short_factor", "long_factor"):
        values = scaling.get(key)
        if not isinstance(values, list) or len(values) != rotary_dim // 2:
            raise r.fail(say("config.longrope_factors", key=key, count=rotary_dim // 2, value=shown(values)))
        factors[key] = tuple(r.number(f"longrope '{key}' entries", v) for v in values)
    original = scaling.get("original_max_position_embeddings", r.d.get("original_max_position_embeddings"))
    if isinstance(original, bool) or not isinstance(original, int) or not 1 < original <= LIMITS["context"]:
        raise r.fail(say("config.longrope_original", high=LIMITS["context"], value=shown(original)))
    factor = scaling.get("factor")
    factor = r.size("context", "max_position_embeddings") / original if factor is None else \
        r.number("'factor'", factor)
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return RopeScaling("longrope", factor, original_context=original, short_factor=factors["short_factor"],
                       long_factor=factors["long_factor"],
                       attention_factor=r.number("'attention_factor'", attention))


def one_window(r: ConfigReader) -> int | None:
    """`sliding_window` on every layer, or None (Mistral, Phi-3)."""
    return None if r.d.get("sliding_window") is None else r.size("window", "sliding_window")


def no_layer_windows(r: ConfigReader) -> None:
    """Refuse `layer_types` that put a window on some layers (a family without per-layer windows)."""
    layer_types = r.d.get("layer_types")
    if layer_types is not None and not isinstance(layer_types, list):
        raise r.fail(say("config.layer_types"))
    if isinstance(layer_types, list) and any(t != "full_attention" for t in layer_types):
        raise r.fail(say("config.layer_windows"))
