"""Stop: the rules that end a generation and how close each one is.

End-of-sequence token (its probability at every step), the length limit, stop strings (how much of each
is already matched at the end of the text), the context window (prompt / generated / free), and the
user's Stop. Before a prompt it says how to start, and while one is read, that it is being read (nothing of
the previous run stays). When generation has ended, the rule that fired is named and highlighted. With a past step
shown, every rule reads as it stood at that step (its stop-string matches, k tokens generated, its limit).
"""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.state.intents import Intents
from gui.theme import Appearance
from gui.views.base import View
from gui.state.format import display
from gui.widgets.bar_chart import BarChart, Series, series
from gui.widgets.plotting import step_top

REASONS = {  # the engine's stop.reason codes, worded here (the trace keeps the codes)
    "eos": QT_TRANSLATE_NOOP("Stop", "the model wrote its end-of-sequence token"),
    "max_new_tokens": QT_TRANSLATE_NOOP("Stop", "the length limit (max new tokens) was reached"),
    "stop_string": QT_TRANSLATE_NOOP("Stop", "a stop string appeared in the text"),
    "context_full": QT_TRANSLATE_NOOP("Stop", "the context window is full"),
    "aborted": QT_TRANSLATE_NOOP("Stop", "stopped by the user"),
}
RULES = {"eos": QT_TRANSLATE_NOOP("Stop", "End of sequence"), "max_new_tokens": QT_TRANSLATE_NOOP("Stop", "Length limit"),
         "stop_string": QT_TRANSLATE_NOOP("Stop", "Stop strings"), "context_full": QT_TRANSLATE_NOOP("Stop", "Context window"),
         "aborted": QT_TRANSLATE_NOOP("Stop", "User stop")}


EMPTY = QT_TRANSLATE_NOOP("Stop", "Nothing generated yet: write a prompt and press Prefill (Ctrl+P).")


class Gauge(QWidget):
    """A bar split into coloured parts of a total, with a caption on it (painted on update, cheaply)."""

    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.parts: tuple[tuple[int, str], ...] = ()  # (count, theme colour name)
        self.total = 1
        self.caption = ""
        self.setMinimumHeight(22)

    def sizeHint(self) -> QSize:
        return QSize(300, int(26 * self.appearance.scale))

    def set_parts(self, parts: tuple[tuple[int, str], ...], total: int, caption: str = "") -> None:
        state = (parts, max(total, 1), caption)
        if state != (self.parts, self.total, self.caption):
            self.parts, self.total, self.caption = state
            self.update()

    def paintEvent(self, event):
        t = self.appearance.theme
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        r = QRectF(self.rect()).adjusted(1, 1, -1, -1)
        p.setPen(QColor(t.grid))
        p.setBrush(QColor(t.panel))
        p.drawRoundedRect(r, 4, 4)
        p.setPen(Qt.NoPen)
        x = r.x()
        for count, colour_name in self.parts:
            # at least a sliver for anything present, so a 5-token prompt in an 8k window stays visible
            width = max(r.width() * count / self.total, 3 if count else 0)
            p.setBrush(QColor(getattr(t, colour_name)))
            p.drawRect(QRectF(x, r.y(), min(width, r.right() - x), r.height()))
            x += width
        if self.caption:
            p.setPen(QColor(t.text))
            p.setFont(self.appearance.font(0.9))
            p.drawText(r, Qt.AlignCenter, self.caption)


