"""Timing's timeline: the engine's passes since the prompt was read, end to end on ONE axis in ms.

The prefill is one wide block, each decode step a thin one (its forward pass and its draw), with the
token's text where it fits. Re-reads are drawn as what they are: a branch switch's re-read and a step
without the KV cache (it re-reads every position) in the prefill's colour, hatched; a verify pass as one
green block before the draws it decided. A block is never drawn thinner than a pixel: at many steps the
blocks touch instead of leaving gaps.

A painted chart (bar_chart.py) without a y axis: as a pyqtgraph plot its blocks and words, changed at every
step, cost a Run's frames a graphics scene's layout and paint.
"""

from __future__ import annotations

import numpy as np

from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.theme import Appearance
from gui.state.timing_data import CACHED, NO_CACHE, PREFILL, RECOMPUTE, REREAD, SAMPLE, VERIFY, Block, timeline
from gui.state.format import display
from gui.widgets.bar_chart import BarChart, BarSet, ChartText, bar_set
from gui.widgets.plotting import snug_ceiling

MAX_LABELS = 24  # more blocks than this never have room for their words anyway
KINDS = (PREFILL, REREAD, CACHED, NO_CACHE, VERIFY, SAMPLE, RECOMPUTE)
HATCHED = (REREAD, NO_CACHE)  # re-reads of many positions, as a prefill is
# A pass's words in its block, worded as it is drawn (the log's labels are "prefill 12", "re-read 30"...)
WORDS = {PREFILL: QT_TRANSLATE_NOOP("Timeline", "prefill {n}"), REREAD: QT_TRANSLATE_NOOP("Timeline", "re-read {n}"),
         RECOMPUTE: QT_TRANSLATE_NOOP("Timeline", "step {n}")}
LABEL_PX = 7.0  # about one character of the tick font: a label is shown when its block is this wide per character


def verify_words(block: Block) -> str:
    """A verify pass's words: the positions it read (M) and what it cost in one-position steps, measured."""
    if block.cost_steps is None:
        return translate("Timeline", "verify M={m}").format(m=block.positions)
    return translate("Timeline", "verify M={m}: {cost}× a step").format(m=block.positions,
                                                                        cost=f"{block.cost_steps:.1f}")


