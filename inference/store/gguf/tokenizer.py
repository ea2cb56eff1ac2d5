"""GGUF vocabularies as `tokenizers` files: llama.cpp's byte-level BPE ("gpt2" in `tokenizer.ggml.model`), and
the special tokens, window and chat template every imported tokenizer shares (the SentencePiece one: gemma.py).
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from inference.errors import ModelFormatError
from inference.messages import say

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


def byte_level_tokenizer_files(meta) -> tuple[str, dict]:
    """tokenizer.json text and tokenizer_config.json dict from a byte-level BPE GGUF vocabulary."""
    kind = meta.require("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ModelFormatError(say("gguf.tokenizer", path=meta.path.name, kind=kind))
    tokens = checked_tokens(meta)
    types = meta.numbers("tokenizer.ggml.token_type", len(tokens), 1)
    merges = [tuple(m.split(" ", 1)) for m in meta.strings("tokenizer.ggml.merges")]
    if any(len(m) != 2 or not m[0] or not m[1] for m in merges):
        raise meta.fail("tokenizer.ggml.merges", say("gguf.merges"))
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
        raise ModelFormatError(say("gguf.pre_tokenizer", path=meta.path.name, pre=pre))
    vocab = {token: i for i, token in enumerate(tokens)}
    try:
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    except Exception as e:  # the Rust side: a merge of tokens not in the vocabulary
        raise meta.fail("tokenizer.ggml.merges", say("gguf.bpe", why=str(e)[:100])) from None
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
        raise meta.fail("tokenizer.ggml.tokens", say("gguf.token_twice", token=repr(twice)[:100]))
    return tokens


def with_template(meta, config: dict) -> dict:
    """tokenizer_config.json: `config` without its None values, and the chat template where there is one."""
    template = meta.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise meta.fail("tokenizer.chat_template", say("gguf.a_string"))
    if template:
        config["chat_template"] = template
    return {k: v for k, v in config.items() if v is not None}
