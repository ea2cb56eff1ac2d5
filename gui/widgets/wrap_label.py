"""A word-wrapped label whose size questions cost one text layout per change of its text or width."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (QAbstractTextDocumentLayout, QGuiApplication, QPainter, QPalette, QTextDocument,
                           QTextLayout)
from PySide6.QtGui import Qt as QtGui
from PySide6.QtWidgets import QLabel, QMenu, QSizePolicy, QWidget

from gui.state import i18n
from gui.state.i18n import translate
from gui.widgets import markup

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
    """A word-wrapped label for texts that change at every frame of a run (summaries, headers), rich or plain.

    It lays its text out itself: the views' few tags in one text layout per line (markup.py), any other markup in a
    document of its own. A line is laid out once per text and width, and a new text repaints only the lines that
    changed. QLabel, for a rich text, parsed the text into its document at each change, laid it out twice per
    height-for-width question (at the width asked, then back at its own) and once more to paint; and every change
    asked the layouts above it again (updateGeometry: a pass up to the dock). Here a change asks them only when a
    height it told them (at its width, or at any other width a layout asked) changed. Measured in a frame of the
    1600x1000 window (60 steps shown in turn): the KV paragraph and Timing's summary cost 1.2 and 1.1 ms of a frame's
    GUI CPU as QLabels.

    The label is still a QLabel to the style sheet (QLabel#muted, #heading) and to its callers (`text()`,
    `textFormat()`, `alignment()` (vertical; the text is left-aligned)); QLabel's own text stays a space. A
    selectable label (setTextInteractionFlags) offers "Copy" on its context menu instead of a mouse selection.
    """

    def __init__(self, text: str = "", lines: int = 1):
        super().__init__()
        self.setWordWrap(True)
        QLabel.setText(self, " ")  # a text label to Qt: a wrapped one has a height for its width (its size policy)
        self.lines = lines  # never shorter than this many lines: a text that wraps does not move what is below
        self._text = ""
        self._doc = QTextDocument()
        self._doc.setDocumentMargin(0)
        self._doc.setUndoRedoEnabled(False)
        self._laid: markup.Laid | None = None  # the text's layout (None: in the document, other markup)
        self._heights: dict[int, int] = {}  # the label's height at a width, for this text and font
        self._told: dict[int, int] = {}  # the heights answered since the last updateGeometry, by width
        self._laid_width = -1.0  # the width the document is laid out at now
        self.setText(text)

    # --- text -----------------------------------------------------------------------------------------
    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        """A new text; the layouts above are asked again only when a height they were told changed (a layout
        keeps what it was told per width until the label's updateGeometry)."""
        if text == self._text:
            return
        told, self._told = self._told, {}
        before = self._laid
        self._text = text
        self._fill()
        if not told or len(told) > 4 or any(self.heightForWidth(w) != h for w, h in told.items()):
            self._told = {}
            self.updateGeometry()
            self.update()
        else:
            self.update(self._changed_lines(before))

    def _changed_lines(self, before: "markup.Laid | None") -> QRect:
        """Where the new text's paint differs from the one before: the lines from its first paragraph that is
        not the one before (those kept were laid out once, and are painted as they are) down to the last one
        (all the rest where a height changed)."""
        rect = self.contentsRect()
        if before is None or self._laid is None or not self.isVisible():
            return rect
        width = float(max(rect.width(), 1))
        old, new = before.pieces, self._laid.pieces
        if before.lay_out(width) != self._laid.lay_out(width):
            return rect  # the text moves (centred in the label): all of it
        y, first, last = 0.0, None, None
        for i, piece in enumerate(new):
            same_place = i < len(old) and old[i].height == piece.height
            if i >= len(old) or old[i] is not piece:
                first = y if first is None else first
                last = y + piece.height if same_place else float(rect.height())
            if not same_place:
                break
            y += piece.height
        if first is None:
            return QRect()
        top = self._text_top(rect, self._laid.height)
        return QRect(rect.left(), math.floor(top + first) - 1, rect.width(), math.ceil(last - first) + 3)

    def _text_top(self, rect: QRect, height: float) -> float:
        """Where the text's first line begins: at the top, or as the label's vertical alignment puts it."""
        vertical = self.alignment() & Qt.AlignVertical_Mask
        top = rect.top() if vertical & Qt.AlignTop else (
            rect.bottom() + 1 - height if vertical & Qt.AlignBottom else rect.top() + (rect.height() - height) / 2)
        return max(float(rect.top()), top)

    def setTextFormat(self, text_format) -> None:
        super().setTextFormat(text_format)
        self._fill()

    def _is_rich(self) -> bool:
        text_format = self.textFormat()
        return text_format == Qt.RichText or (text_format == Qt.AutoText and QtGui.mightBeRichText(self._text))

    def _fill(self) -> None:
        """The text laid out anew (its height at any width is measured again): the views' few tags in a text
        layout (markup.py), any other markup in a document."""
        marked = markup.parse(self._text) if self._is_rich() else markup.plain(self._text)
        kept = self._laid.kept if self._laid is not None else None
        self._laid = None if marked is None else markup.Laid(marked, self.font(), kept)
        if marked is None:
            self._doc.setDefaultFont(self.font())
            self._doc.setHtml(self._text)
        self._heights.clear()
        self._laid_width = -1.0

    def changeEvent(self, event) -> None:
        if event.type() in (QEvent.FontChange, QEvent.StyleChange, QEvent.LanguageChange):
            self._fill()
            self._told = {}
            self.updateGeometry()
        super().changeEvent(event)

    # --- size -----------------------------------------------------------------------------------------
    def _placed_width(self) -> int:
        """The width the label has on screen (0 before it is placed)."""
        return self.width() if self.isVisible() and self.testAttribute(Qt.WA_Resized) else 0

    def _lay_out(self, width: float, to_paint: bool = True) -> float:
        """The text's lines broken at `width`; their height (`to_paint` False: only the height)."""
        if self._laid is not None:
            return self._laid.lay_out(width) if to_paint else self._laid.height_at(width)
        if width != self._laid_width:
            self._doc.setTextWidth(width)
            self._laid_width = width
        return self._doc.size().height()

    def heightForWidth(self, width: int) -> int:
        height = self._heights.get(width)
        if height is None:
            if len(self._heights) > 16:
                self._heights.clear()
            margins = self.contentsMargins()
            inner = max(width - margins.left() - margins.right(), 1)
            text = math.ceil(self._lay_out(float(inner), to_paint=False)) if self._text else 0
            height = self._heights[width] = max(text + margins.top() + margins.bottom(), self._least_height())
        self._told[width] = height
        return height

    def _least_height(self) -> int:
        margins = self.contentsMargins()
        return self.lines * line_spacing(self) + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:
        """The preferred width; the height of the lines at the width the label has on screen (at the
        preferred width before it is placed)."""
        width = min(self.fontMetrics().averageCharWidth() * PREFERRED_CHARS, self.maximumWidth())
        placed = self._placed_width()
        return QSize(width, self.heightForWidth(placed if placed > 0 else width))

    def minimumSizeHint(self) -> QSize:
        margins = self.contentsMargins()
        width = min(self.fontMetrics().averageCharWidth() * MINIMUM_CHARS, self.maximumWidth())
        return QSize(width + margins.left() + margins.right(), self._least_height())

    # --- paint ----------------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        if not self._text:
            return
        rect = self.contentsRect()
        height = self._lay_out(float(max(rect.width(), 1)))
        colour = self.palette().color(QPalette.Active if self.isEnabled() else QPalette.Disabled,
                                      self.foregroundRole())
        painter = QPainter(self)
        at = QPointF(rect.left(), self._text_top(rect, height))
        if self._laid is not None:
            painter.setPen(colour)
            self._laid.paint(painter, at, event.rect())
            return
        painter.translate(at)
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette.setColor(QPalette.Text, colour)
        context.clip = QRectF(0, 0, rect.width(), rect.height())
        self._doc.documentLayout().draw(painter, context)

    def contextMenuEvent(self, event) -> None:
        if not self.textInteractionFlags() & Qt.TextSelectableByMouse:
            return super().contextMenuEvent(event)
        menu = QMenu(self)
        menu.addAction(translate("WrapLabel", "Copy")).triggered.connect(self.copy_text)
        menu.exec(event.globalPos())

    def copy_text(self) -> None:
        """The text as it reads (no markup) to the clipboard."""
        shown = self._laid.text if self._laid is not None else self._doc.toPlainText()
        QGuiApplication.clipboard().setText(shown.replace(markup.LINE_SEPARATOR, "\n"))


class CaptionLabel(QLabel):
    """A caption of at most `lines` lines, whatever its width: the text wraps at words and the last line ends
    in "…" when the rest does not fit; the whole text is its tooltip. Its height is always `lines` lines, so
    a narrow plot's caption never grows into the plot above it (layouts give a wrapped QLabel the height of
    its preferred width, and a squeezed one was drawn over the axis)."""

    def __init__(self, lines: int = 2):
        super().__init__()
        self.lines = lines
        self._text = ""  # QLabel's own text stays empty: its setText asks the layouts above again at each change
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        """The same size whatever the text: a new one is painted, and the layouts are not asked again."""
        if text != self._text:
            self._text = text
            self.setToolTip(text)
            self.update()

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
