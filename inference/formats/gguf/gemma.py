"""GGUF import of Gemma 2 and Gemma 3: the config llama.cpp implies, and the SentencePiece tokenizer.

What llama.cpp's converter does differently from a Hugging Face checkpoint, undone or supplied here (the
rest is convert.py's, which reaches `described` through the Gemma row of families/registry.py):
- every Gemma norm scale is stored as 1 + w (the converter adds 1 to each `*norm.weight`): the family's
  norm_offset (1) is subtracted again, so the folder holds w as transformers expects (convert.convert);
- Q and K rows are NOT permuted (llama.cpp rotates Gemma in the NeoX layout, HF's own);
- keys a GGUF may not carry are llama.cpp's fixed values: Gemma 3 layers are global every 6th
  (`sliding_window_pattern` 6, unless the file gives a number or one flag per layer), its local layers
  rotate with base 10000, and the scores are scaled by 1/sqrt(head_dim), except the 27B models (62 layers
  for Gemma 3, 46 for Gemma 2), scaled by 1/sqrt(hidden / heads) as their query_pre_attn_scalar says;
- the tokenizer is SentencePiece BPE ("llama" in `tokenizer.ggml.model`): pieces with scores, no merges.
  The merges are rebuilt as transformers' SentencePieceExtractor does (every split of a piece into two
  pieces, ordered by the merged piece's score), with byte fallback and "▁" for spaces.
"""

from __future__ import annotations

import math

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

from inference.errors import ModelFormatError
from inference.formats.gguf.tokenizer import checked_tokens, special_tokens_config, with_template

_NORMAL, _CONTROL, _USER_DEFINED, _BYTE = 1, 3, 4, 6  # llama.cpp token types
_LARGEST = {"gemma2": 46, "gemma3": 62}  # layers of the 27B model, whose scores use hidden / heads


def described(meta, arch: str, tied: bool, n_vocab: int) -> tuple[str, dict, dict]:
    """tokenizer.json text, tokenizer_config.json and config.json of a Gemma GGUF."""
    return (*sentencepiece_tokenizer_files(meta), gemma_config(meta, arch, tied=tied, n_vocab=n_vocab))


def gemma_config(meta, arch: str, tied: bool, n_vocab: int) -> dict:
    """config.json of a Gemma2ForCausalLM / Gemma3ForCausalLM from the GGUF metadata."""
    p = arch + "."
    n_heads = meta.size(p + "attention.head_count", "heads")
    hidden = meta.size(p + "embedding_length", "hidden")
    n_layers = meta.size(p + "block_count", "layers")
    head_dim = meta.size(p + "attention.key_length", "head_dim", max(hidden // n_heads, 1))
    eps = meta.number(p + "attention.layer_norm_rms_epsilon", 1e-6)
    pattern = meta.get(p + "attention.sliding_window_pattern", 2 if arch == "gemma2" else 6)
    if isinstance(pattern, (list, tuple)):  # one flag per layer: True for a sliding-window layer
        if len(pattern) != n_layers:
            raise ModelFormatError(f"{meta.path.name}: sliding_window_pattern has {len(pattern)} flags for "
                                   f"{n_layers} layers")
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
            raise ModelFormatError(f"{meta.path.name}: rope scaling {rope_type!r} is not supported")
    for key, name in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                      ("eos_token_id", "tokenizer.ggml.eos_token_id"),
                      ("pad_token_id", "tokenizer.ggml.padding_token_id")):
        if meta.get(name) is not None:
            config[key] = meta.count(name, minimum=0)
    return config


def _merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """BPE merges of a SentencePiece vocabulary: each normal piece split every way into two pieces,
    ordered by the piece's score (higher first), then by the two halves' ids."""
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == _NORMAL}
    found = []
    for piece, i in vocab.items():
        for cut in range(1, len(piece)):
            left, right = vocab.get(piece[:cut]), vocab.get(piece[cut:])
            if left is not None and right is not None:
                found.append((-scores[i], left, right, piece[:cut], piece[cut:]))
    found.sort()
    return [(a, b) for _, _, _, a, b in found]


def sentencepiece_tokenizer_files(meta) -> tuple[str, dict]:
    """tokenizer.json text and tokenizer_config.json dict of a SentencePiece BPE GGUF vocabulary."""
    kind = meta.require("tokenizer.ggml.model")
    if kind != "llama":
        raise ModelFormatError(f"{meta.path.name}: GGUF tokenizer {kind!r} is not supported here "
                               "(SentencePiece 'llama' only)")
    tokens = checked_tokens(meta)
    scores = meta.numbers("tokenizer.ggml.scores", len(tokens))
    types = meta.numbers("tokenizer.ggml.token_type", len(tokens), _NORMAL)

    def token(key):
        index = meta.count(key, -1, minimum=-1)
        return tokens[index] if 0 <= index < len(tokens) else None

    unk = token("tokenizer.ggml.unknown_token_id")
    vocab = {t: i for i, t in enumerate(tokens)}
    try:
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=_merges(tokens, scores, types), unk_token=unk,
                                         fuse_unk=True, byte_fallback=True))
    except Exception as e:  # the Rust side: an unknown token of a bad unk id
        raise meta.fail("tokenizer.ggml.tokens", f"cannot build a BPE tokenizer ({str(e)[:100]})") from None
    prefix = [normalizers.Prepend("▁")] if meta.flag("tokenizer.ggml.add_space_prefix", True) else []
    tokenizer.normalizer = normalizers.Sequence([*prefix, normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                          for i, t in enumerate(types) if t == _USER_DEFINED])
    tokenizer.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                  for i, t in enumerate(types) if t == _CONTROL])
    config = special_tokens_config(meta, tokenizer, tokens, vocab, add_bos_default=True)
    return tokenizer.to_str(), with_template(meta, config)
