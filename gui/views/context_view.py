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

A context limit (Controls) with drop-oldest: the tokens a context shift dropped stay, greyed and struck
through ("dropped from the context at step N"). Tokens whose bytes only together make a character (Chinese
often splits one over two tokens) are drawn as one joined group showing the character; each token's tooltip
says which bytes of it it carries. "Transcript" shows the same context as plain text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QHBoxLayout, QScrollArea, QStackedWidget, QToolButton, QVBoxLayout

from gui.state.intents import Intents
from gui.state.speculation import Pass, newest_pass
from gui.theme import Appearance
from gui.views.base import View
from gui.widgets.chip_canvas import Chip, ChipCanvas
from gui.state.format import byte_label, display, quoted, rank_text, split_characters
from gui.state import i18n
from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.widgets.transcript import Transcript
from gui.widgets.wrap_label import WrapLabel

KEPT = QT_TRANSLATE_NOOP("Context", "drafted by prompt lookup ✓ kept: the draw picked the draft token")


def kept_note() -> str:
    """The first line of a kept draft token's note (what _verify_note's notes are told apart by)."""
    return "\n" + translate("Context", KEPT)


class Tips(Mapping):
    """The chips' tooltips, each made only when it is read (a hover): a run redraws the context with every
    frame, and formatting a tooltip for each of hundreds of tokens took a large share of the view's redraw.
    Each tooltip is a list of parts: text, or a function that makes it."""

    def __init__(self):
        self._parts: dict[int, list[str | Callable[[], str]]] = {}

    def set(self, index: int, part: str | Callable[[], str]) -> None:
        self._parts[index] = [part]

    def prepend(self, index: int, text: str) -> None:
        self._parts.setdefault(index, []).insert(0, text)

    def __getitem__(self, index: int) -> str:
        return "".join(part if isinstance(part, str) else part() for part in self._parts[index])

    def __iter__(self) -> Iterator[int]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)


