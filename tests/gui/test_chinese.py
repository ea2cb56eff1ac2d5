"""Chinese (and emoji) in the Context view: a character whose UTF-8 bytes are split over tokens is shown as
one joined chip group, each token's tooltip says which bytes of it it carries, candidates that are bytes
read ‹E6 B1›; and the plain transcript. On the default model's real token ids."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from PySide6.QtGui import QColor, QTextCursor

from app_driver import idle, settle, wait_until, window_fixture
from gui.state.format import byte_label, partial_note, split_characters
from inference.session.session import prompt_ids

PROMPT = "用中文介绍一下巴黎"

window = window_fixture("chinese")


def _tokens(model):
    ids, text = prompt_ids(model, PROMPT, chat=True)
    stream = model.tokenizer.stream()
    return ids, text, [stream.push(i) for i in ids], [model.tokenizer.token_bytes(i) for i in ids]


def test_split_characters_on_real_token_ids(default_model):
    ids, text, pushed, raws = _tokens(default_model)
    parts, runs = split_characters(raws)
    partial = [k for k, (shown, _piece) in enumerate(pushed) if not shown]
    assert partial, "the prompt should have tokens that carry only bytes of a character"
    in_run = {k for start, end in runs for k in range(start, end)}
    assert set(partial) <= in_run  # every byte-only token is drawn with the token(s) completing it
    for k in partial:
        chars = {p.char for p in parts[k]}
        assert chars and all(c in PROMPT for c in chars)
        nxt = pushed[k + 1][0] or pushed[k + 2][0]  # the character shows with the token that completes it
        assert parts[k][-1].char == nxt[0]
    for start, end in runs:  # a run's bytes are whole characters of the prompt, each counted byte by byte
        whole = b"".join(raws[start:end]).decode("utf-8")
        assert whole in text and whole == "".join(shown for shown, _ in pushed[start:end])
        for char in set(whole):
            carried = [p for k in range(start, end) for p in parts[k] if p.char == char]
            if carried:
                assert sum(p.last - p.first + 1 for p in carried) == len(char.encode("utf-8")) == carried[0].size
    first = parts[partial[0]][0]
    assert first.describe() == (f"byte{'s' if first.last > first.first else ''} "
                                f"{first.first}{'–' + str(first.last) if first.last > first.first else ''} "
                                f"of {first.size} of {first.char}")


def test_an_unfinished_character_at_the_end():
    raw = "汉".encode("utf-8")
    parts, runs = split_characters([b"ab", raw[:2]])
    assert runs == [] and parts[0] == []
    assert parts[1][0].describe() == "bytes 1–2 of 3 of a character the next token completes"


def test_candidate_bytes_read_as_a_hex_group(default_model):
    tok = default_model.tokenizer
    partial = next(i for i in range(tok.backend.get_vocab_size())
                   if len(tok.token_bytes(i)) == 2 and tok.token_bytes(i)[0] == 0xE6)
    text = tok.piece_text(partial)  # what a candidate list gets: \xE6\xNN
    hexes = " ".join(f"{b:02X}" for b in tok.token_bytes(partial))
    assert byte_label(text) == f"‹{hexes}›" and "next token" in partial_note(text)
    assert byte_label(" Paris") == " Paris" and partial_note(" Paris") == ""


def test_the_context_groups_chinese_and_shows_a_transcript(window):
    win, c = window, window.controller
    win.controls.chat.setChecked(True)
    win.controls.prompt.setPlainText(PROMPT)
    win.actions["prefill"].trigger()
    wait_until(lambda: c.prefilled and PROMPT in c.prefill_event.prompt_text and idle(c))
    settle(win)
    view = win.views["context"]
    canvas = view.canvas
    tokens = c.prefill_event.tokens
    groups = canvas.groups()
    assert groups and all(label and all(ch in PROMPT for ch in label) for _s, _e, label in groups)
    grouped = {i for start, end, _ in groups for i in range(start, end)}
    for i, token in enumerate(tokens):
        if not token.text:  # bytes only: in a group, its tooltip names its bytes of the character
            assert i in grouped and " of 3 of " in canvas.tooltips[i]
            assert canvas.chips[i].rect.right() == canvas.chips[i + 1].rect.left()  # drawn joined
    view.plain.setChecked(True)
    settle(win)
    shown = view.transcript.toPlainText()
    assert PROMPT in shown and "<|im_start|>" in shown and "\\x" not in shown
    cursor = QTextCursor(view.transcript.document())
    cursor.setPosition(shown.index("<|im_start|>") + 2)
    dim = QColor(win.appearance.theme.muted)
    assert cursor.charFormat().foreground().color() == dim  # the template's special tokens, dimmed
    cursor.setPosition(shown.index(PROMPT) + 2)
    assert cursor.charFormat().foreground().color() != dim
    view.plain.setChecked(False)


def test_ascii_tokens_carry_no_split_character_and_a_split_one_after_them_is_found():
    assert split_characters([b"Once", b" upon", b" a"]) == ([[], [], []], [])
    parts, runs = split_characters([b"Once", b" \xe6\xb1", b"\x89"])  # 汉 split over two tokens after ASCII ones
    assert runs == [(1, 3)] and parts[0] == [] and {p.char for p in parts[1] + parts[2]} == {"汉"}


def _split_byte_by_byte(raws):
    """The definition, byte by byte: at each byte, the UTF-8 character it starts, if any; one that lies across two
    tokens, or is cut off at the end, is split (what split_characters finds by skipping ASCII and bisecting)."""
    data = b"".join(raws)
    owner = [i for i, raw in enumerate(raws) for _ in raw]
    parts, links, at = [[] for _ in raws], [], 0
    while at < len(data):
        lead = data[at]
        size = 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 1
        chunk = data[at:at + size]
        if size == 1 or any(b & 0xC0 != 0x80 for b in chunk[1:]):
            at += 1
            continue
        try:
            char = chunk.decode("utf-8") if len(chunk) == size else ""
        except UnicodeDecodeError:
            at += 1
            continue
        owners = owner[at:at + len(chunk)]
        if owners[0] != owners[-1] or len(chunk) < size:
            for token in sorted(set(owners)):
                mine = [k + 1 for k, o in enumerate(owners) if o == token]
                parts[token].append((char, mine[0], mine[-1], size))
            links.append((owners[0], owners[-1]))
        at += len(chunk)
    return parts, links


PIECES = [b"", b"a b", b"\xe6", b"\xb1", b"\x89", b"\xe6\xb1\x89", b"\xf0\x9f", b"\x98\x80", b"\xc3", b"\xa9",
          b"\xff", b"\xc0\x80", b"\x80", "汉字 émigré 😀".encode()]


@given(st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=4)), min_size=1, max_size=12))
@settings(max_examples=400, deadline=None)
def test_split_characters_finds_what_a_byte_by_byte_reading_finds(raws):
    parts, runs = split_characters(raws)
    expected_parts, links = _split_byte_by_byte(raws)
    assert [[(p.char, p.first, p.last, p.size) for p in token] for token in parts] == expected_parts
    merged: list[list[int]] = []  # the tokens the links join, overlapping groups merged (links come in order)
    for first, last in links:
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    assert runs == [(first, last + 1) for first, last in merged if last > first]
