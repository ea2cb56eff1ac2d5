"""Candidates: the step's top-N tokens, the sampler's waterfall, and the draw.

- Bars: for each of the top-N tokens by raw logit, its p as the model gave it, after temperature, and in
  the final distribution the draw used (0 where truncated).
- Waterfall: the mass each sampler stage keeps and removes, and how many tokens remain.
- Draw: the kept tokens end to end (their CDF, most likely first) and the uniform u that picked one.

From a server (only its top-N known) one more row, "other (V − N tokens)", shows the raw mass it did not list.

A click on a bar or a draw segment takes that token: at the pending step it is forced, at a past step the
session forks there (rewind, then force), keeping the branch it leaves.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout

from gui.state.history import Shown
from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.state.intents import Intents
from gui.theme import Appearance
from gui.views.base import View
from gui.widgets.candidate_labels import compact, legend_tip, header_text, legend, row_label, row_tooltip
from gui.state.format import byte_label, display, partial_note, quoted, rank_text
from gui.widgets.bar_chart import LABEL_MARGIN, BarChart, ChartText, Marker, bar_set
from gui.widgets.plotting import TextWidths, titled
from gui.widgets.token_picker import TokenPicker
from gui.widgets.wrap_label import CaptionLabel, WrapLabel

STAGE_TITLES = {"temperature": QT_TRANSLATE_NOOP("Candidates", "temp."), "top_k": "top-k", "top_p": "top-p",
                "min_p": "min-p", "greedy": "argmax", "server_cap": QT_TRANSLATE_NOOP("Candidates", "server cap"),
                "raw": QT_TRANSLATE_NOOP("Candidates", "raw"), "renorm": QT_TRANSLATE_NOOP("Candidates", "renorm.")}
# where the waterfall is too narrow for those (F5 in the compact layout): the stage's symbol, named in the tooltip
SHORT_STAGE_TITLES = {"raw": QT_TRANSLATE_NOOP("Candidates", "raw"), "temperature": "T", "top_k": "k", "top_p": "p", "min_p": "min", "greedy": "max",
                      "server_cap": QT_TRANSLATE_NOOP("Candidates", "cap"), "renorm": "Σ=1"}
STAGES_TIP = QT_TRANSLATE_NOOP("Candidates", "raw: the model's softmax · T (temp.): logits ÷ temperature · k, p, min: "
                               "top-k, top-p, min-p cut the tail · cap (server cap): the part of a server's unlisted "
                               "tokens the sampler would keep, cut because the draw is among the listed ones · Σ=1 "
                               "(renorm.): what is kept, renormalised")
EMPTY = QT_TRANSLATE_NOOP("Candidates", "After Prefill the candidates for the first new token appear here.")
MAX_SEGMENT_LABELS = 8
DRAW_BAR_TOP = 0.46  # the draw's segments fill y 0.02 .. 0.46; the u label goes above them
SIDE_BY_SIDE = 560  # px (× the type scale): narrower than this, the waterfall and the draw go under the bars
PLOT_AXES = 50  # px of a plot's minimum height that are axes, tick labels and title: they grow with the type


class CandidatesView(View):
    COSTLY = True  # takes turns with the other plot views during Run...
    FIRST = True  # ...every other one: the step's distribution is what a run is watched for

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        # two lines held from the start: a step's heading wraps, and the plots below would move at the first step
        self.header = WrapLabel(translate("Candidates", EMPTY), lines=2)
        self.header.setObjectName("heading")
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.RichText)
        self.legend.setWordWrap(True)

        self._make_bars(appearance)
        self._make_waterfall(appearance)
        self._make_draw(appearance)

        self.side = side = QSplitter(Qt.Vertical)
        side.setChildrenCollapsible(False)  # a squeezed plot must not draw over its caption
        side.addWidget(titled(QT_TRANSLATE_NOOP("Plots", "Sampler stages: tokens kept, mass removed"), self.waterfall))
        side.addWidget(titled(QT_TRANSLATE_NOOP("Plots", "The draw: kept tokens end to end (CDF)"), self.draw,
                              self.draw_caption))
        side.setSizes([520, 480])
        self.split = split = QSplitter(Qt.Horizontal)  # vertical when narrow: see resizeEvent
        split.setChildrenCollapsible(False)
        split.addWidget(self.bars)
        split.addWidget(side)
        split.setStretchFactor(0, 3)  # the bars keep most of the width, also with presentation-size type
        split.setStretchFactor(1, 2)
        split.setSizes([560, 440])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self.header)
        layout.addWidget(self.legend)
        layout.addWidget(split, 1)
        self._last: tuple | None = ("dirty",)  # never a key: the first refresh draws
        self._last_dist = None
        self._drawn: Shown | None = None  # what the plots show now: what a click picks from
        self._rows = np.zeros(0, dtype=int)  # the candidates drawn, top to bottom (as many as fit)
        self._resized = QTimer(self, singleShot=True, interval=120)
        self._resized.timeout.connect(self._redraw_after_resize)
        self.bar_picker = TokenPicker(self.bars, self._bar_token, self._describe_take, self._can_take)
        self.draw_picker = TokenPicker(self.draw, self._segment_token, self._describe_take, self._can_take)
        self.bar_picker.picked.connect(self.take)
        self.draw_picker.picked.connect(self.take)
        self.restyle()
        self.retranslate()

    def retranslate(self) -> None:
        self.legend.setToolTip(legend_tip())
        self.legend.setText(legend(self.appearance.theme, None if self._drawn is None else self._drawn.dist.settings))
        self.bars.set_bottom_label(translate("Candidates", "probability"))
        self.waterfall.set_left_label(translate("Candidates", "mass"))
        self._last = ("dirty",)

    def _make_bars(self, appearance: Appearance) -> None:
        """A painted chart of rows (bar_chart.py): the bars change at every step of a Run, and as a pyqtgraph plot
        they were the costliest part of a frame. Its bar sets, top to bottom of the paint: "raw", "temp", "final"
        (each stage's p), "chosen" (the drawn token's row outlined), "tail" (a server's unlisted tokens)."""
        self.bars = BarChart(appearance, rows=True)
        self.bars.set_range(x=(-0.02, 1.02))
        self.bars.left_axis_px = 130.0  # the tokens' names: a width that does not change with them

    def _make_waterfall(self, appearance: Appearance) -> None:
        """A painted chart (bar_chart.py): bar sets "kept" (the mass each stage keeps) and "removed" (what it cut,
        above); its labels are the tokens kept (and the mass cut) over each stage."""
        self.waterfall = BarChart(appearance)
        self.waterfall.set_range(y=(0, 1.4))  # until a step is drawn: then as its labels need (_draw_waterfall)
        self.waterfall.set_y_ticks([(0, "0"), (0.5, "0.5"), (1, "1")])

    def _make_draw(self, appearance: Appearance) -> None:
        """A painted chart (bar_chart.py): the kept tokens' segments end to end (bar sets "0".."3": the two
        alternating colours, the drawn token, the tokens beyond those carried), u as a marker, and labels: the
        u label first ("" before a draw), then the widest segments' names."""
        self.draw = BarChart(appearance)
        self.draw.set_range(x=(-0.01, 1.01), y=(0, 1))
        self.draw.set_y_ticks([])
        self.draw_caption = CaptionLabel(lines=2)  # what the draw did, in two lines (whole in its tooltip)
        self.draw_caption.setObjectName("muted")

    def restyle(self) -> None:
        a, t = self.appearance, self.appearance.theme
        stacked = self.split.orientation() == Qt.Vertical  # three plots in a column: each a little lower
        for plot, height in ((self.bars, 120 if stacked else 150), (self.waterfall, 90), (self.draw, 80)):
            # ~50 px of each are axes and labels, which grow with the type; the data area need not (F5 at
            # 1024x700 has no room for the whole plot grown by the type's factor)
            plot.setMinimumHeight(int(height + PLOT_AXES * (a.scale - 1)))
        self._label_metrics = QFontMetricsF(a.font(0.85))  # the plot labels' font, measured once
        self._advance = TextWidths(self._label_metrics)  # each text's width in it, measured once
        self.legend.setText(legend(t, None if self._drawn is None else self._drawn.dist.settings))
        self._last = ("dirty",)

    def resizeEvent(self, event) -> None:
        """Narrow (or much taller than wide): the waterfall and the draw go under the bars, not beside them."""
        super().resizeEvent(event)
        w, h, scale = event.size().width(), event.size().height(), self.appearance.scale
        vertical = w < SIDE_BY_SIDE * scale and h > 1.1 * w
        if vertical != (self.split.orientation() == Qt.Vertical):
            self.split.setOrientation(Qt.Vertical if vertical else Qt.Horizontal)
            self.side.setOrientation(Qt.Horizontal if vertical else Qt.Vertical)
            self.restyle()
        self._last = ("dirty",)  # the rows that fit, the labels' room: every view redraws once the resize settles
        self._resized.start()

    def refresh(self) -> None:
        shown = self.intents.shown()
        key = None if shown is None else (shown.index, shown.pending, self.appearance.presentation,
                                          self.appearance.dark, self.bars.height(), self.bars.width())
        if key == self._last and (shown is None or shown.dist is self._last_dist):
            return
        self._last, self._last_dist = key, None if shown is None else shown.dist
        greedy_changed = (self._drawn is None or shown is None
                          or self._drawn.dist.settings.is_greedy != shown.dist.settings.is_greedy)
        self._drawn = shown
        if greedy_changed:
            self.legend.setText(legend(self.appearance.theme, None if shown is None else shown.dist.settings))
        if shown is None:
            self.header.setText(translate("Candidates", EMPTY))
            self.bars.clear_bars()
            self.bars.set_labels([])
            self.bars.set_y_ticks([])
            for chart in (self.waterfall, self.draw):
                chart.clear_bars()
                chart.set_labels([])
            self.draw.set_markers([])
            return
        self.header.setText(header_text(shown))
        self._draw_bars(shown)
        self._draw_waterfall(shown)
        self._draw_draw(shown)

    def _fitting_rows(self, n: int, chosen: int | None, extra: int) -> np.ndarray:
        """The candidates to draw: as many rows as fit at the labels' line height (they would overlap),
        the chosen one kept in place of the last when it ranks lower."""
        line = self._label_metrics.lineSpacing() * 1.1
        fit = max(3, int(self.bars.data_size().height() / line) - extra)
        rows = np.arange(min(n, fit))
        if chosen is not None and chosen >= len(rows):
            rows[-1] = chosen
        return rows

    def _draw_bars(self, shown: Shown) -> None:
        a, t = self.appearance, self.appearance.theme
        c, settings = shown.dist.candidates, shown.dist.settings
        tail = shown.dist.server
        chosen_id = None if shown.step is None else shown.step.token.id
        chosen = None if chosen_id is None else int(np.nonzero(c.ids == chosen_id)[0][0])
        rows = self._rows = self._fitting_rows(len(c.ids), chosen, 0 if tail is None else 1)
        n = len(rows)
        y = np.arange(n, dtype=float)
        greedy = settings.is_greedy  # no temperature stage: two bars a row
        h = a.bar_width(0.3 if greedy else 0.26)
        stages = [("raw", c.p_raw, -h / 2 if greedy else -h, t.raw), ("temp", c.p_temp, 0.0, t.temp),
                  ("final", c.p_final, h / 2 if greedy else h, t.final)]
        for key, values, offset, col in stages:  # each row's bars centred on its row, side by side
            shown_values = np.zeros(0) if greedy and key == "temp" else values[rows]
            self.bars.set_bars(key, bar_set(col, 0.0, y[:len(shown_values)] + offset - h / 2, shown_values, h))
        at = None if chosen is None else int(np.nonzero(rows == chosen)[0][0])
        outline = (2.4 if greedy else 3.6) * h
        self.bars.set_bars("chosen", bar_set(t.chosen, -0.004, [] if at is None else [at - outline / 2], 1.0, outline,
                                             alpha=40, outline=t.chosen, outline_width=2 * a.scale))
        ticks = [(i, f"{'▶ ' if r == chosen else ''}{byte_label(display(c.texts[r]))[:18]}")
                 for i, r in enumerate(rows)]
        if tail is not None:  # the server's unlisted tokens: their raw mass as one bar, never drawn from
            ticks.append((n, translate("Candidates", "other ({n} tokens)").format(n=compact(tail.tail_count))))
            self.bars.set_bars("tail", bar_set(t.raw, 0.0, n - 1.5 * h, [tail.tail_p], h, alpha=110))
        else:
            self.bars.set_bars("tail", bar_set(t.raw, 0.0, [], [], h))
        self.bars.set_y_ticks(ticks)
        self.bars.set_range(y=(-0.6, max(len(ticks), min(10, n + 1)) - 0.4))
        self._bar_labels(shown, rows)

    def _bar_labels(self, shown: Shown, rows: np.ndarray) -> None:
        """Each row's stages in words beside its longest bar, or inside it where the words would run off."""
        t, c, settings = self.appearance.theme, shown.dist.candidates, shown.dist.settings
        tail = shown.dist.server
        axis_px = max(self.bars.data_size().width(), 1.0) / 1.04  # the x range is 0..1 + padding
        labels = []
        # Python floats: a numpy scalar's arithmetic and round() cost a frame of 20 rows ~0.2 ms
        raw, temp, final = (c.p_raw[rows].tolist(), c.p_temp[rows].tolist(), c.p_final[rows].tolist())
        for i, r in enumerate(rows.tolist()):
            text = row_label(raw[i], temp[i], final[i], settings,
                             None if c.p_temp_bounds is None else c.p_temp_bounds[r])
            end = max(raw[i], final[i], 0.0 if settings.is_greedy else temp[i])
            room = (self._advance(text) + 10) / axis_px
            inside = end + 0.01 + room > 1.02 and end >= room  # no room to the right: inside the bar's end
            labels.append(ChartText(text, round(end - 0.01 if inside else min(end + 0.01, 1.02 - room), 3), i,
                                    (1, 0.5) if inside else (0, 0.5), "#ffffff" if inside else None))
        if tail is not None:
            cut = shown.dist.tail_kept
            said = translate("Candidates", "{p} not listed by the server").format(p=f"{tail.tail_p:.3f}") + (
                translate("Candidates", "; {p} of the final p would fall here: cut").format(p=f"{cut[0]:.3f}")
                if cut is not None and cut[0] > 0 else "")
            labels.append(ChartText(said, round(tail.tail_p + 0.01, 3), len(rows)))
        self.bars.set_labels(labels)

    def _redraw_after_resize(self) -> None:
        if not self.intents.running:  # a run redraws every view at its next frame anyway
            self.scheduler.dirty()

    def _draw_waterfall(self, shown: Shown) -> None:
        t = self.appearance.theme
        stages = shown.dist.stages
        names, kept_mass, removed, counts = ["raw"], [1.0], [0.0], [stages[0].kept]  # stage keys, worded below
        mass = 1.0
        for stage in stages:
            if stage.name == "temperature" and shown.dist.settings.is_greedy:
                continue  # greedy takes the top logit: no temperature divides them
            if stage.name == "temperature":
                names.append("temperature")
                kept_mass.append(1.0)
                removed.append(0.0)
                counts.append(stage.kept)
                continue
            cut = mass * stage.removed_mass
            mass -= cut
            names.append(stage.name)
            kept_mass.append(mass)
            removed.append(cut)
            counts.append(stage.kept)
        names.append("renorm")
        kept_mass.append(1.0)
        removed.append(0.0)
        counts.append(stages[-1].kept)
        x = np.arange(len(names), dtype=float)
        self.waterfall.set_bars("kept", bar_set(t.kept, x - 0.3, 0.0, 0.6, kept_mass))
        self.waterfall.set_bars("removed", bar_set(t.removed, x - 0.3, kept_mass, 0.6, removed))
        titles = [translate("Candidates", STAGE_TITLES[name]) for name in names]
        self.waterfall.set_x_ticks(list(enumerate(self._stage_names(names, titles))))
        # Above the bars: the tokens kept and, where the plot has room for a second line, the mass cut (a short
        # plot keeps one line: the red part of its bar shows the cut, the tooltip says it). The y range grows
        # above 1 as far as the labels need, so they never reach into the bars.
        height = self.waterfall.data_size().height()
        lines = 2 if any(removed) and self._label_px(2) <= 0.5 * height else 1
        top = max(1.4, 1 / (1 - min(self._label_px(lines), 0.6 * height) / max(height, 1.0)))
        self.waterfall.set_range(x=(-0.5, len(names) - 0.5), y=(0, top))
        cuts = [f"\n−{cut * 100:.1f}%" if cut > 0 and lines == 2 else "" for cut in removed]
        self.waterfall.set_labels([ChartText(compact(counts[i]) + cuts[i], i, top, (0.5, 0)) for i in range(len(names))])
        kept = translate("Candidates", "{stage}: {n} tokens kept")
        cut = translate("Candidates", ", {percent}% of the mass cut")
        self.waterfall.setToolTip(translate("Candidates", STAGES_TIP) + "".join(
            "\n" + kept.format(stage=title, n=f"{counts[i]:,}")
            + (cut.format(percent=f"{removed[i] * 100:.2f}") if removed[i] else "")
            for i, title in enumerate(titles)))

    def _label_px(self, lines: int) -> float:
        """The px a plot label of that many lines takes (its margins included), and a gap."""
        return lines * self._label_metrics.lineSpacing() + 2 * LABEL_MARGIN + 2

    def _draw_top(self) -> float:
        """The draw's y range top: 1, or more where the plot is short, so that the u label's line fits between
        the top and the bars (which end at DRAW_BAR_TOP)."""
        height = max(self.draw.data_size().height(), 1.0)
        need = min(self._label_px(1), 0.6 * height)
        top = max(1.0, DRAW_BAR_TOP / (1 - need / height))
        self.draw.set_range(y=(0, top))
        return top

    def _stage_names(self, names: list[str], titles: list[str]) -> list[str]:
        """The stages' names under their bars, or their symbols where a name would run into its neighbour's."""
        room = self.waterfall.data_size().width() / max(len(names), 1)
        # the charts' tick font is their labels' (appearance.font(0.85)), measured once in restyle
        if max(self._advance(title) for title in titles) + 6 <= room:
            return titles
        return [translate("Candidates", SHORT_STAGE_TITLES[name]) for name in names]

    def _draw_draw(self, shown: Shown) -> None:
        t = self.appearance.theme
        kept = shown.dist.kept
        cdf = kept.cdf
        starts = np.concatenate([[0.0], cdf[:-1]]) if len(cdf) else np.array([])
        widths = cdf - starts
        chosen_id = None if shown.step is None else shown.step.token.id
        # the kept tokens alternate two colours, the drawn one stands out; tokens beyond those carried: grey
        styles = [2 if token_id == chosen_id else i % 2 for i, token_id in enumerate(kept.ids.tolist())]
        x0, w = list(starts), list(widths)
        if len(cdf) and cdf[-1] < 0.999999:  # tokens beyond those carried: one grey block
            x0.append(float(cdf[-1]))
            w.append(1.0 - float(cdf[-1]))
            styles.append(3)
        x0, w, styles = np.array(x0), np.array(w), np.array(styles, dtype=int)
        fills = [(t.final, 255), (t.temp, 255), (t.chosen, 255), (t.raw, 120)]
        for style, (fill, alpha) in enumerate(fills):  # a later style over an earlier one, each outlined in the panel's colour
            at = styles == style
            self.draw.set_bars(str(style), bar_set(fill, x0[at], 0.02, w[at], DRAW_BAR_TOP - 0.02, alpha=alpha,
                                                   outline=t.panel))
        # Name the widest segments, only where the name fits inside its segment (pixels, not axis units:
        # narrow neighbours' names would run into each other).
        order = np.argsort(-widths)[:MAX_SEGMENT_LABELS] if len(widths) else []
        axis_px = max(self.draw.data_size().width(), 1.0) / 1.02  # the x range is 0..1.02
        labels = []
        for j in order:
            name = display(kept.texts[j])[:10]
            if name and widths[j] * axis_px >= self._advance(name) + 8:
                labels.append(ChartText(name, round(float(starts[j] + widths[j] / 2), 3), 0.24, (0.5, 0.5)))
        step = shown.step
        if step is not None and step.random_u is not None:
            self.draw.set_markers([Marker(step.random_u, t.chosen, 3 * self.appearance.scale)])
            # The label sits beside the line, on the side with room (it never runs over the line), above the
            # bars: the y range grows as far as its line needs (a short plot, 1024x700, drew it over the bars).
            right = step.random_u <= 0.55
            u_label = ChartText(f"u = {step.random_u:.4f} → {display(step.token.piece)}",
                                step.random_u + (0.01 if right else -0.01), self._draw_top(), (0, 0) if right else (1, 0))
        else:
            self.draw.set_markers([])
            u_label = ChartText("", 0.0, 0.0)
        self.draw.set_labels([u_label] + labels)
        n = kept.n_kept
        if step is not None and step.forced:
            caption = translate("Candidates", "No draw: you chose {token} (rank {rank} by logit). The distribution is "
                                "still the model's.").format(token=display(step.token.piece),
                                                             rank=rank_text(step.chosen_rank))
        elif shown.dist.settings.is_greedy:
            caption = translate("Candidates", "Greedy: the highest-logit token is taken; no random number is drawn.")
        elif step is None:
            caption = translate("Candidates", "%n token(s) kept. The next Step draws u uniformly in [0, 1) from the "
                                "seeded generator and takes the token whose segment contains it.", None, n)
        else:
            caption = translate("Candidates", "%n token(s) kept; u = {u} fell in the segment of {token} (rank {rank} "
                                "by logit).", None, n).format(u=f"{step.random_u:.4f}", token=display(step.token.piece),
                                                              rank=rank_text(step.chosen_rank))
        self.draw_caption.setText(caption)

    # --- taking a token by clicking it ----------------------------------------------------------------
    def _bar_token(self, point) -> int | None:
        """The candidate whose row of bars is at this point (data coordinates: y is the row)."""
        if self._drawn is None:
            return None
        ids = self._drawn.dist.candidates.ids
        row = int(round(point.y()))
        return int(ids[self._rows[row]]) if 0 <= row < len(self._rows) else None

    def _segment_token(self, point) -> int | None:
        """The kept token whose segment of the draw strip is at this point (its CDF interval on x)."""
        if self._drawn is None or not (0 <= point.x() < 1 and 0 <= point.y() <= 0.5):
            return None
        kept = self._drawn.dist.kept
        i = int(np.searchsorted(kept.cdf, point.x(), side="right"))
        return int(kept.ids[i]) if i < len(kept.ids) else None

    def _can_take(self) -> bool:
        c = self.intents
        if self._drawn is None or not c.can_move:
            return False
        return c.can_step if self._drawn.pending else True  # a fork rewinds first: it clears a stop

    def _text_of(self, token_id: int) -> str:
        d = self._drawn.dist
        for ids, texts in ((d.candidates.ids, d.candidates.texts), (d.kept.ids, d.kept.texts)):
            hits = np.nonzero(ids == token_id)[0]
            if len(hits):
                return display(texts[hits[0]])
        return f"id {token_id}"

    def _describe_take(self, token_id: int) -> str:
        """A bar's or a draw segment's tooltip: what a click does (when one may), then the token, its rank and
        its p at each sampler stage."""
        shown = self._drawn
        text, c = self._text_of(token_id), shown.dist.candidates
        hits = np.nonzero(c.ids == token_id)[0]
        stages = f"\n{quoted(text)} · id {token_id}" + (
            " · " + translate("Candidates", "rank {rank} by logit").format(rank=rank_text(hits[0])) if len(hits) else "")
        if len(hits):
            at = hits[0]
            stages += "\n" + row_tooltip(c.p_raw[at], c.p_temp[at], c.p_final[at], shown.dist.settings,
                                         None if c.p_temp_bounds is None else c.p_temp_bounds[at],
                                         None if c.p_final_bounds is None else c.p_final_bounds[at])
        note = partial_note(text)  # bytes of a character the next token completes
        stages += f"\n{note}" if note else ""
        if not self._can_take():  # a run under way, or a stop: the token, without a click to offer
            return stages.lstrip("\n")
        if shown.pending:
            return translate("Candidates", "Click to take {token} as step {index} (you choose it: no draw)").format(
                token=text, index=shown.index) + stages
        drawn = display(shown.step.token.piece)
        if token_id == shown.step.token.id:
            return translate("Candidates", "Click to take {token} at step {index} again (it is the token drawn "
                             "there)").format(token=text, index=shown.index) + stages
        return translate("Candidates", "Click to take this token: fork at step {index} with {token} instead of {drawn} "
                         "(the current branch is kept)").format(index=shown.index, token=text, drawn=drawn) + stages

    def take(self, token_id: int) -> None:
        """At the pending step the token is taken; at a past step the controller forks there."""
        self.intents.take(token_id)
