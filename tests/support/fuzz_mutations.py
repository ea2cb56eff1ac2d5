"""Hostile variants of a tiny model's files, for the fuzz test (test_fuzz_inputs.py) and the corpus
runner (fuzz_corpus.py).

Each mutation is a pure function of a valid file's bytes (or JSON) and a few parameters, so hypothesis
can draw the parameters and the corpus runner can enumerate them:
- GGUF: every header field is located (`gguf_fields`: metadata types, scalar values, string lengths, array
  item types and counts; tensor dimensions, types and offsets), then one is overwritten with a hostile
  value of its width (NaN, inf, 0, 2^31, 2^40, 2^64-1, a bool of 2...); or the file is truncated;
- safetensors: the 8-byte header length, a tensor's dtype, shape or data_offsets, or NaN/inf in its data;
- config.json: one key set to a hostile value (wrong type, NaN, huge, nested).
"""

from __future__ import annotations

import json
import math
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}

# Hostile values by struct format (bools are written as a raw byte: "<B" at type 7).
HOSTILE = {
    "<B": (0, 1, 2, 255), "<b": (-1, -128, 127), "<H": (0, 65535), "<h": (-1, 0),
    "<I": (0, 1, 2, 7, 9, 13, 255, 2**31, 2**32 - 1), "<i": (-1, 0, 2**31 - 1, -2**31),
    "<Q": (0, 1, 2**31, 2**32 - 1, 2**40, 2**63, 2**64 - 1), "<q": (-1, 0, 2**63 - 1),
    "<f": (math.nan, math.inf, -math.inf, 0.0, -1.0, 3e38, 1e-45),
    "<d": (math.nan, math.inf, -math.inf, 0.0, -1.0, 1e308, 5e-324),
}


@dataclass(frozen=True)
class Spot:
    """One overwritable field: where it is, its struct format, and what it is (for messages)."""

    what: str
    offset: int
    fmt: str


def gguf_fields(data: bytes) -> list[Spot]:
    """Every field of a (little-endian, v3) GGUF header worth corrupting."""
    spots = [Spot("version", 4, "<I"), Spot("n_tensors", 8, "<Q"), Spot("n_kv", 16, "<Q")]
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    at = 24

    def string(at: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("<Q", data, at)
        return data[at + 8:at + 8 + n].decode("utf-8", "replace"), at + 8 + n

    for _ in range(n_kv):
        key, at = string(at)
        (kind,) = struct.unpack_from("<I", data, at)
        spots.append(Spot(f"{key} type", at, "<I"))
        at += 4
        if kind == 8:
            spots.append(Spot(f"{key} length", at, "<Q"))
            _, at = string(at)
        elif kind == 9:
            (item,) = struct.unpack_from("<I", data, at)
            spots += [Spot(f"{key} item type", at, "<I"), Spot(f"{key} count", at + 4, "<Q")]
            (n,) = struct.unpack_from("<Q", data, at + 4)
            at += 12
            if item in _SCALARS:
                if n:
                    spots.append(Spot(f"{key}[0]", at, _SCALARS[item]))
                at += n * struct.calcsize(_SCALARS[item])
            else:
                if n:
                    spots.append(Spot(f"{key}[0] length", at, "<Q"))
                for _ in range(n):
                    _, at = string(at)
        else:
            spots.append(Spot(f"{key} value", at, _SCALARS[kind]))
            at += struct.calcsize(_SCALARS[kind])
    for _ in range(n_tensors):
        name, at = string(at)
        (n_dims,) = struct.unpack_from("<I", data, at)
        spots.append(Spot(f"{name} n_dims", at, "<I"))
        at += 4
        for d in range(n_dims):
            spots.append(Spot(f"{name} dim{d}", at, "<Q"))
            at += 8
        spots += [Spot(f"{name} type", at, "<I"), Spot(f"{name} offset", at + 4, "<Q")]
        at += 12
    return spots


def overwrite(data: bytes, spot: Spot, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(spot.fmt, out, spot.offset, value)
    return bytes(out)


def truncate(data: bytes, fraction: float) -> bytes:
    return data[:int(len(data) * fraction)]


# --- safetensors ------------------------------------------------------------------------------------
def split_safetensors(data: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack_from("<Q", data, 0)
    return json.loads(data[8:8 + n]), data[8 + n:]


def join_safetensors(header: dict, body: bytes, length: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + body


SAFETENSORS_FIELDS = {
    "dtype": ("F32", "F16", "I32", "U8", "BOOL", "F8_E4M3", "XX", 1, None, ["F32"]),
    "shape": ([], [0], [1], [-1], [2**40, 2**40], [2**63], ["a"], [1] * 9, None, {}),
    "data_offsets": ([0, 0], [0, 2**63], [-1, 4], [10, 5], [0, 2**40], [0], None, ["0", "4"]),
}


def mutate_safetensors(data: bytes, tensor_index: int, field: str, value) -> bytes:
    header, body = split_safetensors(data)
    names = sorted(k for k in header if k != "__metadata__")
    name = names[tensor_index % len(names)]
    if value is None:
        header[name].pop(field, None)
    else:
        header[name][field] = value
    return join_safetensors(header, body)


def safetensors_length(data: bytes, length: int) -> bytes:
    header, body = split_safetensors(data)
    return join_safetensors(header, body, length)


def poison_safetensors(data: bytes, tensor_index: int, value: float) -> bytes:
    """NaN or inf written into the first element of one float32 tensor."""
    header, body = split_safetensors(data)
    names = sorted(k for k in header if k != "__metadata__" and header[k]["dtype"] == "F32")
    begin = header[names[tensor_index % len(names)]]["data_offsets"][0]
    out = bytearray(body)
    struct.pack_into("<f", out, begin, value)
    return join_safetensors(header, bytes(out))


# --- config.json ------------------------------------------------------------------------------------
CONFIG_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps",
               "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "hidden_act",
               "architectures", "model_type", "tie_word_embeddings", "bos_token_id", "eos_token_id",
               "sliding_window", "layer_types", "attention_bias", "mlp_bias")
CONFIG_VALUES = (None, 0, -1, 1, 3, 2**31, 2**63, 10**9, 1e308, math.nan, math.inf, -math.inf, "x", "",
                 [], [1], ["silu"], {}, True, [[["LlamaForCausalLM"]]],
                 {"rope_type": "llama3", "factor": math.nan, "low_freq_factor": 1, "high_freq_factor": 1,
                  "original_max_position_embeddings": 0},
                 {"rope_type": "linear", "factor": math.inf}, {"rope_type": "longrope", "short_factor": [1e9]})


def mutate_config(text: str, key: str, value) -> str:
    config = json.loads(text)
    if value is None:
        config.pop(key, None)
    else:
        config[key] = value
    return json.dumps(config)  # NaN and Infinity as Python's json writes them


def deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth
