"""Context: the prompt and the generated text as token chips, and the cursor where the next one goes.

Prompt chips and generated chips have different colours, special tokens a third; the newest token is
outlined, the selected step filled. Spaces are shown as '·' and line breaks as '↵' so that a reader sees
that " Paris" is one token with its space. Hover shows a token's id, logit, probability and rank; a click
on a generated token selects its step. With a past step selected, the tokens written after it are greyed:
the context as the model saw it then (a candidate clicked now forks there).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QLabel, QScrollArea, QToolTip, QVBoxLayout, QWidget

from ..controller import Controller
from ..theme import Appearance
from .base import View, begin_paint
from .format import display

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
        self.tooltips: dict[int, str] = {}
        self.placeholder = ""
        self.highlighted: set[int] = set()  # context positions outlined on request (the attention view's)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self._width_cache: dict[str, float] = {}
        self._laid_out_width = -1

    def set_chips(self, chips: list[Chip], tooltips: dict[int, str], newest: int | None,
                  selected_step: int | None, muted_after: int | None = None) -> None:
        self.chips, self.tooltips, self.newest, self.selected_step = chips, tooltips, newest, selected_step
        self.muted_after = muted_after
        self._layout()
        self.update()

    def highlight(self, positions) -> None:
        """Outline the chips at these context positions (e.g. a query and a key picked in Attention)."""
        self.highlighted = set(positions)
        self.update()

    def is_muted(self, chip: Chip) -> bool:
        return self.muted_after is not None and chip.step is not None and chip.step > self.muted_after

    @property
    def greyed(self) -> int:
        """How many chips are greyed (written after the shown past step)."""
        return sum(self.is_muted(chip) for chip in self.chips)

    def _metrics(self) -> QFontMetricsF:
        return QFontMetricsF(self.appearance.font(1.05, mono=True))

    def _layout(self) -> None:
        fm = self._metrics()
        height = fm.height() + 2 * PAD_Y
        x, y = GAP, GAP
        width = max(200.0, float(self.width()) - GAP)
        for chip in self.chips:
            w = self._width_cache.get(chip.label)
            if w is None:
                w = self._width_cache[chip.label] = fm.horizontalAdvance(chip.label) + 2 * PAD_X
            if x + w > width and x > GAP:
                x, y = GAP, y + height + LINE_GAP
            chip.rect = QRectF(x, y, w, height)
            x += w + GAP
            if chip.newline:
                x, y = GAP, y + height + LINE_GAP
        cursor_w = fm.horizontalAdvance("▌") + 2 * PAD_X
        if x + cursor_w > width:
            x, y = GAP, y + height + LINE_GAP
        self.cursor_rect = QRectF(x, y, cursor_w, height)
        self._laid_out_width = self.width()
        self.setMinimumHeight(int(y + height + GAP + 1))

    def resizeEvent(self, event):
        if event.size().width() != self._laid_out_width:
            self._layout()
        super().resizeEvent(event)

    def relayout(self) -> None:
        self._width_cache.clear()
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
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor(t.muted if self.muted_after is not None else t.accent))
        caret = QRectF(self.cursor_rect.x() + PAD_X, self.cursor_rect.y() + 2, 3 * self.appearance.scale,
                       self.cursor_rect.height() - 4)
        painter.drawRect(caret)

    def _paint_chip(self, painter: QPainter, i: int, chip: Chip, fills: dict, outline: float) -> None:
        t = self.appearance.theme
        fill, text, pen = QColor(fills[chip.kind]), QColor(t.text), Qt.NoPen
        if self.is_muted(chip):  # not written yet at the shown step: still there, but in the background
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
        painter.drawRoundedRect(chip.rect, 4, 4)
        painter.setPen(text)
        painter.drawText(chip.rect, Qt.AlignCenter, chip.label)

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


class ContextView(View):
    def __init__(self, controller: Controller, appearance: Appearance):
        super().__init__(controller, appearance)
        self.summary = QLabel()
        self.summary.setObjectName("muted")
        self.summary.setWordWrap(True)
        self.canvas = ChipCanvas(appearance)
        self.canvas.placeholder = ("The prompt appears here as tokens after Prefill (Ctrl+P). "
                                   "Each Step (Space) appends one token where the cursor is.")
        self.canvas.step_clicked.connect(controller.select)
        self.setFocusProxy(self.canvas)  # focused, the view takes the keys (Space steps) instead of the prompt
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.canvas)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self.summary)
        layout.addWidget(self.scroll, 1)
        self._shown_count = -1

    def restyle(self) -> None:
        self.canvas.relayout()

    def refresh(self) -> None:
        c = self.controller
        prefill = c.prefill_event
        if prefill is None:
            if self._shown_count != 0:
                self.canvas.set_chips([], {}, None, None)
                self.summary.setText("No prompt read yet.")
                self._shown_count = 0
            return
        chips, tips = self._chips(prefill)
        shown = c.shown()
        selected = shown.index if shown is not None and not shown.pending else None
        past = self.past_step()
        newest = len(chips) - 1 if c.steps else None
        follow = self.scroll.verticalScrollBar().value() >= self.scroll.verticalScrollBar().maximum() - 4
        self.canvas.set_chips(chips, tips, newest, selected, past.index if past is not None else None)
        if follow and len(chips) != self._shown_count:  # keep the cursor in sight once the layout settles
            QTimer.singleShot(0, lambda: self.scroll.verticalScrollBar().setValue(
                self.scroll.verticalScrollBar().maximum()))
        self._shown_count = len(chips)
        n_prompt, n_gen = len(prefill.tokens), len(c.steps)
        window = c.info.context_length if c.info else 0
        if past is not None:
            later = n_gen - past.index
            self.summary.setText(
                f"Showing step {past.index}: the model had read {n_prompt} prompt + {past.index - 1} generated "
                f"tokens and chose the outlined one; the {later} token{'s' if later != 1 else ''} written after "
                f"it {'are' if later != 1 else 'is'} greyed. A candidate clicked now forks here.")
            return
        self.summary.setText(
            f"{n_prompt} prompt tokens (read in one prefill pass) + {n_gen} generated = "
            f"{n_prompt + n_gen} of {window:,} positions in the context window · the cursor ▌ marks where "
            f"token {n_gen + 1} will go")

    def _chips(self, prefill) -> tuple[list[Chip], dict[int, str]]:
        """A chip per prompt token and per generated token of the current branch, with their tooltips."""
        chips: list[Chip] = []
        tips: dict[int, str] = {}
        for pos, token in enumerate(prefill.tokens):
            kind = "special" if token.special else "prompt"
            chips.append(Chip(display(token.piece), kind, token.id, pos, None, token.text.endswith("\n")))
            tips[len(chips) - 1] = f"prompt token · position {pos}\nid {token.id}  {token.piece!r}"
        for step in self.controller.steps:
            token = step.token
            kind = "special" if token.special else "generated"
            chips.append(Chip(display(token.piece), kind, token.id, step.position, step.index,
                              token.text.endswith("\n")))
            cands = step.dist.candidates
            at = list(cands.ids).index(token.id)
            how = ("forced (you chose it)" if step.forced
                   else "greedy" if step.random_u is None else f"u = {step.random_u:.4f}")
            tips[len(chips) - 1] = (
                f"step {step.index} · position {step.position}\nid {token.id}  {token.piece!r}\n"
                f"logit {cands.logits[at]:.3f}   p {cands.p_raw[at]:.4f}   p final {cands.p_final[at]:.4f}\n"
                f"rank {step.chosen_rank}   {how}\nclick: show this step (then a candidate click forks here)")
        return chips, tips