class ContextView(View):
    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.summary = WrapLabel()
        self.summary.setObjectName("muted")
        self.canvas = ChipCanvas(appearance)
        self.canvas.step_clicked.connect(intents.select)
        self.setFocusProxy(self.canvas)  # focused, the view takes the keys (Space steps) instead of the prompt
        # Opaque: a tab bar the main window's dock layout left behind (Stop | Compare) showed through the
        # summary once a verify pass made it three lines tall.
        self.setAutoFillBackground(True)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        # the scroll bar's room kept: one that appears once the text outgrows the view would narrow it, and every
        # chip would wrap again and move in the middle of a run
        self.scroll.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOn)
        self.scroll.setWidget(self.canvas)
        # the shown token kept in sight when the view's size or type changes (presentation mode, a resize)
        self.scroll.viewport().installEventFilter(self)
        self.transcript = Transcript(appearance)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.scroll)
        self.pages.addWidget(self.transcript)
        self.plain = QToolButton()
        self.plain.setCheckable(True)
        self.retranslate()
        self.plain.toggled.connect(self._show_plain)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.plain)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.pages, 1)  # the chips take all the height the dock gives
        self._shown_count = -1
        self._prompt_memo: tuple | None = None  # (prefill, language, its chips' fields and tooltips)
        self._step_memo: dict[int, tuple] = {}  # id(step) -> (step, its chip's label, kind, newline)
        self._shown_past: int | None = None
        self._summary_height = 0  # the summary's wrapped height that minimumSizeHint last counted
        self.restyle()

    def _line(self) -> float:
        return QFontMetricsF(self.appearance.font(1.05, mono=True)).height() + 10

    def restyle(self) -> None:
        self.canvas.relayout()
        self.transcript.restyle()
        self.pages.setMinimumHeight(int(2 * self._line()) + 4)  # at least two lines of chips
        QTimer.singleShot(0, self.keep_in_view)  # bigger type moved the chips

    def sizeHint(self) -> QSize:
        return QSize(640, int(10 * self._line()))

    def minimumSizeHint(self) -> QSize:
        """At least the summary's wrapped lines at its width: the dock honours a minimum size, not a height
        for a width, and a summary given one line was cut in half (presentation mode's two lines)."""
        hint = super().minimumSizeHint()
        self._summary_height = self._wrapped_summary()
        extra = self._summary_height - self.summary.minimumSizeHint().height()
        return QSize(hint.width(), hint.height() + max(extra, 0))

    def _wrapped_summary(self) -> int:
        width = self.summary.width()
        if width < 60:  # not laid out yet: the view's width less the Transcript button's
            width = max(self.width() - self.plain.sizeHint().width() - 24, 200)
        return self.summary.heightForWidth(width)

    def _summary_changed(self) -> None:
        if self._wrapped_summary() != self._summary_height:
            self.updateGeometry()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._summary_changed()

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Resize:
            QTimer.singleShot(0, self.keep_in_view)
        return False

    def keep_in_view(self) -> None:
        """Scroll the shown token into sight, whole: the selected past step's chip, else the newest token and
        the cursor after it."""
        c = self.canvas
        past = self.past_step() if self.intents.prefill_event is not None else None
        rect = next((chip.rect for chip in c.chips if past is not None and chip.step == past.index), None)
        if rect is None:
            rect = QRectF(c.cursor_rect)
            if c.newest is not None and c.newest < len(c.chips):
                rect = rect.united(c.chips[c.newest].rect)
        if rect.isEmpty():
            return
        self.scroll.ensureVisible(int(rect.center().x()), int(rect.center().y()), 0, int(rect.height() / 2) + 6)

    def _show_plain(self, on: bool) -> None:
        self.pages.setCurrentIndex(1 if on else 0)
        self.refresh()

    def retranslate(self) -> None:
        self.canvas.placeholder = translate("Context", "The prompt appears here as tokens after Prefill (Ctrl+P). Each "
                                            "Step (Space) appends one token where the cursor is.")
        self.canvas.update()
        self.plain.setText(translate("Context", "Transcript"))
        self.plain.setToolTip(translate("Context", "Show the context as plain text (the chat template's special tokens "
                                        "dimmed) instead of token chips"))
        self._shown_count = -1  # the summary is worded again at the next refresh

    def refresh(self) -> None:
        self._refresh()
        self._summary_changed()  # a summary that wraps to more (or fewer) lines asks for its room

    def _refresh(self) -> None:
        c = self.intents
        prefill = c.prefill_event
        if prefill is None:
            if self._shown_count != 0:
                self.canvas.set_chips([], Tips(), None, None)
                self.summary.setText(translate("Context", "No prompt read yet."))
                self._shown_count = 0
            return
        past = self.past_step()
        if self.plain.isChecked():
            upto = past.index - 1 if past is not None else None
            self.transcript.show_tokens(list(prefill.tokens) + [s.token for s in c.steps[:upto]])
        self.verify_pass = newest_pass(c.history, past.index if past is not None else None)
        chips, tips = self._chips(prefill, self.verify_pass)
        shown = c.shown()
        selected = shown.index if shown is not None and not shown.pending else None
        newest = max((i for i, chip in enumerate(chips) if chip.step is not None), default=None)
        follow = self.scroll.verticalScrollBar().value() >= self.scroll.verticalScrollBar().maximum() - 4
        self.canvas.set_chips(chips, tips, newest, selected, past.index if past is not None else None)
        past_index = past.index if past is not None else None
        # once the layout settles: the cursor while the view follows the end, a past step whenever it changes
        if (follow and len(chips) != self._shown_count) or past_index != self._shown_past:
            QTimer.singleShot(0, self.keep_in_view)
        self._shown_count, self._shown_past = len(chips), past_index
        n_prompt, n_gen = len(prefill.tokens), len(c.steps)
        window = c.info.context_length if c.info else 0
        verify = self._limit_text(past) + self._verify_text(self.verify_pass, chips)
        if c.showing_request is not None:
            self.summary.setText(served_summary(c.serving, c.showing_request, n_prompt, n_gen, past))
            return
        if past is not None:
            later = n_gen - past.index
            self.summary.setText(translate(
                "Context", "Showing step {index}: the model had read {prompt} prompt + {generated} generated tokens and "
                "chose the outlined one; the %n token(s) written after it are greyed. A candidate clicked now forks "
                "here.", None, later).format(index=past.index, prompt=n_prompt, generated=past.index - 1) + verify)
            return
        limit = c.settings.context_limit
        where = translate("Context", "the context window")
        if limit and limit < window:
            window, where = limit, translate("Context", "the context limit (the model's: {window})").format(
                window=f"{window:,}")
        dropped = sum(s.dropped for s in self._shifts())
        if dropped:  # the shift line says the rest
            self.summary.setText(translate(
                "Context", "{prompt} prompt + {generated} generated tokens; the model reads {read} of {window} positions "
                "in {where} · ▌ marks where token {next} goes").format(
                prompt=n_prompt, generated=n_gen, read=n_prompt + n_gen - dropped, window=f"{window:,}", where=where,
                next=n_gen + 1) + verify)
            return
        self.summary.setText(translate(
            "Context", "{prompt} prompt tokens (read in one prefill pass) + {generated} generated = {total} of {window} "
            "positions in {where} · the cursor ▌ marks where token {next} will go").format(
            prompt=n_prompt, generated=n_gen, total=n_prompt + n_gen, window=f"{window:,}", where=where,
            next=n_gen + 1) + verify)

    def _verify_text(self, verify: Pass | None, chips: list[Chip]) -> str:
        """The highlighted verify pass in words (the summary's second line)."""
        if verify is None:
            return ""
        v = verify.verified
        start = next((i for i, chip in enumerate(chips) if chip.step == v.index or chip.draft == "rejected"), 0)
        gram = "".join(chip.label for chip in chips[max(0, start - len(v.ngram)):start])
        after = {"correction": translate("Context", "then drew its own token where the draft was rejected"),
                 "bonus": translate("Context", "then drew one more token from the pass's last position")}
        last = verify.role(verify.steps[-1]) if len(verify.steps) == v.emitted else "accepted"
        drafted = len(v.drafted)
        kept = (translate("Context", "{accepted} (green) and rejected {rejected} (red, dashed)").format(
            accepted=v.accepted, rejected=verify.rejected) if verify.rejected else
            translate("Context", "all {accepted} (green)").format(accepted=v.accepted))
        return "\n" + translate(
            "Context", "Verify pass at step {index}: “{gram}” was found earlier in the context, so the %n token(s) that "
            "followed it were drafted; ONE forward pass read {positions} positions and the draws kept {kept}{after}.",
            None, drafted).format(index=v.index, gram=gram, positions=v.positions, kept=kept,
                                  after=f"; {after[last]}" if last in after else "")

    def _chips(self, prefill, verify: Pass | None) -> tuple[list[Chip], Tips]:
        """A chip per prompt token and per generated token of the current branch, with their tooltips, and
        the rejected drafts of the highlighted verify pass as ghost chips after its last accepted token."""
        chips: list[Chip] = []
        tips = Tips()
        # after this step (0: the prompt) come the ghosts; none when a rewind cut the pass short of them
        ghosts_after = -1
        if verify is not None and len(verify.steps) >= verify.accepted:
            ghosts_after = verify.index + verify.accepted - 1
        for label, kind, token_id, pos, newline, tip in self._prompt_chips(prefill):
            chips.append(Chip(label, kind, token_id, pos, None, newline))
            tips.set(len(chips) - 1, tip)
        if ghosts_after == 0:
            self._ghosts(verify, chips, tips)
        for step in self.intents.steps:
            label, kind, newline = self._step_chip(step)
            draft, note = "", self._verify_note(step) if step.verified_by else ""
            if note and note.startswith(kept_note()):
                draft = "verified" if verify is not None and step.verified_by == verify.index else "accepted"
            chips.append(Chip(label, kind, step.token.id, step.position, step.index, newline, draft=draft))
            tips.set(len(chips) - 1, lambda step=step, note=note: step_tip(step, note))
            if step.index == ghosts_after:
                self._ghosts(verify, chips, tips)
        self._mark_dropped(chips, tips)
        self._group_split_characters(chips, tips, list(prefill.tokens) + [s.token for s in self.intents.steps])
        return chips, tips

    # A Run's frames build the chips of the same prompt and of the same steps again, plus one: what a chip shows of
    # its token is kept per prompt (and language: the tooltips are worded) and per step (one of its fields each).
    def _prompt_chips(self, prefill) -> list[tuple]:
        language = i18n.language()
        if self._prompt_memo is None or self._prompt_memo[0] is not prefill or self._prompt_memo[1] != language:
            rows = [(display(token.piece), "special" if token.special else "prompt", token.id, pos,
                     token.text.endswith("\n"),
                     translate("Context", "prompt token · position {position}").format(position=pos)
                     + f"\nid {token.id}  {quoted(token.piece)}") for pos, token in enumerate(prefill.tokens)]
            self._prompt_memo = (prefill, language, rows)
        return self._prompt_memo[2]

    def _step_chip(self, step) -> tuple[str, str, bool]:
        """A step's chip label, kind and whether a line ends after it."""
        kept = self._step_memo.get(id(step))
        if kept is None or kept[0] is not step:
            if len(self._step_memo) > 50_000:
                self._step_memo.clear()
            token = step.token
            kept = self._step_memo[id(step)] = (step, display(token.piece), "special" if token.special else "generated",
                                                token.text.endswith("\n"))
        return kept[1:]

    def _shifts(self, past=None) -> list:
        """The context shifts on the current path, as far as the shown step (a past one saw fewer)."""
        return [s.shift for s in self.intents.steps
                if s.shift is not None and (past is None or s.index < past.index)]

    def _mark_dropped(self, chips: list[Chip], tips: Tips) -> None:
        """Grey the tokens a context shift dropped (before the shown step): they stay, struck through."""
        past = self.past_step()
        real = [i for i, chip in enumerate(chips) if chip.draft != "rejected"]  # a ghost is in no context
        for shift in self._shifts(past):
            for at in range(shift.first_dropped, min(shift.first_dropped + shift.dropped, len(real))):
                i = real[at]
                chips[i].dropped_at = shift.step
                dropped = shift.dropped
                tips.prepend(i, translate(
                    "Context", "dropped from the context at step {step}: the window of {window} was full (drop-oldest), "
                    "so the oldest %n token(s) after the first left it and the {kept} after them were re-read in one "
                    "pass", None, dropped).format(step=shift.step, window=shift.window, kept=shift.kept - 1) + "\n")

    @staticmethod
    def _group_split_characters(chips: list[Chip], tips: Tips, tokens) -> None:
        """Join the chips of tokens whose bytes only together make a character, and say in each token's
        tooltip which bytes of which character it carries."""
        real = [i for i, chip in enumerate(chips) if chip.draft != "rejected"]
        if len(real) != len(tokens):
            return
        raws = [t.raw if t.raw else t.text.encode("utf-8") for t in tokens]
        parts, runs = split_characters(raws)
        for k, token_parts in enumerate(parts):
            if token_parts:
                tips.prepend(real[k], " · ".join(p.describe() for p in token_parts) + "\n")
        for start, end in runs:
            if real[end - 1] - real[start] != end - 1 - start:
                continue  # a ghost chip in between: leave them apart
            label = display(byte_label(b"".join(raws[start:end]).decode("utf-8", errors="backslashreplace")))
            for k in range(start, end):
                chips[real[k]].group = (real[start], real[end - 1] + 1)
            chips[real[start]].group_label = label

    def _limit_text(self, past) -> str:
        """The context limit's shifts in words (a summary line), "" without one."""
        shifts = self._shifts(past)
        if not shifts:
            return ""
        dropped = sum(s.dropped for s in shifts)
        n = len(shifts)
        return "\n" + translate("Context", "%n context shift(s) (drop-oldest) dropped the {dropped} oldest tokens after "
                                 "the first (struck through) and re-read the rest in one pass each.", None, n).format(
            dropped=dropped)

    def _verify_note(self, step) -> str:
        """What the verify pass that decided `step` made of it (its tooltip's last line; "" for a step of its
        own). A kept draft token's note starts with KEPT."""
        verified = self.intents.history.verifies.get(step.verified_by) if step.verified_by else None
        if verified is None:
            return ""
        k = step.index - verified.index
        if k < verified.accepted:  # (ids differ only for a pass of another branch at the same step)
            kept = verified.drafted[k].id == step.token.id
            return kept_note() + translate("Context", " in the verify pass at step {index}").format(
                index=verified.index) if kept else ""
        if k < len(verified.drafted):
            return "\n" + translate("Context", "the correction in the verify pass at step {index}: the draw rejected the "
                                     "draft {token}").format(index=verified.index, token=quoted(verified.drafted[k].piece))
        return "\n" + translate("Context", "the bonus token of the verify pass at step {index}: the whole draft was "
                                 "kept").format(index=verified.index)

    @staticmethod
    def _ghosts(verify: Pass, chips: list[Chip], tips: Tips) -> None:
        v = verify.verified
        for j, token in enumerate(v.drafted[v.accepted:]):
            index = v.index + v.accepted + j
            chips.append(Chip(display(token.piece), "generated", token.id, chips[-1].position + 1, None,
                              False, draft="rejected"))
            tips.set(len(chips) - 1, (
                translate("Context", "drafted for step {index} by prompt lookup").format(index=index)
                + f" · id {token.id}  {quoted(token.piece)}\n✗ " + translate("Context", "rejected: ")
                + (translate("Context", "the draw at this step took another token (the correction), so the pass kept "
                             "nothing after it") if j == 0 else
                   translate("Context", "it came after a rejected draft token, so the pass could not keep it"))))