class StopView(View):
    COSTLY = True  # a plot: several ms per redraw

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.status = QLabel(translate("Stop", EMPTY))
        self.status.setObjectName("big")
        self.status.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.status)
        layout.addLayout(self._rules(appearance))
        layout.addStretch(1)
        self.shown_generated = 0  # tokens generated as of the shown step
        self._key = None
        self.restyle()
        self.retranslate()

    def retranslate(self) -> None:
        for key, label in self.rows.items():
            label.setText(translate("Stop", RULES[key]))
        self.hint.setText(translate("Stop", "Esc (Stop) ends the generation between two steps."))
        self._key = None

    def _rules(self, appearance: Appearance) -> QGridLayout:
        """One row per stop rule: its name (highlighted when it fired) and how close it is."""
        grid = QGridLayout()
        grid.setColumnStretch(1, 1)
        self.rows: dict[str, QLabel] = {}

        def row(r, key):
            label = QLabel()
            label.setObjectName("heading")
            grid.addWidget(label, r, 0, Qt.AlignTop)
            self.rows[key] = label

        row(0, "eos")
        self.eos_plot = BarChart(appearance)  # painted (bar_chart.py): its series "eos" grows at every step of a Run
        self.eos_plot.setFixedHeight(int(56 * appearance.scale))
        self.eos_plot.set_range(y=(0, 1))
        self.eos_plot.set_y_ticks([(0, "0"), (1, "1")])
        self.eos_plot.set_x_ticks([])  # the steps: under Length limit's gauge
        self.eos_text = QLabel()
        self.eos_text.setObjectName("muted")
        self.eos_text.setWordWrap(True)
        box = QVBoxLayout()
        box.addWidget(self.eos_plot)
        box.addWidget(self.eos_text)
        grid.addLayout(box, 0, 1)

        row(1, "max_new_tokens")
        self.limit = Gauge(appearance)
        grid.addWidget(self.limit, 1, 1)

        row(2, "stop_string")
        self.stop_strings = QLabel()
        self.stop_strings.setTextFormat(Qt.RichText)
        self.stop_strings.setWordWrap(True)
        grid.addWidget(self.stop_strings, 2, 1)

        row(3, "context_full")
        self.gauge = Gauge(appearance)
        self.gauge_text = QLabel()
        self.gauge_text.setObjectName("muted")
        self.gauge_text.setWordWrap(True)  # a longer count must not widen the view (a scroll bar, everything moved)
        box = QVBoxLayout()
        box.addWidget(self.gauge)
        box.addWidget(self.gauge_text)
        grid.addLayout(box, 3, 1)

        row(4, "aborted")
        self.hint = hint = QLabel()
        hint.setObjectName("muted")
        hint.setWordWrap(True)
        grid.addWidget(hint, 4, 1)
        return grid

    def restyle(self) -> None:
        self.gauge.update()
        self.limit.update()
        self._key = None

    def refresh(self) -> None:
        c = self.intents
        t = self.appearance.theme
        past = self.past_step()
        # A past step k: the rules as they stood right after its token (k generated, its settings).
        n_gen = past.index if past is not None else len(c.steps)
        settings = (past.settings if past is not None else None) or c.settings
        steps = c.steps[:n_gen]
        # What the rules are drawn from; unchanged, nothing to redraw. The objects are kept with the key, so
        # that a new report can never reuse a forgotten one's id.
        reports = (steps[-1] if steps else None, c.pending, c.stopped, c.prefill_event, c.info)
        key = (tuple(map(id, reports)), n_gen, len(c.steps), past is None, settings, c.running,
               c.prefilling, self.appearance.theme)
        if key == self._key:
            return
        self._key, self._reports = key, reports
        self.shown_generated = n_gen
        self._eos(steps, past is None)
        limit = settings.max_new_tokens
        self.limit.set_parts(((min(n_gen, limit), "selected"),), limit,
                             translate("Stop", "{n} of %n new token(s) · {left} left", None, limit).format(
                                 n=n_gen, left=max(limit - n_gen, 0)))
        progress = steps[-1].stop_progress if steps else ()
        lines = []
        for i, s in enumerate(settings.stop_strings):
            matched = progress[i] if i < len(progress) else 0
            boxes = "".join("■" if j < matched else "□" for j in range(len(s)))
            lines.append(f"<code>{html.escape(display(s))}</code> <span style='color:{t.kept}'>{boxes}</span> {matched}/{len(s)}")
        self.stop_strings.setText("<br>".join(lines) or translate("Stop", "<i>none set</i> (add them in Controls)"))
        n_prompt = c.prefill_event.n_tokens if c.prefill_event else 0
        window = c.info.context_length if c.info else 1
        self.gauge.set_parts(((n_prompt, "raw"), (n_gen, "kept")), window)
        free = window - n_prompt - n_gen
        self.gauge_text.setText(translate("Stop", "prompt {prompt} · generated {generated} · free {free} of {window}")
                                .format(prompt=f"{n_prompt:,}", generated=f"{n_gen:,}", free=f"{free:,}",
                                        window=f"{window:,}")
                                if c.info else translate("Stop", "The window's size comes with the model."))
        self._status(past)

    def _eos(self, steps, with_pending: bool) -> None:
        """p(end of sequence) at each step up to the shown one (and the pending one when it is shown)."""
        c = self.intents
        eos_p = [s.dist.eos_p for s in steps]
        if with_pending and c.pending is not None and c.pending.index == len(steps) + 1:
            eos_p.append(c.pending.dist.eos_p)
        if eos_p:
            self.eos_plot.set_series("eos", self._eos_series(np.arange(1, len(eos_p) + 1, dtype=float), eos_p))
            self.eos_plot.set_range(x=(0.5, step_top(max(len(eos_p), len(c.steps)), 16, c.run_horizon) + 0.5))
            now = eos_p[-1]
            self.eos_text.setText(translate("Stop", "p(end of sequence) at step {index}: {p}").format(
                index=len(eos_p), p=f"{now:.4f}")
                + ("  · " + translate("Stop", "the step drawn as EOS ends generation") if now > 0.5 else ""))
        else:  # no steps: the axis the steps will have, not an autorange around nothing (-0.4 ... 0.5)
            self.eos_plot.set_series("eos", self._eos_series([], []))
            self.eos_plot.set_range(x=(0.5, 16.5))
            self.eos_text.setText(translate("Stop", "p(end of sequence) at each step: drawn here from the first Step on."))

    def _eos_series(self, x, y) -> Series:
        t = self.appearance.theme
        return series(t.chosen, x, y, 2 * self.appearance.scale, fill=t.removed)

    def _status(self, past) -> None:
        c = self.intents
        t = self.appearance.theme
        reason = c.stopped.reason if c.stopped and past is None else None
        for key, label in self.rows.items():
            set_style_sheet(label, f"color: {t.chosen};" if key == reason else "")
        if past is not None:
            set_style_sheet(self.status, f"color: {t.selected};")
            self.status.setText(translate("Stop", "At step {index} of {n}: no rule had fired yet; the rules as they "
                                          "stood then.").format(index=past.index, n=len(c.steps)))
        elif c.stopped is not None:
            extra = f" ({display(c.stopped.stop_string)})" if c.stopped.stop_string else ""
            generated = c.stopped.n_generated
            why = translate("Stop", REASONS[reason]) if reason in REASONS else reason
            self.status.setText(translate("Stop", "Ended after %n token(s): {reason}{extra}.", None, generated).format(
                reason=why, extra=extra))
            set_style_sheet(self.status, f"color: {t.chosen};")
        else:
            set_style_sheet(self.status, "")
            state = translate("Stop", "Running…") if c.running else \
                translate("Stop", "Generating step by step.") if c.steps else \
                translate("Stop", "Prefilled: ready for step 1.") if c.prefilled else \
                translate("Stop", "Reading the prompt…") if c.prefilling else translate("Stop", EMPTY)
            self.status.setText(state)


def set_style_sheet(label: QLabel, style: str) -> None:
    """Set a label's style sheet when it changes: every setStyleSheet re-polishes the label (font, palette,
    geometry), even with the same sheet, and this view restyles its labels at every frame of a run."""
    if label.styleSheet() != style:
        label.setStyleSheet(style)
