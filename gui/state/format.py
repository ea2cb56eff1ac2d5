"""Text and number formatting that more than one view (and the status bar) uses, so they all agree."""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from dataclasses import dataclass
from typing import Sequence

from gui.state.i18n import QT_TRANSLATE_NOOP, number, translate


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{number(n / size, 2 if abs(n) / size < 100 else 0)} {unit}"
    return f"{number(n)} B"


def fmt_count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{number(n / size, 1)} {unit}"
    return str(int(n))


def fmt_params(n: int) -> str:
    """ "134.5 M parameters", or that a server did not say (vLLM reports no parameter count: not 0)."""
    return translate("Format", "{count} parameters").format(count=fmt_count(n)) if n > 0 else \
        translate("Format", "parameters not reported by the server")


# Why a generation ended (the engine's `stop.reason` codes; the trace keeps the codes)
STOP_REASONS = {"eos": QT_TRANSLATE_NOOP("Format", "end of sequence"),
                "max_new_tokens": QT_TRANSLATE_NOOP("Format", "max new tokens"),
                "stop_string": QT_TRANSLATE_NOOP("Format", "stop string"),
                "context_full": QT_TRANSLATE_NOOP("Format", "context window full"),
                "aborted": QT_TRANSLATE_NOOP("Format", "stopped by you")}


def stop_reason(code: str) -> str:
    """A stop reason in the app's language ("eos" → "end of sequence"); an unknown code as it came."""
    return translate("Format", STOP_REASONS[code]) if code in STOP_REASONS else code


def plural(n: int, word: str, many: str | None = None) -> str:
    """ "1 token", "2 tokens", "1,024 tokens" ("branch" → "branches": give `many` where "s" is wrong)."""
    return f"{number(n)} {word if n == 1 else many or word + 's'}"


def display(piece: str) -> str:
    """A token's text as every view shows it: its whitespace made visible, so that " Paris" reads as one token
    with its space, and its bytes that are no whole character as ‹E8 A7› (the engine writes them \\xE8\\xA7)."""
    shown = byte_label(piece.replace(" ", "·").replace("\t", "→").replace("\r", "").replace("\n", "↵"))
    return shown or "∅"


ONE_OF_MANY = re.compile(r"(?<![\d.,])1 ((?:new |prompt |older |draft |cached )?)(token|candidate|position|step|model)s"
                         r"( were)?\b")


def agree(english: str) -> str:
    """English text filled with counts, its plurals made to agree: "the 1 older positions were read" → "the 1
    older position was read" (a sentence written for many, shown with one)."""
    return ONE_OF_MANY.sub(lambda m: f"1 {m.group(1)}{m.group(2)}" + (" was" if m.group(3) else ""), english)


def rank_text(chosen_rank: int) -> str:
    """A rank as a learner reads it: 1 for the model's top token (the trace's `chosen_rank` is 0-based)."""
    return number(chosen_rank + 1)


def quoted(piece: str) -> str:
    """A token in a sentence or a tooltip: “·Paris”, “‹E8 A7›” (never Python's ' Paris' or '\\\\xBB')."""
    return f"“{display(piece)}”"


# --- characters split over tokens (Chinese, emoji): Qt-free, so it is tested on real token ids ----------
@dataclass(frozen=True)
class CharPart:
    """The bytes a token carries of one UTF-8 character that is split over more than one token."""

    char: str  # the character ("" while it is not complete: the next token completes it)
    first: int  # 1-based: the token's first byte of it
    last: int  # its last byte of it
    size: int  # bytes of the whole character

    def describe(self) -> str:
        which = translate("Format", "byte {first}").format(first=self.first) if self.first == self.last else \
            translate("Format", "bytes {first}–{last}").format(first=self.first, last=self.last)
        of = self.char if self.char else translate("Format", "a character the next token completes")
        return translate("Format", "{which} of {size} of {char}").format(which=which, size=self.size, char=of)


_NOT_ASCII = re.compile(rb"[\x80-\xff]")


def _char_size(lead: int) -> int:
    """Bytes of the UTF-8 character a lead byte starts (0: not a lead byte)."""
    return 1 if lead < 0x80 else 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else \
        4 if 0xF0 <= lead < 0xF5 else 0


def split_characters(raws: Sequence[bytes]) -> tuple[list[list[CharPart]], list[tuple[int, int]]]:
    """For tokens' raw bytes in order: per token, the parts it carries of characters split over tokens;
    and the runs of tokens those characters join (start, end exclusive; 2 tokens or more), which a reader
    sees as one group: "\\xE6\\xB1" + "\\x89" is 汉.

    Only the bytes past ASCII are looked at, one by one (a regular expression finds the next; a byte's token by
    bisection over the tokens' offsets): a Run's frames ask at every step, over the whole context."""
    data = b"".join(raws)
    if data.isascii():  # no character of more than one byte, split or not
        return [[] for _ in raws], []
    starts = list(accumulate((len(raw) for raw in raws[:-1]), initial=0))  # each token's first byte

    def owner(at: int) -> int:
        return bisect_right(starts, at) - 1  # an empty token owns no byte: the next one starts there too

    parts: list[list[CharPart]] = [[] for _ in raws]
    links: list[tuple[int, int]] = []
    found = _NOT_ASCII.search(data)
    while found is not None:
        at = found.start()
        size = _char_size(data[at])
        chunk = data[at:at + size]
        step = 1
        if size > 1 and all(b & 0xC0 == 0x80 for b in chunk[1:]):  # else no UTF-8 character starts here
            complete = len(chunk) == size
            try:
                char = chunk.decode("utf-8") if complete else ""
            except UnicodeDecodeError:
                char = None
            if char is not None:
                owners = [owner(at + k) for k in range(len(chunk))]
                if owners[0] != owners[-1] or not complete:  # not complete: the end of the text, the next token's
                    for token in sorted(set(owners)):
                        mine = [k + 1 for k, o in enumerate(owners) if o == token]
                        parts[token].append(CharPart(char, mine[0], mine[-1], size))
                    links.append((owners[0], owners[-1]))
                step = len(chunk)
        found = _NOT_ASCII.search(data, at + step)
    return parts, _runs(links)


def _runs(links: list[tuple[int, int]]) -> list[tuple[int, int]]:
    runs: list[list[int]] = []
    for first, last in links:
        if runs and first <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], last)
        else:
            runs.append([first, last])
    return [(a, b + 1) for a, b in runs if b > a]


HEX_ESCAPES = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+")


def byte_label(text: str) -> str:
    """A token's text as shown alone, its bytes that are no whole character (\\xE6\\xB1) as ‹E6 B1›."""
    return HEX_ESCAPES.sub(lambda m: "‹" +
                           " ".join(m.group(0)[k + 2:k + 4].upper() for k in range(0, len(m.group(0)), 4)) + "›",
                           text)


BYTE_GROUP = re.compile(r"‹[0-9A-F]{2}(?: [0-9A-F]{2})*›")


def partial_note(text: str) -> str:
    """For a candidate whose text (as the engine wrote it, or as shown) has bytes of an unfinished character:
    what they are (else "")."""
    if not HEX_ESCAPES.search(text) and not BYTE_GROUP.search(text):
        return ""
    return translate("Format", "‹…› are bytes of a UTF-8 character that this token does not finish: the character "
                     "completes with the next token (Chinese and emoji often take 2 tokens or more)")
