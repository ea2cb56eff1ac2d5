"""The Context view's canvas: a chip per token, laid out like text (context_view.py fills it).

Chips of tokens whose bytes only together make a character (a Chinese character split over two tokens)
are drawn joined, as one group showing the character, each token still its own chip (hover, click).
Chips a context shift dropped stay, greyed and struck through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen, QStaticText, QTransform
from PySide6.QtWidgets import QToolTip, QWidget

from gui.theme import Appearance
from gui.widgets.canvas import begin_paint

PAD_X, PAD_Y, GAP, LINE_GAP = 4.0, 2.0, 3.0, 6.0


@dataclass
class Chip:
    label: str
    kind: str  # "prompt", "generated", "special"
    token_id: int
    position: int
    step: int | None  # 1-based step index for generated tokens
    newline: bool
    rect: QRectF = None
    draft: str = ""  # "accepted" (a draft token kept), "verified" (kept by the highlighted pass), "rejected"
    dropped_at: int | None = None  # a context shift after this step dropped it from the model's context
    group: tuple[int, int] | None = None  # chips [start, end) whose bytes together make characters
    group_label: str = ""  # on a group's first chip: those characters

    def looks(self) -> tuple:
        """What the chip's place and drawing depend on, besides the canvas's shown step and highlights."""
        return (self.label, self.kind, self.position, self.step, self.newline, self.draft, self.dropped_at,
                self.group, self.group_label)


class ChipCanvas(QWidget):
    step_clicked = Signal(int)

    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.chips: list[Chip] = []
        self.newest: int | None = None  # chip index
        self.selected_step: int | None = None
        self.muted_after: int | None = None  # generated tokens after this step are greyed (a past step shown)
        self.cursor_rect = QRectF()
        self.tooltips: Mapping[int, str] = {}
        self.placeholder = ""
        self.highlighted: set[int] = set()  # context positions outlined on request (the attention view's)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.StrongFocus)
        # it paints its whole background: a scroll to the newest line moves what is drawn and paints only the line
        # uncovered, instead of every visible chip again
        self.setAttribute(Qt.WA_OpaquePaintEvent)
        self.setAttribute(Qt.WA_StaticContents)
        self._width_cache: dict[str, float] = {}
        # each label laid out once (a run repaints the same chips every frame; drawText lays text out per call)
        self._static_cache: dict[str, QStaticText] = {}
        self._laid_out_width = -1
        self._looks: list[tuple] = []  # each chip's looks() as laid out and drawn
        self._starts: list[tuple[float, float]] = []  # where the layout stood before each chip, and after the last

    def set_chips(self, chips: list[Chip], tooltips: Mapping[int, str], newest: int | None,
                  selected_step: int | None, muted_after: int | None = None) -> None:
        """Show these chips. A run's frames add chips at the end and move the newest outline: the chips before
        the first one that changed keep their places, and only the changed chips and the cursor are repainted
        (laying out and painting every chip again took ~3 ms a frame at a few hundred tokens)."""
        old, old_newest, old_selected = self.chips, self.newest, self.selected_step
        old_cursor = QRectF(self.cursor_rect)
        looks = [chip.looks() for chip in chips]
        same = 0
        if self._laid_out_width == self.width():
            limit = min(len(looks), len(self._looks))
            while same < limit and looks[same] == self._looks[same]:
                same += 1
        if same < len(chips) and chips[same].group is not None:
            same = chips[same].group[0]  # a group is laid out from its first chip
        whole = not old or not chips or muted_after != self.muted_after
        for chip, kept in zip(chips[:same], old):
            chip.rect = kept.rect
        self.chips, self.tooltips, self.newest, self.selected_step = chips, tooltips, newest, selected_step
        self.muted_after = muted_after
        self._looks = looks
        same = self._layout(same)
        if whole:
            self.update()
            return
        changed = old[same:] + chips[same:]
        changed += [chips[i] for i in (old_newest, newest) if i is not None and i < len(chips)]
        if selected_step != old_selected:  # the selected step's chip filled, the one before no more
            changed += [chip for chip in old + chips if chip.step is not None and chip.step in (old_selected,
                                                                                              selected_step)]
        dirty = old_cursor.united(self.cursor_rect)
        for chip in changed:
            dirty = dirty.united(chip.rect)
        margin = 2.0 * self.appearance.scale  # an outline reaches past its chip's rectangle
        self.update(dirty.adjusted(-margin, -margin, margin, margin).toAlignedRect())

    def highlight(self, positions) -> None:
        """Outline the chips at these context positions (e.g. a query and a key picked in Attention)."""
        self.highlighted = set(positions)
        self.update()

    @property
    def dropped(self) -> int:
        """How many chips are greyed as dropped from the context by a context shift."""
        return sum(chip.dropped_at is not None for chip in self.chips)

    def groups(self) -> list[tuple[int, int, str]]:
        """The chip groups drawn as one: (first chip, end chip, their characters)."""
        return [(chip.group[0], chip.group[1], chip.group_label) for i, chip in enumerate(self.chips)
                if chip.group is not None and chip.group[0] == i]

    def is_muted(self, chip: Chip) -> bool:
        return self.muted_after is not None and chip.step is not None and chip.step > self.muted_after

    @property
    def greyed(self) -> int:
        """How many chips are greyed (written after the shown past step)."""
        return sum(self.is_muted(chip) for chip in self.chips)

    def drafts(self, kind: str) -> int:
        """How many chips are drafts of this kind: "verified" (the highlighted pass's accepted ones),
        "rejected" (its ghost chips) or "accepted" (earlier passes')."""
        return sum(chip.draft == kind for chip in self.chips)

    def _metrics(self) -> QFontMetricsF:
        return QFontMetricsF(self.appearance.font(1.05, mono=True))

    def _layout(self, start: int = 0) -> int:
        """Place the chips from `start` on (those before it keep their places); returns where it began."""
        fm = self._metrics()
        height = fm.height() + 2 * PAD_Y
        start = start if start < len(self._starts) else 0
        x, y = self._starts[start] if start else (GAP, GAP)
        del self._starts[start:]
        width = max(200.0, float(self.width()) - GAP)
        for i in range(start, len(self.chips)):
            chip = self.chips[i]
            self._starts.append((x, y))
            if chip.group is not None and chip.group[0] != i:
                continue  # laid out with its group's first chip
            members = self.chips[chip.group[0]:chip.group[1]] if chip.group is not None else [chip]
            w = self._width(fm, chip.group_label if chip.group is not None else chip.label)
            w = max(w, len(members) * self._width(fm, "·"))
            if x + w > width and x > GAP:
                x, y = GAP, y + height + LINE_GAP
            for k, member in enumerate(members):  # a group's chips side by side, joined
                member.rect = QRectF(x + k * w / len(members), y, w / len(members), height)
            x += w + GAP
            if members[-1].newline:
                x, y = GAP, y + height + LINE_GAP
        self._starts.append((x, y))  # after the last chip: where chips added later begin
        cursor_w = fm.horizontalAdvance("▌") + 2 * PAD_X
        if x + cursor_w > width:
            x, y = GAP, y + height + LINE_GAP
        self.cursor_rect = QRectF(x, y, cursor_w, height)
        self._laid_out_width = self.width()
        self.setMinimumHeight(int(y + height + GAP + 1))
        return start

    def _width(self, fm: QFontMetricsF, label: str) -> float:
        w = self._width_cache.get(label)
        if w is None:
            w = self._width_cache[label] = fm.horizontalAdvance(label) + 2 * PAD_X
        return w

    def resizeEvent(self, event):
        if event.size().width() != self._laid_out_width:
            self._layout()
            self.update()
        super().resizeEvent(event)

    def relayout(self) -> None:
        self._width_cache.clear()
        self._static_cache.clear()
        self._layout()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(600, self.minimumHeight())

    def paintEvent(self, event):
        t = self.appearance.theme
        painter = begin_paint(self, self.appearance, self.placeholder, not self.chips)
        if painter is None:
            return
        painter.setFont(self.appearance.font(1.05, mono=True))
        visible = QRectF(event.rect())
        fills = {"prompt": QColor(t.prompt_chip), "generated": QColor(t.generated_chip),
                 "special": QColor(t.special_chip)}
        outline = 2.5 * self.appearance.scale
        for i, chip in enumerate(self.chips):
            if not chip.rect.intersects(visible):
                continue
            self._paint_chip(painter, i, chip, fills, outline)
        for start, end, label in self.groups():
            self._paint_group(painter, start, end, label)
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor(t.muted if self.muted_after is not None else t.accent))
        caret = QRectF(self.cursor_rect.x() + PAD_X, self.cursor_rect.y() + 2, 3 * self.appearance.scale,
                       self.cursor_rect.height() - 4)
        painter.drawRect(caret)

    def _paint_chip(self, painter: QPainter, i: int, chip: Chip, fills: dict, outline: float) -> None:
        t = self.appearance.theme
        fill, text, pen = QColor(fills[chip.kind]), QColor(t.text), Qt.NoPen
        if chip.draft == "rejected":  # a ghost: drafted, read by the pass, not kept
            fill = QColor(t.chosen)
            fill.setAlpha(28)
            text = QColor(t.chosen)
        elif chip.dropped_at is not None or self.is_muted(chip):
            # dropped by a context shift, or not written yet at the shown step: still there, in the background
            fill.setAlpha(70)
            text = QColor(t.muted)
            text.setAlpha(150)
        elif chip.step is not None and chip.step == self.selected_step:
            fill = QColor(t.selected)
            fill.setAlpha(90)
            pen = QPen(QColor(t.selected), outline)
        if i == self.newest and self.muted_after is None:
            pen = QPen(QColor(t.newest), outline)
        if chip.position in self.highlighted:
            fill = QColor(t.accent)
            fill.setAlpha(80)
            pen = QPen(QColor(t.accent), outline, Qt.DashLine)
        painter.setPen(pen)
        painter.setBrush(fill)
        painter.drawRoundedRect(chip.rect, 0 if chip.group else 4, 0 if chip.group else 4)
        painter.setPen(text)
        if chip.group is None:  # a group's characters are drawn across all its chips (_paint_group)
            self._draw_label(painter, chip.rect, chip.label)
        if chip.dropped_at is not None:  # struck through: the model no longer reads it
            r = chip.rect
            painter.drawLine(QPointF(r.left() + 2, r.center().y()), QPointF(r.right() - 2, r.center().y()))
        if chip.draft:
            self._paint_draft(painter, i, chip, outline)

    def _draw_label(self, painter: QPainter, rect: QRectF, label: str) -> None:
        """label centred in rect, in the painter's font (the chips' font, which `relayout` follows)."""
        static = self._static_cache.get(label)
        if static is None:
            if len(self._static_cache) > 20000:  # a long session's distinct tokens: start over
                self._static_cache.clear()
            static = self._static_cache[label] = QStaticText(label)
            static.setTextFormat(Qt.PlainText)
            static.prepare(QTransform(), painter.font())
        size = static.size()
        painter.drawStaticText(QPointF(rect.center().x() - size.width() / 2, rect.center().y() - size.height() / 2),
                               static)

    def _paint_group(self, painter: QPainter, start: int, end: int, label: str) -> None:
        """Tokens whose bytes only together make characters: their characters across the joined chips,
        a dotted line where one token ends and the next begins."""
        t, members = self.appearance.theme, self.chips[start:end]
        union = members[0].rect.united(members[-1].rect)
        faded = all(m.dropped_at is not None or self.is_muted(m) for m in members)
        muted = QColor(t.muted)
        muted.setAlpha(160)
        painter.setPen(QPen(muted, 1.0, Qt.DotLine))
        for m in members[1:]:
            painter.drawLine(QPointF(m.rect.left(), m.rect.top() + 3), QPointF(m.rect.left(), m.rect.bottom() - 3))
        painter.setPen(muted if faded else QColor(t.text))
        painter.drawText(union, Qt.AlignCenter, label)

    def _paint_draft(self, painter: QPainter, i: int, chip: Chip, outline: float) -> None:
        """A kept draft token: a green bar under the chip (and, in the highlighted pass, a green outline when
        the chip has none); a rejected one: a red dashed ghost, struck through."""
        t, scale, r = self.appearance.theme, self.appearance.scale, chip.rect
        if chip.draft == "rejected":
            red = QColor(t.chosen)
            painter.setPen(QPen(red, 1.5 * scale, Qt.DashLine))
            painter.setBrush(Qt.NoBrush)
            painter.drawRoundedRect(r.adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
            red.setAlpha(150)  # struck, but still legible
            painter.setPen(QPen(red, 1.0 * scale))
            painter.drawLine(QPointF(r.left() + PAD_X, r.center().y()), QPointF(r.right() - PAD_X, r.center().y()))
            return
        green = QColor(t.kept)
        if self.is_muted(chip):
            green.setAlpha(110)
        bar = (3.0 if chip.draft == "verified" else 2.0) * scale
        painter.fillRect(QRectF(r.left() + 2, r.bottom() - bar, r.width() - 4, bar), green)
        selected = chip.step is not None and chip.step == self.selected_step
        newest = i == self.newest and self.muted_after is None
        if chip.draft == "verified" and not selected and not newest:
            painter.setPen(QPen(green, 0.7 * outline))
            painter.setBrush(Qt.NoBrush)
            painter.drawRoundedRect(r, 4, 4)

    def chip_at(self, point: QPoint) -> int | None:
        for i, chip in enumerate(self.chips):
            if chip.rect is not None and chip.rect.contains(point.toPointF()):
                return i
        return None

    def mouseMoveEvent(self, event):
        i = self.chip_at(event.position().toPoint())
        if i is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), self.tooltips.get(i, ""), self)

    def mousePressEvent(self, event):
        i = self.chip_at(event.position().toPoint())
        if i is not None and self.chips[i].step is not None:
            self.step_clicked.emit(self.chips[i].step)
