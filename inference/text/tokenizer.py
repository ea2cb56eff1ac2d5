"""Text <-> token ids, the readable form of each token, and the chat template.

Encoding and decoding are the `tokenizers` library's, exactly as tokenizer.json defines them. On top:
- the raw bytes of every token, so text can be rebuilt token by token even when one character's UTF-8
  bytes are split over two tokens (the first shows as bytes, the second completes the character);
- chat templates rendered in Jinja's immutable sandbox, so a template cannot reach Python internals.
A tokenizer.json whose own split regex backtracks (a Rust panic, or slow on short hostile texts) is
refused at load (tokenizer_probe.py).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from tokenizers import Tokenizer as Backend

from inference.errors import ModelFormatError
from inference.messages import say
from inference.text.template_box import render
from inference.text.tokenizer_probe import is_panic, probe

_HEX_ERRORS = "tokenstep-hex"
codecs.register_error(_HEX_ERRORS, lambda e: ("".join(f"\\x{b:02X}" for b in e.object[e.start:e.end]), e.end))


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level map, inverted: the printable stand-in character -> the byte it encodes."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: b for b in printable}
    shift = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + shift
            shift += 1
    return {chr(c): b for b, c in chars.items()}


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str


class Tokenizer:
    def __init__(self, backend, config: dict[str, Any], chat_template: str | None, source: str):
        self.backend = backend  # tokenizers.Tokenizer
        self.source = source
        self.chat_template = chat_template
        self.config = config
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self._special = {t.content: i for i, t in backend.get_added_tokens_decoder().items() if t.special}
        self._special_ids = frozenset(self._special.values())
        added = backend.get_added_tokens_decoder()
        self._added_text = {i: t.content for i, t in added.items()}
        decoder = json.loads(backend.to_str()).get("decoder") or {}
        self._decoder_kinds = _decoder_kinds(decoder)
        self._bytes_cache: dict[int, bytes] = {}
        self._alone_cache: dict[int, str] = {}

    @classmethod
    def from_folder(cls, folder: Path) -> "Tokenizer":
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise ModelFormatError(say("file.in", path=str(folder), problem=say("catalog.no_tokenizer")))
        try:
            backend = Backend.from_file(str(path))
        except BaseException as e:  # the Rust side raises plain Exceptions for any malformed file, or panics
            if not (isinstance(e, Exception) or is_panic(e)):
                raise
            why = (str(e).splitlines() or [type(e).__name__])[0][:200]
            raise ModelFormatError(say("file.in", path=str(path), problem=say("file.tokenizer_invalid", why=why))) \
                from None
        if backend.get_vocab_size(with_added_tokens=True) == 0:
            raise ModelFormatError(say("file.in", path=str(path), problem=say("file.tokenizer_empty")))
        probe(backend, str(path))
        config: dict[str, Any] = {}
        config_path = folder / "tokenizer_config.json"
        if config_path.is_file():
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError) as e:
                raise ModelFormatError(say("load.not_json", path=str(config_path),
                                           why=str(e) or "nested too deeply")) from None
            if not isinstance(config, dict):
                raise ModelFormatError(say("load.not_object", path=str(config_path)))
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: take the default one
            template = next((t.get("template") for t in template
                             if isinstance(t, dict) and t.get("name") == "default"), None)
        jinja_file = folder / "chat_template.jinja"
        if template is None and jinja_file.is_file():
            template = jinja_file.read_text(encoding="utf-8")
        if template is not None and not isinstance(template, str):
            raise ModelFormatError(say("load.chat_template_type", path=str(config_path)))
        return cls(backend, config, template, str(folder))

    # --- ids and text ---------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        try:
            return self.backend.encode(text, add_special_tokens=add_special_tokens).ids
        except BaseException as e:  # a split regex that passed the load probe may still panic on this text
            if not is_panic(e):
                raise
            why = (str(e).splitlines() or ["a Rust panic"])[0][:120]
            raise ModelFormatError(say("file.in", path=self.source, problem=say("file.tokenizer_failed", why=why))) \
                from None

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_ids

    def token_id(self, text: str) -> int | None:
        return self.backend.token_to_id(text)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes this token adds to the text (special tokens: their written form)."""
        cached = self._bytes_cache.get(token_id)
        if cached is not None:
            return cached
        if token_id in self._added_text:
            raw = self._added_text[token_id].encode("utf-8")
        else:
            piece = self.backend.id_to_token(token_id)
            if piece is None:  # the model's padded vocabulary rows beyond the tokenizer's: no text
                return b""
            raw = _piece_bytes(piece, self._decoder_kinds) or self.decode([token_id]).encode("utf-8")
        self._bytes_cache[token_id] = raw
        return raw

    def piece_text(self, token_id: int) -> str:
        """One token read on its own (a candidate that was not drawn): bytes that are not a whole UTF-8
        character show as \\xNN, as in the text stream, never as U+FFFD (which hides which byte it is)."""
        raw = self.token_bytes(token_id)
        return raw.decode("utf-8", errors=_HEX_ERRORS) if raw else f"<id {token_id}>"

    def texts_alone(self, ids) -> tuple[str, ...]:
        """How each token reads with nothing pending before it (a special token as written), cached: the
        report reads 20+ of them a step, and one call with dictionary hits is what that should cost."""
        cache, out = self._alone_cache, []
        for token_id in ids.tolist() if hasattr(ids, "tolist") else ids:
            text = cache.get(token_id)
            if text is None:
                special = self.is_special(token_id)
                text = cache[token_id] = (self.token_bytes(token_id).decode("utf-8") if special
                                          else self.piece_text(token_id))
            out.append(text)
        return tuple(out)

    def stream(self) -> "TextStream":
        return TextStream(self)

    # --- chat -----------------------------------------------------------------------------------------
    def special_token_text(self, key: str) -> str:
        value = self.config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return value if isinstance(value, str) else ""

    def render_chat(self, messages: list[ChatMessage], add_generation_prompt: bool = True) -> str:
        """The prompt text the model was trained to see for these messages (special tokens included)."""
        if not self.chat_template:
            raise ModelFormatError(say("file.in", path=self.source, problem=say("file.no_chat_template")))
        def raise_exception(message):
            raise TemplateError(message)

        variables = dict(messages=[{"role": m.role, "content": m.content} for m in messages],
                         add_generation_prompt=add_generation_prompt,
                         bos_token=self.special_token_text("bos_token"),
                         eos_token=self.special_token_text("eos_token"),
                         pad_token=self.special_token_text("pad_token"),
                         unk_token=self.special_token_text("unk_token"))
        def tojson(value, indent=None):
            return json.dumps(value, ensure_ascii=False, indent=indent)

        return render(self.chat_template, variables, self.source, {"raise_exception": raise_exception},
                      {"tojson": tojson})

    def encode_chat(self, messages: list[ChatMessage], add_generation_prompt: bool = True) -> list[int]:
        # The template already writes every special token the model expects; add none twice.
        return self.encode(self.render_chat(messages, add_generation_prompt), add_special_tokens=False)


