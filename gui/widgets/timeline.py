"""Timing's timeline: the engine's passes since the prompt was read, end to end on ONE axis in ms.

The prefill is one wide block, each decode step a thin one (its forward pass and its draw), with the
token's text where it fits. Re-reads are drawn as what they are: a branch switch's re-read and a step
without the KV cache (it re-reads every position) in the prefill's colour, hatched; a verify pass as one
green block before the draws it decided. A block is never drawn thinner than a pixel: at many steps the
blocks touch instead of leaving gaps.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QPen

from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.theme import Appearance
from gui.state.timing_data import CACHED, NO_CACHE, PREFILL, RECOMPUTE, REREAD, SAMPLE, VERIFY, Block, timeline
from gui.state.format import display
from gui.widgets.plotting import Bars, StyledBars, colour, make_plot, set_range, snug_ceiling, style_plot, text_item

MAX_LABELS = 24  # text items reused; more blocks than this never have room for their words anyway
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
    """A plot strip; `update(log, shown_step)` redraws it from the history's log."""

    def __init__(self, appearance: Appearance):
        self.appearance = appearance
        self.plot = make_plot(appearance)
        item = self.plot.getPlotItem()
        item.hideAxis("left")  # its words are in Timing's summary: an axis label would take the blocks' height
        self.retranslate()
        self.bars = StyledBars(x0=[], y0=[], width=[], height=[])
        self.shown = Bars(x0=[], y0=[], width=[], height=[])
        self.plot.addItem(self.bars)
        self.plot.addItem(self.shown)
        self.labels = [text_item(appearance, anchor=(0.5, 0.5)) for _ in range(MAX_LABELS)]
        for label in self.labels:
            self.plot.addItem(label)
        self.blocks: list[Block] = []
        self.widths = np.zeros(0)  # the drawn widths in ms (each at least a pixel)
        self._key = None

    def restyle(self) -> None:
        style_plot(self.plot, self.appearance)
        for label in self.labels:
            label.restyle(self.appearance)
        self._key = None

    def ms_per_px(self, total_ms: float) -> float:
        width = max(self.plot.getPlotItem().getViewBox().width(), 50.0)
        return max(total_ms, 1.0) / width

    def _brush(self, kind: str) -> QBrush:
        t = self.appearance.theme
        if kind == REREAD or kind == NO_CACHE:  # a re-read of many positions, as a prefill: hatched
            brush = QBrush(colour(t.accent if kind == REREAD else t.chosen), Qt.BDiagPattern)
            return brush
        return QBrush(colour({PREFILL: t.accent, CACHED: t.final, VERIFY: t.kept, SAMPLE: t.warning,
                              RECOMPUTE: t.temp}[kind]))

    def _style(self, kind: str, edged: bool) -> tuple[QPen | None, QBrush]:
        """A block's outline and fill: re-reads outlined in their colour, others edged with the background."""
        t = self.appearance.theme
        if kind in (REREAD, NO_CACHE):
            return pg.mkPen(colour(t.accent if kind == REREAD else t.chosen), width=1), self._brush(kind)
        return (pg.mkPen(colour(t.panel), width=1) if edged else None), self._brush(kind)

    def update(self, log, shown_step=None) -> None:
        key = (id(log), len(log), id(shown_step), self.plot.width())
        if key == self._key:
            return
        self._key = key
        self.blocks = blocks = timeline(log)
        if not blocks:
            self.bars.set_bars([], [], x0=[], y0=[], width=[], height=[])
            self.shown.setOpts(x0=[], y0=[], width=[], height=[])
            self.widths = np.zeros(0)
            for label in self.labels:
                label.show_text("")
            return
        # the axis ends at a round number just past the last pass: laid out again a few times a run, not at
        # every frame (each new end re-laid its ticks and repainted it: ~1 ms of a frame's GUI CPU)
        total = snug_ceiling(blocks[-1].start_ms + blocks[-1].ms)
        px = self.ms_per_px(total)
        starts = np.array([b.start_ms for b in blocks])
        self.widths = np.maximum([b.ms for b in blocks], px)  # never thinner than a pixel: no gaps
        heights = [1.0 if b.kind not in (SAMPLE,) else 0.45 for b in blocks]
        # a hairline of the background between blocks wide enough to spare it: one block per pass, countable
        keys = [(b.kind, b.kind in (REREAD, NO_CACHE) or w >= 3 * px) for b, w in zip(blocks, self.widths)]
        palette = {key: i for i, key in enumerate(dict.fromkeys(keys))}
        self.bars.set_bars([palette[key] for key in keys], [self._style(*key) for key in palette], x0=starts,
                           y0=np.zeros(len(blocks)), width=self.widths, height=heights)
        self._show(shown_step, starts, total, px)
        self._label(starts, px)
        set_range(self.plot, x=(0.0, total), y=(-0.15, 1.25), padding=0.0)

    def _show(self, shown_step, starts, total: float, px: float) -> None:
        """Outline the newest block that drew the shown step (the history slider's)."""
        at = next((i for i in range(len(self.blocks) - 1, -1, -1) if self.blocks[i].step is shown_step), None) \
            if shown_step is not None else None
        if at is None:
            self.shown.setOpts(x0=[], y0=[], width=[], height=[])
            return
        self.shown.setOpts(x0=[starts[at] - px], y0=[-0.1], width=[self.widths[at] + 2 * px], height=[1.2],
                           brush=colour(self.appearance.theme.selected, 60),
                           pen=pg.mkPen(colour(self.appearance.theme.selected), width=1.5))

    def retranslate(self) -> None:
        self.plot.setToolTip(translate("Timeline", "Every forward pass since the prompt was read, end to end in ms: the "
                                       "prefill, one block per decode step (its pass and its draw), re-reads hatched (a "
                                       "branch switch's in the prefill's colour, a step without the KV cache in red), a "
                                       "verify pass in green, with the positions it read (M) and its time as a multiple "
                                       "of one plain step's"))

    def _label(self, starts, px: float) -> None:
        """Words in the blocks wide enough for them; the widest blocks first when there are many."""
        room = [(self.widths[i] / px, i) for i, b in enumerate(self.blocks) if b.label]
        room = sorted((r for r in room if r[0] >= 2 * LABEL_PX), reverse=True)[:MAX_LABELS]
        used = 0
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
            self.labels[used].show_text(text, starts[i] + self.widths[i] / 2, y, color=self.appearance.theme.text)
            used += 1
        for label in self.labels[used:]:
            label.show_text("")
