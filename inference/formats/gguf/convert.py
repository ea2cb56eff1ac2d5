"""GGUF -> a standard Hugging Face folder (config.json, model.safetensors, tokenizer.json, ...).

The `gguf` package reads the file and dequantises each tensor to float32. Two things differ from HF:
- names (`blk.N.attn_q` ...), mapped by the family's table in checkpoint.py (`spec_for_gguf`);
- llama.cpp stores Llama's Q and K rows permuted for its rotary layout; they are put back in HF order,
  so the folder loads in transformers too. (A wrong permutation still ranks " Paris" first for
  SmolLM2, so the tests check perplexity.) Only the llama architecture is permuted: llama.cpp's
  converter keeps qwen2/qwen3/phi3 rows in HF order (they use the NeoX, rotate-half rope there);
- Phi-3's longrope factors are tensors there (`rope_factors_long/short`) and go back into config.json,
  with its partial rotary (`rope.dimension_count`), sliding window and original context; Llama 3.x's
  llama3 rope is a tensor of per-frequency divisors (`rope_freqs`), recognised as the llama3 scaling
  it was computed from.
The tokenizer is rebuilt from the GGUF vocabulary and merges as a `tokenizers` BPE.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

from inference import cache_dir
from inference.model.checkpoint import expected_shapes, spec_for_gguf
from inference.model.config import LIMITS, ModelConfig
from inference.errors import ModelFormatError
from inference.formats.gguf.metadata import _Metadata, open_gguf  # noqa: F401 - open_gguf: imported from here elsewhere

Progress = Callable[[str, int, int], None]  # (stage, done, total); may raise errors.Cancelled

# GGUF architecture -> the family (checkpoint.LAYOUTS) and the HF class; Gemma's config and tokenizer:
# gguf_gemma.py
_SUPPORTED = {"llama": "llama", "qwen2": "llama", "qwen3": "qwen3", "phi3": "phi3", "gemma2": "gemma",
              "gemma3": "gemma"}
_HF_CLASS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
             "phi3": "Phi3ForCausalLM"}
# longrope's per-frequency factors, which llama.cpp stores as tensors: GGUF name -> the HF config key
_ROPE_FACTORS = {"rope_factors_long.weight": "long_factor", "rope_factors_short.weight": "short_factor",
                 "rope_freqs.weight": "llama3_factors"}  # Llama 3.1-3.3: llama3 scaling, one divisor per frequency
# (low_freq_factor, high_freq_factor, original context) that every Llama 3.x rope was computed from
_LLAMA3_SHAPES = ((1.0, 4.0, 8192),)

# Pre-tokenizer regexes of the byte-level BPE families llama.cpp names in `tokenizer.ggml.pre`.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                 r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# GPT-4o's o200k split (Phi-4-mini; llama.cpp's "gpt-4o"): case-aware words with the contraction as a suffix.
_GPT4O_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
                r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_SPLITS = {"llama-bpe": _LLAMA3_SPLIT, "llama3": _LLAMA3_SPLIT, "qwen2": _QWEN2_SPLIT, "gpt-4o": _GPT4O_SPLIT}

_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types


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
        "architectures": [_HF_CLASS[arch]],
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
            raise ModelFormatError(f"{meta.path.name}: {rotary_dim} rotary dims of {head_dim} cannot be "
                                   "written as a partial_rotary_factor")
    rope_type = meta.get(p + "rope.scaling.type", "none")
    if rope_type == "linear":
        config["rope_scaling"] = {"rope_type": "linear", "factor": meta.number(p + "rope.scaling.factor", math.nan)}
    elif rope_type not in ("none", None):
        raise ModelFormatError(f"{meta.path.name}: rope scaling {rope_type!r} is not supported")
    if "llama3_factors" in extra:
        config["rope_scaling"] = _llama3_from_factors(meta, config["rope_theta"], rotary_dim, extra["llama3_factors"])
    factors = {key: extra[key] for key in ("long_factor", "short_factor") if key in extra}
    if factors:
        if len(factors) != 2:
            raise ModelFormatError(f"{meta.path.name}: longrope needs both rope_factors_long and _short")
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
    raise ModelFormatError(f"{meta.path.name}: its rope_freqs factors are not llama3 rope scaling over "
                           f"{_LLAMA3_SHAPES[0][2]} positions (factor {factor}); not supported")


def _tokenizer_files(meta: _Metadata) -> tuple[str, dict]:
    """tokenizer.json text and tokenizer_config.json dict from the GGUF vocabulary."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    kind = meta.require("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ModelFormatError(f"{meta.path.name}: GGUF tokenizer {kind!r} is not supported "
                               "(byte-level BPE 'gpt2' only)")
    tokens = checked_tokens(meta)
    types = meta.numbers("tokenizer.ggml.token_type", len(tokens), 1)
    merges = [tuple(m.split(" ", 1)) for m in meta.strings("tokenizer.ggml.merges")]
    if any(len(m) != 2 or not m[0] or not m[1] for m in merges):
        raise meta.fail("tokenizer.ggml.merges", "must hold pairs of tokens separated by one space")
    pre = meta.get("tokenizer.ggml.pre", "default")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in ("default", "gpt-2", "gpt2"):
        pre_tokenizer = byte_level
    elif isinstance(pre, str) and pre in _SPLITS:
        pattern = _SPLITS[pre]
        pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        raise ModelFormatError(f"{meta.path.name}: GGUF pre-tokenizer {pre!r} is not supported")
    vocab = {token: i for i, token in enumerate(tokens)}
    try:
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    except Exception as e:  # the Rust side: a merge of tokens not in the vocabulary
        raise meta.fail("tokenizer.ggml.merges", f"cannot build a BPE tokenizer ({str(e)[:100]})") from None
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                          for i, t in enumerate(types) if t == _USER_DEFINED])
    tokenizer.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                  for i, t in enumerate(types) if t == _CONTROL])

    config = special_tokens_config(meta, tokenizer, tokens, vocab, add_bos_default=False)
    if not config["add_bos_token"] or config["bos_token"] is None:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer.to_str(), with_template(meta, config)


