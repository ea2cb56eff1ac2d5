"""The few tags the views write in their summaries, laid out without a QTextDocument.

A summary that changes at every frame of a run (Timing's, the KV paragraph) is a line or a few of text with
<b>, <i>, <span style='color:…'> and <br>. QTextDocument.setHtml parses it with Qt's HTML and CSS machinery and
builds a document of frames and blocks (~0.3-0.5 ms a text here); the text's own layout, the same QTextLayout a
document's block uses, costs a fraction of that. `parse` reads that subset into the plain text and its
formatted runs (None for any other markup: the caller gives it to a QTextDocument), and `Laid` lays it out
and paints it: lines broken where a QLabel breaks them (at word boundaries, <br> as a line separator in the
same paragraph, as QTextDocument makes it).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QTextCharFormat, QTextLayout, QTextOption

UNBOUNDED = 1e7  # px: a line width nothing wraps at
LINE_SEPARATOR = "\u2028"  # what QTextDocument makes of <br>: a new line in the same paragraph
_TOKEN = re.compile(r"<(/?)([A-Za-z]+)((?:\s[^>]*)?)\s*/?>")
_COLOUR = re.compile(r"""color\s*:\s*([#\w]+)""")
_STYLE = re.compile(r"""^\s*style\s*=\s*(['"])([^'"]*)\1\s*$""")
_SPACES = re.compile(r"[ \t\r\n\f]+")  # HTML's white space (not the no-break space), one space where it runs
_STYLED = {"b": (True, False), "strong": (True, False), "i": (False, True), "em": (False, True),
           "span": (False, False)}


@dataclass(frozen=True)
class Run:
    start: int
    length: int
    bold: bool
    italic: bool
    colour: str | None


@dataclass(frozen=True)
class Marked:
    """A text as it reads, and the runs of it that are bold, italic or coloured."""
    text: str
    runs: tuple[Run, ...]


_parsed: dict[str, Marked | None] = {}


def parse(markup: str) -> Marked | None:
    """The plain text and formatted runs of `markup` (b, strong, i, em, span with a colour, br, entities); None
    where it has any other tag or attribute. Kept per text (a frame's texts repeat when steps are revisited)."""
    if markup in _parsed:
        return _parsed[markup]
    if len(_parsed) > 512:
        _parsed.clear()
    out = _parsed[markup] = _parse(markup)
    return out


def _parse(markup: str) -> Marked | None:
    text: list[str] = []
    runs: list[Run] = []
    length = 0
    stack: list[tuple[str, bool, bool, str | None]] = [("", False, False, None)]
    at = 0
    for match in [*_TOKEN.finditer(markup), None]:
        end = match.start() if match is not None else len(markup)
        if end > at:
            piece = html.unescape(_SPACES.sub(" ", markup[at:end]))
            if piece:
                _, bold, italic, colour = stack[-1]
                if bold or italic or colour:
                    runs.append(Run(length, len(piece), bold, italic, colour))
                text.append(piece)
                length += len(piece)
        if match is None:
            break
        at = match.end()
        closing, tag, attributes = match.group(1), match.group(2).lower(), match.group(3)
        if tag == "br" and not closing and not attributes.strip():
            text.append(LINE_SEPARATOR)
            length += 1
            continue
        if tag not in _STYLED:
            return None
        if closing:
            if stack[-1][0] != tag:
                return None  # not nested as written: leave it to Qt's parser
            stack.pop()
            continue
        colour = stack[-1][3]
        if attributes.strip():
            style = _STYLE.match(attributes)
            found = _COLOUR.search(style.group(2)) if style else None
            if found is None or style.group(2).replace(found.group(0), "").strip(" ;"):
                return None  # another attribute or property
            colour = found.group(1)
        bold, italic = _STYLED[tag]
        stack.append((tag, stack[-1][1] or bold, stack[-1][2] or italic, colour))
    return Marked("".join(text), tuple(runs))


def plain(text: str) -> Marked:
    """A plain text: its line breaks are line separators, as a QLabel shows them."""
    return Marked(text.replace("\n", LINE_SEPARATOR), ())


def paragraphs(marked: Marked) -> list[Marked]:
    """The text cut at its line separators, each piece with its own runs (positions from its start)."""
    pieces, start = [], 0
    for text in marked.text.split(LINE_SEPARATOR):
        end = start + len(text)
        runs = tuple(Run(max(r.start, start) - start, min(r.start + r.length, end) - max(r.start, start), r.bold,
                         r.italic, r.colour)
                     for r in marked.runs if r.start < end and r.start + r.length > start)
        pieces.append(Marked(text, runs))
        start = end + 1
    return pieces


class Paragraph:
    """One line-separated piece of a text laid out in a font: lines broken at a width, their height, its paint."""

    def __init__(self, marked: Marked, font: QFont):
        self.layout = QTextLayout(marked.text, font)
        option = QTextOption(Qt.AlignLeft)  # left-aligned: a line laid out unbroken is the same at any wider width
        option.setWrapMode(QTextOption.WordWrap)
        self.layout.setTextOption(option)
        formats = []
        for run in marked.runs:
            char = QTextCharFormat()
            if run.bold:
                char.setFontWeight(QFont.Bold)
            if run.italic:
                char.setFontItalic(True)
            if run.colour is not None:
                char.setForeground(QColor(run.colour))
            span = QTextLayout.FormatRange()
            span.start, span.length, span.format = run.start, run.length, char
            formats.append(span)
        if formats:
            self.layout.setFormats(formats)
        self.width = -1.0  # the width its lines are broken at now
        self.height = 0.0
        self.heights: dict[float, float] = {}  # its height at each width it was measured at
        self.natural: float | None = None  # its width on one line (a line set no narrower breaks nowhere)

    def _break(self, width: float) -> float:
        self.width = width
        layout, y = self.layout, 0.0
        layout.beginLayout()
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            line.setPosition(QPointF(0.0, y))
            y += line.height()
        layout.endLayout()
        self.height = y
        return y

    def lay_out(self, width: float) -> float:
        """Break the lines at `width` (again only when that breaks them elsewhere); returns their height. Laid out
        first on one unbounded line: at any width as wide as that line, the lines are the same (left-aligned), and a
        one-line text is laid out once whatever widths it is asked about and painted at."""
        if self.natural is None:
            self._break(UNBOUNDED)
            self.natural = self.layout.lineAt(0).naturalTextWidth() if self.layout.lineCount() == 1 else UNBOUNDED
            self.heights[UNBOUNDED] = self.height
        key = UNBOUNDED if width >= self.natural else width
        if key != self.width:
            self.heights[key] = self._break(key)
        return self.height

    def height_at(self, width: float) -> float:
        """Its height at `width`, measured once per width (the layouts ask at their preferred width too: the
        lines broken there and back at the painted width at every frame cost twice the layout)."""
        if self.natural is not None and width >= self.natural:
            return self.heights[UNBOUNDED]
        height = self.heights.get(width)
        return self.lay_out(width) if height is None else height


class Laid:
    """A marked text laid out in a font, paragraph by paragraph (a line separator starts one). A text that
    changes at every frame mostly keeps its paragraphs (Timing's prefill line, the KV formula's first line): a
    paragraph laid out for the text before is taken over as it is (`reuse`), not shaped again."""

    def __init__(self, marked: Marked, font: QFont, reuse: dict | None = None):
        self.text = marked.text
        reuse = reuse or {}
        self.kept: dict[tuple, Paragraph] = {}  # what the next text may take over: this one's paragraphs
        self.pieces: list[Paragraph] = []
        font_key = font.key()
        for piece in paragraphs(marked):
            key = (piece, font_key)
            paragraph = self.kept.get(key) or reuse.get(key) or Paragraph(piece, font)
            self.kept[key] = paragraph
            self.pieces.append(paragraph)

    def lay_out(self, width: float) -> float:
        """The lines broken at `width`, to paint; their height (the paragraphs' heights added)."""
        return sum(piece.lay_out(width) for piece in self.pieces)

    def height_at(self, width: float) -> float:
        """The height at `width`, the lines left broken where they are."""
        return sum(piece.height_at(width) for piece in self.pieces)

    @property
    def height(self) -> float:
        """The height as laid out last (lay_out)."""
        return sum(piece.height for piece in self.pieces)

    def paint(self, painter: QPainter, at: QPointF, region: QRect | None = None) -> None:
        """At `at` (the top left), in the painter's pen where a run sets no colour; only the paragraphs that reach
        into `region` (the paint's rectangle), where one is given."""
        y = at.y()
        for piece in self.pieces:
            if region is None or (y <= region.bottom() + 1 and y + piece.height >= region.top() - 1):
                piece.layout.draw(painter, QPointF(at.x(), y))
            y += piece.height
