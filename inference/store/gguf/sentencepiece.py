"""A SentencePiece BPE vocabulary of a GGUF ("llama" in `tokenizer.ggml.model`, Gemma's) as a `tokenizers` file.

The GGUF keeps pieces with scores and no merges. The merges are rebuilt as transformers'
SentencePieceExtractor does (every split of a piece into two pieces, ordered by the merged piece's score),
with byte fallback and "▁" for spaces."""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

from inference.errors import ModelFormatError
from inference.messages import say
from inference.store.gguf.tokenizer import checked_tokens, special_tokens_config, with_template

_NORMAL, _CONTROL, _USER_DEFINED, _BYTE = 1, 3, 4, 6  # llama.cpp token types


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
        raise ModelFormatError(say("gguf.tokenizer_sentencepiece", path=meta.path.name, kind=kind))
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
        raise meta.fail("tokenizer.ggml.tokens", say("gguf.bpe", why=str(e)[:100])) from None
    prefix = [normalizers.Prepend("▁")] if meta.flag("tokenizer.ggml.add_space_prefix", True) else []
    tokenizer.normalizer = normalizers.Sequence([*prefix, normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                          for i, t in enumerate(types) if t == _USER_DEFINED])
    tokenizer.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                  for i, t in enumerate(types) if t == _CONTROL])
    config = special_tokens_config(meta, tokenizer, tokens, vocab, add_bos_default=True)
    return tokenizer.to_str(), with_template(meta, config)