class Timeline:
    """A painted strip; `update(log, shown_step)` redraws it from the history's log.

    Its bar sets, in the order they are painted: one per kind of block, edged or not (see `_style`), then "shown"
    (the outline of the shown step's block)."""

    def __init__(self, appearance: Appearance):
        self.appearance = appearance
        # no y axis: its words are in Timing's summary, and an axis label would take the blocks' height
        self.chart = BarChart(appearance, y_axis=False)
        self.retranslate()
        self.blocks: list[Block] = []
        self.widths = np.zeros(0)  # the drawn widths in ms (each at least a pixel)
        self._clear()
        self._key = None

    def restyle(self) -> None:
        self.chart.update()  # it reads the theme as it paints; the blocks' colours come with the next update
        self._key = None

    def ms_per_px(self, total_ms: float) -> float:
        width = max(self.chart.data_size().width(), 50.0)
        return max(total_ms, 1.0) / width

    def _style(self, kind: str, edged: bool, x0, width) -> BarSet:
        """Blocks of a kind: re-reads hatched and outlined in their colour, others filled, edged with the
        background where `edged`."""
        t = self.appearance.theme
        fill = {PREFILL: t.accent, REREAD: t.accent, CACHED: t.final, NO_CACHE: t.chosen, VERIFY: t.kept,
                SAMPLE: t.warning, RECOMPUTE: t.temp}[kind]
        height = 0.45 if kind == SAMPLE else 1.0  # a draw alone: a lower block
        if kind in HATCHED:
            return bar_set(fill, x0, 0.0, width, height, outline=fill, hatched=True)
        return bar_set(fill, x0, 0.0, width, height, outline=t.panel if edged else None)

    def _clear(self) -> None:
        for kind in KINDS:
            for edged in (False, True):
                self.chart.set_bars(f"{kind} edged" if edged else kind, self._style(kind, edged, [], []))
        self.chart.set_bars("shown", bar_set("", [], [], [], []))
        self.chart.set_labels([])

    def update(self, log, shown_step=None) -> None:
        key = (id(log), len(log), id(shown_step), self.chart.width())
        if key == self._key:
            return
        self._key = key
        self.blocks = blocks = timeline(log)
        if not blocks:
            self.widths = np.zeros(0)
            self._clear()
            return
        # the axis ends at a round number just past the last pass: laid out again a few times a run, not at
        # every frame (each new end re-laid its ticks and repainted it: ~1 ms of a frame's GUI CPU)
        total = snug_ceiling(blocks[-1].start_ms + blocks[-1].ms)
        px = self.ms_per_px(total)
        starts = np.array([b.start_ms for b in blocks])
        self.widths = np.maximum([b.ms for b in blocks], px)  # never thinner than a pixel: no gaps
        # a hairline of the background between blocks wide enough to spare it: one block per pass, countable
        kinds = np.array([b.kind for b in blocks])
        edged = self.widths >= 3 * px
        for kind in set(kinds.tolist()):
            for edge in (False, True):
                at = (kinds == kind) & (edged == edge)
                if at.any() or len(self.chart.bars[f"{kind} edged" if edge else kind].x0):
                    self.chart.set_bars(f"{kind} edged" if edge else kind,
                                        self._style(kind, edge, starts[at], self.widths[at]))
        for key, bars in self.chart.bars.items():  # kinds gone from the log (a new prompt, a rewind): emptied
            if len(bars.x0) and key != "shown" and key.split(" ")[0] not in kinds:
                self.chart.set_bars(key, self._style(key.split(" ")[0], key.endswith(" edged"), [], []))
        self._show(shown_step, starts, total, px)
        self._label(starts, px)
        self.chart.set_range(x=(0.0, total), y=(-0.15, 1.25))

    def _show(self, shown_step, starts, total: float, px: float) -> None:
        """Outline the newest block that drew the shown step (the history slider's)."""
        at = next((i for i in range(len(self.blocks) - 1, -1, -1) if self.blocks[i].step is shown_step), None) \
            if shown_step is not None else None
        selected = self.appearance.theme.selected
        if at is None:
            self.chart.set_bars("shown", bar_set(selected, [], [], [], []))
            return
        self.chart.set_bars("shown", bar_set(selected, starts[at] - px, -0.1, self.widths[at] + 2 * px, 1.2, alpha=60,
                                             outline=selected, outline_width=1.5))

    def retranslate(self) -> None:
        self.chart.setToolTip(translate("Timeline", "Every forward pass since the prompt was read, end to end in ms: the "
                                       "prefill, one block per decode step (its pass and its draw), re-reads hatched (a "
                                       "branch switch's in the prefill's colour, a step without the KV cache in red), a "
                                       "verify pass in green, with the positions it read (M) and its time as a multiple "
                                       "of one plain step's"))

    def _label(self, starts, px: float) -> None:
        """Words in the blocks wide enough for them; the widest blocks first when there are many."""
        room = [(self.widths[i] / px, i) for i, b in enumerate(self.blocks) if b.label]
        room = sorted((r for r in room if r[0] >= 2 * LABEL_PX), reverse=True)[:MAX_LABELS]
        labels = []
        for width_px, i in room:
            block = self.blocks[i]
            text = verify_words(block) if block.kind == VERIFY else \
                display(block.label) if block.kind in (CACHED, NO_CACHE, SAMPLE) else \
                translate("Timeline", WORDS[block.kind]).format(n=block.label.rpartition(" ")[2]) \
                if block.kind in WORDS else block.label
            fits = int(width_px // LABEL_PX)
            if len(text) > fits and fits < 4:
                continue  # "t…" says nothing: a label is whole, or long enough to read
            text = text if len(text) <= fits else text[:fits - 1] + "…"
            y = 0.5 if block.kind != SAMPLE else 0.22
            labels.append(ChartText(text, starts[i] + self.widths[i] / 2, y, (0.5, 0.5)))
        self.chart.set_labels(labels)