def step_tip(step, note: str) -> str:
    """A generated token's tooltip: its step, id, logit, probabilities, rank and how it was drawn."""
    token, cands = step.token, step.dist.candidates
    at = list(cands.ids).index(token.id)
    how = (translate("Context", "forced (you chose it)") if step.forced
           else translate("Context", "greedy") if step.random_u is None else f"u = {step.random_u:.4f}")
    return (translate("Context", "step {index} · position {position}").format(index=step.index, position=step.position)
            + f"\nid {token.id}  {quoted(token.piece)}\n"
            + translate("Context", "logit {logit}   p {p}   p final {p_final}").format(
                logit=f"{cands.logits[at]:.3f}", p=f"{cands.p_raw[at]:.4f}", p_final=f"{cands.p_final[at]:.4f}") + "\n"
            + translate("Context", "rank {rank}   {how}").format(rank=rank_text(step.chosen_rank), how=how) + "\n"
            + translate("Context", "click: show this step (then a candidate click forks here)") + note)


def served_summary(serving, request: int, n_prompt: int, n_gen: int, past) -> str:
    """The summary line for a served request's own steps (many requests at once): how its prompt was read, and
    that its steps cannot be forked here (the engine's session never read its prompt)."""
    track = serving.track(request)
    chunks = sum(1 for phase in track.phases if phase == "prefill") if track is not None else 0
    shared = track.done.shared_tokens if track is not None and track.done is not None else None
    how = translate("Context", "read in %n chunk(s) of batched passes", None, chunks) + (
        translate("Context", ", {shared} of them taken from shared blocks").format(shared=shared) if shared else "")
    at = translate("Context", "; showing step {index}, the later tokens greyed").format(index=past.index) \
        if past is not None else ""
    return translate("Context", "Request {request} of {n} served together: {prompt} prompt tokens ({how}) + "
                     "{generated} generated{at}. Its own steps, as it would have drawn them alone; Prefill starts a "
                     "generation of your own.").format(request=request, n=len(serving.tracks), prompt=n_prompt,
                                                       how=how, generated=n_gen, at=at)