class TextStream:
    """Rebuilds text token by token; a character split over tokens appears with the token completing it."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> tuple[str, str]:
        """Returns (text, piece): the characters this token completes and its display form."""
        tok = self.tokenizer
        if tok.is_special(token_id):
            flushed = self._decoder.decode(b"", final=True)  # bytes left dangling can never complete
            self._decoder.reset()
            text = flushed + tok.token_bytes(token_id).decode("utf-8")
            return text, text
        raw = tok.token_bytes(token_id)
        if not raw:
            return "", f"<id {token_id}>"
        text = self._decoder.decode(raw)
        piece = text if text else "".join(f"\\x{b:02X}" for b in raw)  # bytes of a character still incomplete
        return text, piece

    def peek(self, token_id: int) -> str:
        """How `token_id` would read if it came next: the characters it would complete, else its own bytes
        as \\xNN (a candidate shows what the stream would show, were it drawn). Nothing is consumed."""
        tok = self.tokenizer
        state = self._decoder.getstate()
        raw = tok.token_bytes(token_id)
        if not state[0] or not raw or tok.is_special(token_id):  # it reads as it does on its own
            return tok.texts_alone((token_id,))[0]
        text = self._decoder.decode(raw)
        self._decoder.setstate(state)
        return text or "".join(f"\\x{b:02X}" for b in raw)

    def peek_many(self, ids) -> tuple[str, ...]:
        """`peek` of each id: with no bytes pending (nearly always), the tokenizer's cached texts_alone."""
        if self._decoder.getstate()[0]:
            return tuple(self.peek(int(i)) for i in ids)
        return self.tokenizer.texts_alone(ids)


def _decoder_kinds(decoder: dict[str, Any]) -> set[str]:
    if decoder.get("type") == "Sequence":
        return {d.get("type") for d in decoder.get("decoders", [])}
    return {decoder.get("type")}


def _piece_bytes(piece: str, kinds: set[str]) -> bytes | None:
    """A vocabulary piece's bytes for the two families of decoders causal LMs use."""
    if "ByteLevel" in kinds:
        alphabet = _byte_level_alphabet()
        if all(ch in alphabet for ch in piece):
            return bytes(alphabet[ch] for ch in piece)
        return piece.encode("utf-8")
    if "ByteFallback" in kinds or "Metaspace" in kinds or "Replace" in kinds:
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            return bytes([int(piece[3:5], 16)])  # sentencepiece byte-fallback token
        return piece.replace("\u2581", " ").encode("utf-8")
    return None
