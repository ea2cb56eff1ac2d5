"""GGUF -> a standard Hugging Face folder (config.json, model.safetensors, tokenizer.json, ...).

The `gguf` package reads the file and dequantises each tensor to float32. Two things differ from HF:
- names (`blk.N.attn_q` ...), mapped by the family's layout (families/registry.py: the family whose
  row lists the file's `general.architecture`, and its `Layout.gguf_spec`);
- llama.cpp stores Llama's Q and K rows permuted for its rotary layout; they are put back in HF order,
  so the folder loads in transformers too. (A wrong permutation still ranks " Paris" first for
  SmolLM2, so the tests check perplexity.) Only the llama architecture is permuted (its GgufArch says
  `permuted_rotary`): llama.cpp's converter keeps qwen2/qwen3/phi3 rows in HF order (they use the NeoX,
  rotate-half rope there); a family whose norms scale by offset + w (Gemma) has them stored as that sum;
- Phi-3's longrope factors are tensors there (`rope_factors_long/short`) and go back into config.json,
  with its partial rotary (`rope.dimension_count`), sliding window and original context; Llama 3.x's
  llama3 rope is a tensor of per-frequency divisors (`rope_freqs`), recognised as the llama3 scaling
  it was computed from.
The tokenizer is rebuilt from the GGUF vocabulary as a `tokenizers` BPE: byte-level with merges (tokenizer.py)
or SentencePiece (sentencepiece.py), as the family's GgufArch says; a family whose metadata means more than
Llama's keys (Gemma) reads its config.json itself (GgufArch.config, in its family file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

from gguf.quants import dequantize
from safetensors.numpy import save_file

from inference import cache_dir
from inference.errors import ModelFormatError
from inference.messages import say
from inference.store.gguf.metadata import _Metadata, open_gguf
from inference.store.gguf.sentencepiece import sentencepiece_tokenizer_files
from inference.store.gguf.tokenizer import byte_level_tokenizer_files, checked_tokens
from inference.model.config import ModelConfig
from inference.model.families import registry
from inference.model.families.reading import LIMITS

_TOKENIZERS = {"byte_level": byte_level_tokenizer_files, "sentencepiece": sentencepiece_tokenizer_files}

Progress = Callable[[str, int, int], None]  # (stage, done, total); may raise errors.Cancelled

# longrope's per-frequency factors, which llama.cpp stores as tensors: GGUF name -> the HF config key
_ROPE_FACTORS = {"rope_factors_long.weight": "long_factor", "rope_factors_short.weight": "short_factor",
                 "rope_freqs.weight": "llama3_factors"}  # Llama 3.1-3.3: llama3 scaling, one divisor per frequency
# (low_freq_factor, high_freq_factor, original context) that every Llama 3.x rope was computed from
_LLAMA3_SHAPES = ((1.0, 4.0, 8192),)

def unpermute_rotary(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: per head, (pairs, 2) -> (2, pairs)."""
    rows = weight.shape[0]
    rest = weight.shape[1:]
    return weight.reshape(n_heads, rows // n_heads // 2, 2, *rest).swapaxes(1, 2).reshape(weight.shape)


def _config(meta: _Metadata, arch: str, tied: bool, n_vocab: int, extra: dict) -> dict:
    p = arch + "."
    n_heads = meta.size(p + "attention.head_count", "heads")
    hidden = meta.size(p + "embedding_length", "hidden")
    head_dim = meta.size(p + "attention.key_length", "head_dim", max(hidden // n_heads, 1))
    eps = meta.number(p + "attention.layer_norm_rms_epsilon", 1e-6)
    config = {
        "architectures": [registry.by_gguf(arch)[1].hf_class],
        "model_type": arch,
        "hidden_size": hidden,
        "intermediate_size": meta.size(p + "feed_forward_length", "ffn"),
        "num_hidden_layers": meta.size(p + "block_count", "layers"),
        "num_attention_heads": n_heads,
        "num_key_value_heads": meta.size(p + "attention.head_count_kv", "heads", n_heads),
        "head_dim": head_dim,
        "max_position_embeddings": meta.size(p + "context_length", "context"),
        "rms_norm_eps": float(str(np.float32(eps))),  # GGUF stores float32: 1e-5 reads 9.99999974e-06
        "vocab_size": n_vocab,
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "torch_dtype": "float32",
        **_rope_config(meta, arch, head_dim, extra),
    }
    if arch in ("llama", "qwen3"):
        config.update(attention_bias=arch == "qwen3" and extra.get("attention_bias", False), mlp_bias=False)
    window = meta.count(p + "attention.sliding_window", 0, minimum=0, maximum=LIMITS["window"])
    if arch == "phi3" and window > 0:  # llama.cpp writes 0 for none (Phi-4-mini)
        config["sliding_window"] = window
    for key, name in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                      ("eos_token_id", "tokenizer.ggml.eos_token_id"),
                      ("pad_token_id", "tokenizer.ggml.padding_token_id")):
        if meta.get(name) is not None:
            config[key] = meta.count(name, minimum=0)
    if arch == "phi3":  # else transformers' Phi3Config assumes pad id 32000, outside a smaller vocabulary
        config.setdefault("pad_token_id", None)
    return config


def _rope_config(meta: _Metadata, arch: str, head_dim: int, extra: dict) -> dict:
    """rope_theta, rope_scaling (linear, or Phi-3's longrope from its factor tensors) and partial rotary."""
    p = arch + "."
    config: dict = {"rope_theta": meta.number(p + "rope.freq_base", 10000.0), "rope_scaling": None}
    rotary_dim = meta.size(p + "rope.dimension_count", "head_dim", head_dim)
    if rotary_dim != head_dim:
        config["partial_rotary_factor"] = rotary_dim / head_dim
        if int(head_dim * config["partial_rotary_factor"]) != rotary_dim:
            raise ModelFormatError(say("gguf.rotary_dims", path=meta.path.name, rotary=rotary_dim, head_dim=head_dim))
    rope_type = meta.get(p + "rope.scaling.type", "none")
    if rope_type == "linear":
        config["rope_scaling"] = {"rope_type": "linear", "factor": meta.number(p + "rope.scaling.factor", math.nan)}
    elif rope_type not in ("none", None):
        raise ModelFormatError(say("gguf.rope_scaling", path=meta.path.name, kind=rope_type))
    if "llama3_factors" in extra:
        config["rope_scaling"] = _llama3_from_factors(meta, config["rope_theta"], rotary_dim, extra["llama3_factors"])
    factors = {key: extra[key] for key in ("long_factor", "short_factor") if key in extra}
    if factors:
        if len(factors) != 2:
            raise ModelFormatError(say("gguf.longrope", path=meta.path.name))
        scaling = {"rope_type": "longrope", **factors,
                   "original_max_position_embeddings": meta.size(p + "rope.scaling.original_context_length",
                                                                 "context")}
        if meta.get(p + "rope.scaling.attn_factor") is not None:
            scaling["attention_factor"] = meta.number(p + "rope.scaling.attn_factor", 1.0)
        config["rope_scaling"] = scaling
        config["original_max_position_embeddings"] = scaling["original_max_position_embeddings"]
    return config


def llama3_factors(theta: float, dim: int, factor: float, low: float, high: float, original: int) -> np.ndarray:
    """The divisor of each rotary frequency under HF's llama3 scaling, as llama.cpp's converter writes it."""
    wavelen = 2 * math.pi * theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    smooth = (original / wavelen - low) / (high - low)
    middle = 1 / ((1 - smooth) / factor + smooth)
    return np.where(wavelen < original / high, 1.0, np.where(wavelen > original / low, factor, middle))


def _llama3_from_factors(meta: _Metadata, theta: float, dim: int, factors: list[float]) -> dict:
    """HF's llama3 rope_scaling whose divisors are `factors` (to float32 rounding), else one clear error."""
    factor = float(max(factors))
    for low, high, original in _LLAMA3_SHAPES:
        expected = llama3_factors(theta, dim, factor, low, high, original)
        if len(factors) == len(expected) and np.allclose(factors, expected, rtol=1e-5, atol=0):
            return {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
                    "original_max_position_embeddings": original}
    raise ModelFormatError(say("gguf.llama3", path=meta.path.name, positions=_LLAMA3_SHAPES[0][2], factor=factor))


def _described(meta: _Metadata, arch: str, reader, names: set[str]) -> tuple[str, dict, dict]:
    """tokenizer.json text, tokenizer_config.json and config.json of the model (its vocabulary and, where it
    has one, its config reader as its family's GgufArch says)."""
    n_vocab = len(checked_tokens(meta))
    tied = "output.weight" not in names
    how = registry.by_gguf(arch)[1]
    if how.config is not None:
        return (*_TOKENIZERS[how.tokenizer](meta), how.config(meta, arch, tied=tied, n_vocab=n_vocab))
    extra: dict = {"attention_bias": "blk.0.attn_q.bias" in names}
    for t in reader.tensors:
        if t.name in _ROPE_FACTORS:
            extra[_ROPE_FACTORS[t.name]] = [float(v) for v in np.asarray(t.data, dtype=np.float32).reshape(-1)]
    return (*_TOKENIZERS[how.tokenizer](meta), _config(meta, arch, tied=tied, n_vocab=n_vocab, extra=extra))


def _float_array(path: Path, t, want: tuple[int, ...] | None) -> np.ndarray:
    """A GGUF tensor dequantised to a writable float32 (rows, cols) array: its shape checked against the
    one its metadata implies (`want`) first, every value finite."""
    shape = tuple(int(n) for n in reversed(t.shape))
    if want is not None and shape != want:
        raise ModelFormatError(say("gguf.tensor_shape", path=path.name, name=t.name, shape=list(shape),
                                   want=list(want)))
    try:
        array = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)
    except Exception as e:
        raise ModelFormatError(say("gguf.tensor_unreadable", path=path.name, name=t.name, why=str(e)[:200])) from None
    if not np.isfinite(array).all():
        raise ModelFormatError(say("gguf.tensor_not_finite", path=path.name, name=t.name,
                                   count=int((~np.isfinite(array)).sum())))
    return array if array.shape == shape else array.reshape(shape)


def convert(path: Path, out: Path, progress: Progress | None = None) -> dict:
    """Write the HF folder for the GGUF at `path` into `out`. Returns facts for the manifest."""
    if progress:
        progress("read", 0, 1)
    reader = open_gguf(path)
    meta = _Metadata(reader, path)
    arch = meta.require("general.architecture")
    found = registry.by_gguf(arch)
    if found is None:
        supported = say("load.supported", names=", ".join(registry.gguf_architectures()))
        raise ModelFormatError(say("file.in", path=path.name,
                                   problem=say("catalog.gguf_architecture", architecture=arch, supported=supported)))
    family, gguf_arch = found
    names = {t.name for t in reader.tensors}
    tokenizer_json, tokenizer_config, config = _described(meta, arch, reader, names)
    # NaN, inf, zero or huge sizes, and tensors of the wrong shape: refused before anything is dequantised
    model_config = ModelConfig.from_hf(config, source=f"{path.name} (its config)")
    shapes = family.layout.shapes(model_config)

    tensors: dict[str, np.ndarray] = {}
    total = len(reader.tensors)
    for done, t in enumerate(reader.tensors):
        if progress:
            progress("dequantise", done, total)
        if t.name in _ROPE_FACTORS:
            continue
        known = family.layout.gguf_spec(t.name)
        if known is None:
            raise ModelFormatError(say("gguf.tensor_unexpected", path=path.name, name=t.name))
        spec, name = known
        if name not in shapes and name != "lm_head.weight":  # a head beside a tied embedding is only unused
            raise ModelFormatError(say("gguf.tensor_not_in_model", path=path.name, name=t.name,
                                       layers=config["num_hidden_layers"]))
        array = _float_array(path, t, shapes.get(name))
        if gguf_arch.permuted_rotary and spec.role == "q":
            array = unpermute_rotary(array, config["num_attention_heads"])
        elif gguf_arch.permuted_rotary and spec.role == "k":
            array = unpermute_rotary(array, config["num_key_value_heads"])
        elif model_config.norm_offset and t.name.endswith("norm.weight"):
            array -= model_config.norm_offset  # llama.cpp stores Gemma's 1 + w; HF folders hold w
        tensors[name] = np.ascontiguousarray(array)
    if progress:
        progress("dequantise", total, total)
        progress("write", 0, 1)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    del tensors
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (out / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    generation = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in config}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2), encoding="utf-8")
    if progress:
        progress("write", 1, 1)
    return {"source": path.name}


def convert_cached(path: Path, progress: Progress | None = None, name: str | None = None) -> Path:
    """The HF folder for this GGUF in the user cache, converted once and keyed by the file's hash."""
    if not path.is_file():
        raise ModelFormatError(say("gguf.no_file", path=str(path)))
    if progress:
        progress("hash", 0, 1)
    digest = cache_dir.file_sha256(path)
    target = cache_dir.cache_root() / "converted" / f"{name or path.stem}-{digest[:16]}"
    if cache_dir.read_manifest(target) is None:
        cache_dir.publish(target, lambda tmp: {**convert(path, tmp, progress), "sha256": digest,
                                               "name": name or path.stem})
    return target
