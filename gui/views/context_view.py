"""Context: the prompt and the generated text as token chips, and the cursor where the next one goes.

Prompt chips and generated chips have different colours, special tokens a third; the newest token is
outlined, the selected step filled. Spaces are shown as '·' and line breaks as '↵' so that a reader sees
that " Paris" is one token with its space. Hover shows a token's id, logit, probability and rank; a click
on a generated token selects its step. With a past step selected, the tokens written after it are greyed:
the context as the model saw it then (a candidate clicked now forks there).

With speculative decoding on, the newest verify pass (or the shown step's) is drawn over the text: its
accepted draft tokens are real chips underlined and outlined green, its rejected ones red dashed ghost chips
after the last accepted one (where the correction was drawn). Earlier passes' accepted tokens keep a thin
green underline.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QLabel, QScrollArea, QToolTip, QVBoxLayout, QWidget

from ..controller import Controller
from ..speculation import Pass, newest_pass
from ..theme import Appearance
from .base import View, begin_paint
from .format import display

PAD_X, PAD_Y, GAP, LINE_GAP = 4.0, 2.0, 3.0, 6.0
KEPT = "\ndrafted by prompt lookup ✓ kept: the draw picked the draft token"


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
        if chip.draft == "rejected":  # a ghost: drafted, read by the pass, not kept
            fill = QColor(t.chosen)
            fill.setAlpha(28)
            text = QColor(t.chosen)
        elif self.is_muted(chip):  # not written yet at the shown step: still there, but in the background
            fill.setAlpha(70)
            text = QColor(t.muted)
            text.setAlpha(150)
        elif chip.step is not None and chip.step == self.selected_step:
            fill = QColor(t.selected)
            fill.setAlpha(90)
            pen = QPen(QColor(t.selected), outline)
        if i == self.newest and self.muted_after is None:
            pen = QPen(QColor(t.newest), outline)
        painter.setPen(pen)
        painter.setBrush(fill)
        painter.drawRoundedRect(chip.rect, 4, 4)
        painter.setPen(text)
        painter.drawText(chip.rect, Qt.AlignCenter, chip.label)
        if chip.draft:
            self._paint_draft(painter, i, chip, outline)

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
        # Opaque: a tab bar the main window's dock layout left behind (Stop | Compare) showed through the
        # summary once a verify pass made it three lines tall.
        self.setAutoFillBackground(True)
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
        past = self.past_step()
        self.verify_pass = newest_pass(c.history, past.index if past is not None else None)
        chips, tips = self._chips(prefill, self.verify_pass)
        shown = c.shown()
        selected = shown.index if shown is not None and not shown.pending else None
        newest = max((i for i, chip in enumerate(chips) if chip.step is not None), default=None)
        follow = self.scroll.verticalScrollBar().value() >= self.scroll.verticalScrollBar().maximum() - 4
        self.canvas.set_chips(chips, tips, newest, selected, past.index if past is not None else None)
        if follow and len(chips) != self._shown_count:  # keep the cursor in sight once the layout settles
            QTimer.singleShot(0, lambda: self.scroll.verticalScrollBar().setValue(
                self.scroll.verticalScrollBar().maximum()))
        self._shown_count = len(chips)
        n_prompt, n_gen = len(prefill.tokens), len(c.steps)
        window = c.info.context_length if c.info else 0
        verify = self._verify_text(self.verify_pass, chips)
        if past is not None:
            later = n_gen - past.index
            self.summary.setText(
                f"Showing step {past.index}: the model had read {n_prompt} prompt + {past.index - 1} generated "
                f"tokens and chose the outlined one; the {later} token{'s' if later != 1 else ''} written after "
                f"it {'are' if later != 1 else 'is'} greyed. A candidate clicked now forks here." + verify)
            return
        self.summary.setText(
            f"{n_prompt} prompt tokens (read in one prefill pass) + {n_gen} generated = "
            f"{n_prompt + n_gen} of {window:,} positions in the context window · the cursor ▌ marks where "
            f"token {n_gen + 1} will go" + verify)

    def _verify_text(self, verify: Pass | None, chips: list[Chip]) -> str:
        """The highlighted verify pass in words (the summary's second line)."""
        if verify is None:
            return ""
        v = verify.verified
        start = next((i for i, chip in enumerate(chips) if chip.step == v.index or chip.draft == "rejected"), 0)
        gram = "".join(chip.label for chip in chips[max(0, start - len(v.ngram)):start])
        after = {"correction": "then drew its own token where the draft was rejected",
                 "bonus": "then drew one more token from the pass's last position"}
        last = verify.role(verify.steps[-1]) if len(verify.steps) == v.emitted else "accepted"
        return (f"\nVerify pass at step {v.index}: “{gram}” was found earlier in the context, so the "
                f"{len(v.drafted)} tokens that followed it were drafted; ONE forward pass read {v.positions} "
                f"positions and the draws kept "
                + (f"{v.accepted} (green) and rejected {verify.rejected} (red, dashed)" if verify.rejected
                   else f"all {v.accepted} (green)")
                + (f"; {after[last]}" if last in after else "") + ".")

    def _chips(self, prefill, verify: Pass | None) -> tuple[list[Chip], dict[int, str]]:
        """A chip per prompt token and per generated token of the current branch, with their tooltips, and
        the rejected drafts of the highlighted verify pass as ghost chips after its last accepted token."""
        chips: list[Chip] = []
        tips: dict[int, str] = {}
        # after this step (0: the prompt) come the ghosts; none when a rewind cut the pass short of them
        ghosts_after = -1
        if verify is not None and len(verify.steps) >= verify.accepted:
            ghosts_after = verify.index + verify.accepted - 1
        for pos, token in enumerate(prefill.tokens):
            kind = "special" if token.special else "prompt"
            chips.append(Chip(display(token.piece), kind, token.id, pos, None, token.text.endswith("\n")))
            tips[len(chips) - 1] = f"prompt token · position {pos}\nid {token.id}  {token.piece!r}"
        if ghosts_after == 0:
            self._ghosts(verify, chips, tips)
        for step in self.controller.steps:
            token = step.token
            kind = "special" if token.special else "generated"
            draft, note = "", self._verify_note(step)
            if note.startswith(KEPT):
                draft = "verified" if verify is not None and step.verified_by == verify.index else "accepted"
            chips.append(Chip(display(token.piece), kind, token.id, step.position, step.index,
                              token.text.endswith("\n"), draft=draft))
            cands = step.dist.candidates
            at = list(cands.ids).index(token.id)
            how = ("forced (you chose it)" if step.forced
                   else "greedy" if step.random_u is None else f"u = {step.random_u:.4f}")
            tips[len(chips) - 1] = (
                f"step {step.index} · position {step.position}\nid {token.id}  {token.piece!r}\n"
                f"logit {cands.logits[at]:.3f}   p {cands.p_raw[at]:.4f}   p final {cands.p_final[at]:.4f}\n"
                f"rank {step.chosen_rank}   {how}\nclick: show this step (then a candidate click forks here)"
                + note)
            if step.index == ghosts_after:
                self._ghosts(verify, chips, tips)
        return chips, tips

    def _verify_note(self, step) -> str:
        """What the verify pass that decided `step` made of it (its tooltip's last line; "" for a step of its
        own). A kept draft token's note starts with KEPT."""
        verified = self.controller.history.verifies.get(step.verified_by) if step.verified_by else None
        if verified is None:
            return ""
        k = step.index - verified.index
        if k < verified.accepted:  # (ids differ only for a pass of another branch at the same step)
            kept = verified.drafted[k].id == step.token.id
            return KEPT + f" in the verify pass at step {verified.index}" if kept else ""
        if k < len(verified.drafted):
            return (f"\nthe correction in the verify pass at step {verified.index}: the draw rejected the draft "
                    f"{verified.drafted[k].piece!r}")
        return f"\nthe bonus token of the verify pass at step {verified.index}: the whole draft was kept"

    @staticmethod
    def _ghosts(verify: Pass, chips: list[Chip], tips: dict[int, str]) -> None:
        v = verify.verified
        for j, token in enumerate(v.drafted[v.accepted:]):
            index = v.index + v.accepted + j
            chips.append(Chip(display(token.piece), "generated", token.id, chips[-1].position + 1, None,
                              False, draft="rejected"))
            tips[len(chips) - 1] = (
                f"drafted for step {index} by prompt lookup · id {token.id}  {token.piece!r}\n✗ rejected: "
                + ("the draw at this step took another token (the correction), so the pass kept nothing after it"
                   if j == 0 else "it came after a rejected draft token, so the pass could not keep it"))