def special_tokens_config(meta, tokenizer, tokens: list[str], vocab: dict[str, int], add_bos_default: bool) -> dict:
    """tokenizer_config.json's special tokens and window from the GGUF metadata; a BOS the file says to add
    is put in front by the tokenizer's post-processor (shared by the byte-level and SentencePiece imports)."""
    from tokenizers import processors

    def token(key):
        index = meta.count(key, -1, minimum=-1)
        return tokens[index] if 0 <= index < len(tokens) else None

    bos = token("tokenizer.ggml.bos_token_id")
    add_bos = meta.flag("tokenizer.ggml.add_bos_token", add_bos_default)
    if add_bos and bos is not None:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])])
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": add_bos,
        "bos_token": bos,
        "eos_token": token("tokenizer.ggml.eos_token_id"),
        "pad_token": token("tokenizer.ggml.padding_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"),
        "model_max_length": meta.size(meta.require("general.architecture") + ".context_length", "context", 2048),
        "clean_up_tokenization_spaces": False,
    }


def checked_tokens(meta) -> list[str]:
    """tokenizer.ggml.tokens: a non-empty list of distinct strings."""
    tokens = meta.strings("tokenizer.ggml.tokens")
    if len(set(tokens)) != len(tokens):
        seen: set[str] = set()
        twice = next(t for t in tokens if t in seen or seen.add(t))
        raise meta.fail("tokenizer.ggml.tokens", f"lists {twice!r} twice")
    return tokens


def with_template(meta, config: dict) -> dict:
    """tokenizer_config.json: `config` without its None values, and the chat template where there is one."""
    template = meta.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise meta.fail("tokenizer.chat_template", "must be a string")
    if template:
        config["chat_template"] = template
    return {k: v for k, v in config.items() if v is not None}


