"""A word-wrapped label whose size questions cost one text layout per change of its text or width."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QPainter, QTextLayout
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from gui.state import i18n

PREFERRED_CHARS = 80  # the width a label asks for, in average characters (QLabel's own first try)
MINIMUM_CHARS = 16  # the narrowest it may be squeezed to: a long word


_CJK_LINES: dict[str, int] = {}  # a font's line height for Chinese text, by QFont.key()


def line_spacing(widget: QWidget) -> int:
    """The height of a line of the widget's text in the app's language. Chinese glyphs come from a fallback
    font whose lines are taller than the Latin font's (18 against 14 px at 9 pt): a label that keeps room for
    N lines of fontMetrics().lineSpacing() cut the bottom of its last Chinese line."""
    spacing = widget.fontMetrics().lineSpacing()
    if i18n.language() == "en":
        return spacing
    font = widget.font()
    height = _CJK_LINES.get(font.key())
    if height is None:
        layout = QTextLayout("中", font)
        layout.beginLayout()
        line = layout.createLine()
        line.setLineWidth(1000)
        layout.endLayout()
        height = _CJK_LINES[font.key()] = math.ceil(line.height())
    return max(spacing, height)


def wrapped_lines(text: str, font, width: int) -> list[tuple[int, int]]:
    """(start, length) of each line of `text` wrapped at `width`, where Qt breaks lines: at spaces, and between
    any two Chinese characters (a Chinese sentence has no spaces to break at)."""
    layout = QTextLayout(text, font)
    layout.beginLayout()
    lines = []
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(max(width, 1))
        lines.append((line.textStart(), line.textLength()))
    layout.endLayout()
    return lines


class WrapLabel(QLabel):
    """A QLabel with word wrap for texts that change at every frame of a run (summaries, headers).

    QLabel lays its text out again for each size question after a change: three times for its size hints
    (at its preferred width, one line, and width 0: a word a line) and once per height-for-width question,
    before painting it. Here the hints cost one layout: the height at the preferred width, cached per width
    until the text or font changes. Measured over 60 frames: the layout passes a frame's text changes set
    off took 5.9 -> 4.6 ms of GUI time (Timing's and KV's summaries 2.8 -> 1.9 ms).
    """

    def __init__(self, text: str = "", lines: int = 1):
        super().__init__(text)
        self.setWordWrap(True)
        self.lines = lines  # never shorter than this many lines: a text that wraps does not move what is below
        self._heights: dict[int, int] = {}

    def setText(self, text: str) -> None:
        if text != self.text():
            self._heights.clear()
            super().setText(text)

    def changeEvent(self, event) -> None:
        if event.type() in (QEvent.FontChange, QEvent.StyleChange, QEvent.LanguageChange):
            self._heights.clear()
            self.updateGeometry()
        super().changeEvent(event)

    def heightForWidth(self, width: int) -> int:
        height = self._heights.get(width)
        if height is None:
            if len(self._heights) > 16:
                self._heights.clear()
            height = self._heights[width] = max(super().heightForWidth(width), self._least_height())
        return height

    def _least_height(self) -> int:
        margins = self.contentsMargins()
        return self.lines * line_spacing(self) + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:
        """The preferred width; the height of the lines at the width the label has on screen (at the
        preferred width before it is placed). A text that changes at every frame costs one layout, the one its
        paint needs anyway, not a second one at a width it does not have (the KV paragraph: ~0.4 ms a frame)."""
        width = min(self.fontMetrics().averageCharWidth() * PREFERRED_CHARS, self.maximumWidth())
        placed = self.width() if self.isVisible() and self.testAttribute(Qt.WA_Resized) else 0
        return QSize(width, self.heightForWidth(placed if placed > 0 else width))

    def minimumSizeHint(self) -> QSize:
        margins = self.contentsMargins()
        width = min(self.fontMetrics().averageCharWidth() * MINIMUM_CHARS, self.maximumWidth())
        return QSize(width + margins.left() + margins.right(), self._least_height())


class CaptionLabel(QLabel):
    """A caption of at most `lines` lines, whatever its width: the text wraps at words and the last line ends
    in "…" when the rest does not fit; the whole text is its tooltip. Its height is always `lines` lines, so
    a narrow plot's caption never grows into the plot above it (layouts give a wrapped QLabel the height of
    its preferred width, and a squeezed one was drawn over the axis)."""

    def __init__(self, lines: int = 2):
        super().__init__()
        self.lines = lines
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)

    def setText(self, text: str) -> None:
        if text != self.text():
            super().setText(text)
            self.setToolTip(text)

    def changeEvent(self, event) -> None:
        if event.type() == QEvent.LanguageChange:
            self.updateGeometry()  # Chinese lines are taller
        super().changeEvent(event)

    def _height(self) -> int:
        margins = self.contentsMargins()
        return self.lines * line_spacing(self) + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().averageCharWidth() * PREFERRED_CHARS // 2, self._height())

    def minimumSizeHint(self) -> QSize:
        return QSize(self.fontMetrics().averageCharWidth() * MINIMUM_CHARS, self._height())

    def shown_lines(self, width: int) -> list[str]:
        """The lines drawn at this width: wrapped where Qt breaks lines (spaces; between Chinese characters), the
        last line elided when text is left over."""
        text, metrics = " ".join(self.text().split()), self.fontMetrics()
        spans = wrapped_lines(text, self.font(), width)
        lines = [text[start:start + length].strip() for start, length in spans[:self.lines]]
        if len(spans) > self.lines or (lines and metrics.horizontalAdvance(lines[-1]) > width):
            start = spans[self.lines - 1][0] if len(spans) >= self.lines else spans[-1][0]
            lines[-1] = metrics.elidedText(text[start:], Qt.ElideRight, width)
        return lines

    def paintEvent(self, event) -> None:
        rect = self.contentsRect()
        painter = QPainter(self)
        step = line_spacing(self)
        for i, line in enumerate(self.shown_lines(rect.width())):
            self.style().drawItemText(painter, rect.adjusted(0, i * step, 0, 0), int(Qt.AlignLeft | Qt.AlignTop),
                                      self.palette(), self.isEnabled(), line, self.foregroundRole())


class ElidedLabel(QLabel):
    """One line of plain text that lets its neighbours have the room: it may be squeezed to a few characters,
    and then paints its text cut short with "…" (the whole text in its tooltip). A plain QLabel asks for its
    whole text as its minimum, so a long line pushed the widgets beside it (the status bar's model line) off the
    window's edge."""

    always_tip = False  # the text in the tooltip even when it is shown whole

    def minimumSizeHint(self) -> QSize:
        return QSize(self.fontMetrics().averageCharWidth() * 8, super().minimumSizeHint().height())

    def is_elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def setText(self, text: str) -> None:
        super().setText(text)
        self._tip()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._tip()

    def _tip(self) -> None:
        self.setToolTip(self.text() if self.always_tip or self.is_elided() else "")

    def paintEvent(self, event) -> None:
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), Qt.ElideRight, rect.width())
        painter = QPainter(self)
        self.style().drawItemText(painter, rect, int(self.alignment()), self.palette(), self.isEnabled(), text,
                                  self.foregroundRole())


