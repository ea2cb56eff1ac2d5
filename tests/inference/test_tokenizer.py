"""Per-token text: byte-level pieces decoded, split UTF-8 characters, special tokens."""

import pytest

from inference.text.tokenizer import Tokenizer
from tiny import write_tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    write_tokenizer(folder)
    return Tokenizer.from_folder(folder)


def _stream(tok, ids):
    s = tok.stream()
    return [s.push(i) for i in ids]


def test_concatenated_token_texts_equal_decode(tok):
    for text in ("the thin tin", "naïve café", "日本語のテキスト", "emoji 🚀 ok", "tabs\tand\nnewlines"):
        ids = tok.encode(text)
        assert "".join(t for t, _ in _stream(tok, ids)) == tok.decode(ids) == text


def test_split_character_shows_bytes_then_completes(tok):
    ids = tok.encode("你")  # three byte tokens in this byte-only vocabulary
    assert len(ids) == 3
    pieces = _stream(tok, ids)
    assert [t for t, _ in pieces] == ["", "", "你"]
    assert pieces[0][1] == "\\xE4" and pieces[1][1] == "\\xBD" and pieces[2][1] == "你"
    assert tok.piece_text(ids[0]) == "\\xE4"  # a candidate on its own: the byte, not U+FFFD
    assert tok.piece_text(ids[2]) == "\\xA0"


def test_special_tokens_are_shown_as_written(tok):
    eos = tok.token_id("</s>")
    assert tok.is_special(eos) and not tok.is_special(tok.encode("a")[0])
    # a dangling partial character before a special token is flushed as a replacement character
    ids = tok.encode("你")[:1] + [eos]
    assert [t for t, _ in _stream(tok, ids)] == ["", "\ufffd</s>"]


def test_ids_beyond_the_tokenizer_have_a_placeholder(tok):
    beyond = tok.vocab_size + 5
    assert tok.piece_text(beyond) == f"<id {beyond}>"
    assert _stream(tok, [beyond]) == [("", f"<id {beyond}>")]


def test_chat_template_renders_in_sandbox(tok):
    from inference.text.tokenizer import ChatMessage

    text = tok.render_chat([ChatMessage("system", "be brief"), ChatMessage("user", "hi")])
    assert text == "<s>system: be brief</s><s>user: hi</s><s>assistant: "
    ids = tok.encode_chat([ChatMessage("user", "hi")])
    assert ids[0] == tok.token_id("<s>") and ids.count(tok.token_id("<s>")) == 2