def _described(meta: _Metadata, arch: str, reader, names: set[str]) -> tuple[str, dict, dict]:
    """tokenizer.json text, tokenizer_config.json and config.json of the model (Gemma's: gguf_gemma.py)."""
    n_vocab = len(checked_tokens(meta))
    tied = "output.weight" not in names
    if _SUPPORTED[arch] == "gemma":
        from inference.formats.gguf.gemma import gemma_config, sentencepiece_tokenizer_files

        return (*sentencepiece_tokenizer_files(meta), gemma_config(meta, arch, tied=tied, n_vocab=n_vocab))
    extra: dict = {"attention_bias": "blk.0.attn_q.bias" in names}
    for t in reader.tensors:
        if t.name in _ROPE_FACTORS:
            extra[_ROPE_FACTORS[t.name]] = [float(v) for v in np.asarray(t.data, dtype=np.float32).reshape(-1)]
    return (*_tokenizer_files(meta), _config(meta, arch, tied=tied, n_vocab=n_vocab, extra=extra))


def _float_array(path: Path, t, want: tuple[int, ...] | None) -> np.ndarray:
    """A GGUF tensor dequantised to a writable float32 (rows, cols) array: its shape checked against the
    one its metadata implies (`want`) first, every value finite."""
    from gguf.quants import dequantize

    shape = tuple(int(n) for n in reversed(t.shape))
    if want is not None and shape != want:
        raise ModelFormatError(f"{path.name}: tensor {t.name!r} has shape {list(shape)} but its metadata "
                               f"implies {list(want)}")
    try:
        array = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)
    except Exception as e:
        raise ModelFormatError(f"{path.name}: tensor {t.name!r} cannot be read ({e})") from None
    if not np.isfinite(array).all():
        raise ModelFormatError(f"{path.name}: tensor {t.name!r} holds {int((~np.isfinite(array)).sum()):,} "
                               "NaN or infinite values")
    return array if array.shape == shape else array.reshape(shape)


def convert(path: Path, out: Path, progress: Progress | None = None) -> dict:
    """Write the HF folder for the GGUF at `path` into `out`. Returns facts for the manifest."""
    from safetensors.numpy import save_file

    if progress:
        progress("read", 0, 1)
    reader = open_gguf(path)
    meta = _Metadata(reader, path)
    arch = meta.require("general.architecture")
    if not isinstance(arch, str) or arch not in _SUPPORTED:
        raise ModelFormatError(f"{path.name}: GGUF architecture {arch!r} is not supported "
                               f"(supported: {', '.join(_SUPPORTED)})")
    names = {t.name for t in reader.tensors}
    gemma = _SUPPORTED[arch] == "gemma"
    tokenizer_json, tokenizer_config, config = _described(meta, arch, reader, names)
    # NaN, inf, zero or huge sizes, and tensors of the wrong shape: refused before anything is dequantised
    shapes = expected_shapes(ModelConfig.from_hf(config, source=f"{path.name} (its config)"))

    tensors: dict[str, np.ndarray] = {}
    total = len(reader.tensors)
    for done, t in enumerate(reader.tensors):
        if progress:
            progress("dequantise", done, total)
        if t.name in _ROPE_FACTORS:
            continue
        known = spec_for_gguf(_SUPPORTED[arch], t.name)
        if known is None:
            raise ModelFormatError(f"{path.name}: unexpected tensor {t.name!r}")
        spec, name = known
        if name not in shapes and name != "lm_head.weight":  # a head beside a tied embedding is only unused
            raise ModelFormatError(f"{path.name}: tensor {t.name!r} is not part of the model its metadata "
                                   f"describes ({config['num_hidden_layers']} layers)")
        array = _float_array(path, t, shapes.get(name))
        if arch == "llama" and spec.role == "q":
            array = unpermute_rotary(array, config["num_attention_heads"])
        elif arch == "llama" and spec.role == "k":
            array = unpermute_rotary(array, config["num_key_value_heads"])
        elif gemma and t.name.endswith("norm.weight"):
            array -= 1.0  # llama.cpp stores Gemma's 1 + w; HF folders hold w
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
        raise ModelFormatError(f"{path}: no such file")
    if progress:
        progress("hash", 0, 1)
    digest = cache_dir.file_sha256(path)
    target = cache_dir.cache_root() / "converted" / f"{name or path.stem}-{digest[:16]}"
    if cache_dir.read_manifest(target) is None:
        cache_dir.publish(target, lambda tmp: {**convert(path, tmp, progress), "sha256": digest,
                                               "name": name or path.stem})
    return target