class SteadyLabel(QLabel):
    """A one-line label whose size is that of the longest of its `widest` texts (in its current font): a
    text that changes at every frame (the history's "step 12 of 40") repaints the label alone. Qt passes a
    label's layout request up to the window at each text change unless its size is fixed; in the toolbar
    that re-laid out the main window and repainted all of it at every frame. A longer text is cut with "…"
    (whole in its tooltip)."""

    def __init__(self, widest: tuple[str, ...], text: str = ""):
        super().__init__()
        self.widest = widest
        self._full = ""
        self._fit()
        self.setText(text)

    def _fit(self) -> None:
        metrics, margins = self.fontMetrics(), self.contentsMargins()
        width = max(metrics.horizontalAdvance(text) for text in self.widest) + 2 * self.margin()
        height = max(metrics.height(), line_spacing(self)) + 2 * self.margin()
        self.setFixedSize(width + margins.left() + margins.right(), height + margins.top() + margins.bottom())

    def set_widest(self, widest: tuple[str, ...]) -> None:
        """Other longest texts (the same ones in another language): the label takes their size."""
        self.widest = widest
        self._fit()
        self._show()

    def full_text(self) -> str:
        return self._full

    def setText(self, text: str) -> None:
        if text == self._full:
            return
        self._full = text
        self._show()

    def _show(self) -> None:
        width = self.contentsRect().width() - 2 * self.margin()
        shown = self.fontMetrics().elidedText(self._full, Qt.ElideRight, max(width, 0))
        self.setToolTip(self._full if shown != self._full else "")
        super().setText(shown)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.FontChange, QEvent.StyleChange):
            self._fit()
            self._show()
