"""Timing: prefill time and rate; each step's forward pass and sampling time; decode tokens per second.

The shown step (the history slider's, or the newest) is highlighted and its own times named; a switch to
another branch whose cache was not held says how many tokens it re-read in one parallel pass.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout

from ..controller import Controller
from ..theme import Appearance
from .base import View
from .plotting import colour, grid_ceiling, make_plot, nice_ceiling, set_range, style_plot


class TimingView(View):
    COSTLY = True  # takes turns with the other plot views during Run

    def __init__(self, controller: Controller, appearance: Appearance):
        super().__init__(controller, appearance)
        self.summary = QLabel("Prefill and per-step times appear here.")
        self.summary.setTextFormat(Qt.RichText)
        self.summary.setWordWrap(True)
        self.plot = make_plot(appearance)
        self.plot.getPlotItem().setLabel("bottom", "step")
        self.plot.getPlotItem().setLabel("left", "ms")
        self.forward_bars = pg.BarGraphItem(x=[], height=[], width=0.7)
        self.sample_bars = pg.BarGraphItem(x=[], y0=[], height=[], width=0.7)
        self.selected_bar = pg.BarGraphItem(x=[], height=[], width=0.9)
        for item in (self.selected_bar, self.forward_bars, self.sample_bars):
            self.plot.addItem(item)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self.summary)
        layout.addWidget(self.plot, 1)
        self._key = None
        self.restyle()

    def restyle(self) -> None:
        style_plot(self.plot, self.appearance)
        self._key = None

    def refresh(self) -> None:
        c = self.controller
        shown = c.shown()
        reread = c.history.reread
        # identities, not lengths: a rewind, a fork or a branch switch can leave as many steps as before
        key = (c.epoch, id(c.prefill_event), id(c.steps[-1]) if c.steps else None, len(c.steps),
               None if shown is None else shown.index, c.stopped is None, id(reread))
        if key == self._key:
            return
        self._key = key
        t = self.appearance.theme
        p = c.prefill_event
        if p is None:
            self.summary.setText("Prefill and per-step times appear here.")
            self.forward_bars.setOpts(x=[], height=[], brushes=[])
            self.sample_bars.setOpts(x=[], y0=[], height=[])
            self.selected_bar.setOpts(x=[], height=[])
            return
        steps = c.steps
        forward = np.array([s.forward_ms for s in steps])
        sample = np.array([s.sample_ms for s in steps])
        decode_forward = forward[1:]  # step 1 was drawn from the prefill's logits
        top = nice_ceiling(max(float(np.max(decode_forward + sample[1:])) * 1.35, 1.0) if len(steps) > 1
                           else max(p.ms, 1.0) * 1.2)
        # A long prefill would flatten the decode bars: its bar is cut at the top and the summary says so
        # (a note inside the plot would sit on the bars).
        clipped = bool(steps) and forward[0] > top * 0.97
        # The words are coloured as their bars: they are the plot's legend.
        text = (f"<b style='color:{t.accent}'>Prefill</b>: {p.n_tokens} tokens in {p.ms:.1f} ms = "
                f"<b>{p.tokens_per_s:,.0f} tokens/s</b> (one parallel pass over the prompt"
                f"{'; bar 1, cut at the top' if clipped else ''})")
        if len(steps) > 1:
            per_token = float(np.mean(decode_forward + sample[1:]))
            text += (f"<br><b>Decode</b>: {len(steps)} tokens, <span style='color:{t.final}'>forward</span> "
                     f"{np.median(decode_forward):.1f} ms + <span style='color:{t.warning}'>sampling</span> "
                     f"{np.median(sample):.2f} ms per token (median) = <b>{1000 / per_token:,.1f} tokens/s</b>; "
                     "one token at a time, each reading all weights")
        if c.stopped is not None and c.stopped.decode_tokens_per_s > 0:
            text += f" · session: {c.stopped.decode_tokens_per_s:,.1f} tokens/s"
        self.summary.setText(text + self._shown_text(shown, reread))
        x = np.arange(1, len(steps) + 1, dtype=float)
        shown_forward = np.minimum(forward, top * 0.97)
        brushes = [colour(t.accent)] + [colour(t.final)] * (len(steps) - 1)
        self.forward_bars.setOpts(x=x, height=shown_forward, width=0.7, brushes=brushes[:len(steps)], pen=None)
        self.sample_bars.setOpts(x=x, y0=shown_forward, height=sample, width=0.7, brush=colour(t.warning), pen=None)
        if shown is not None and shown.step is not None:
            self.selected_bar.setOpts(x=[shown.index], height=[top], width=0.95, brush=colour(t.selected, 50),
                                      pen=None)
        else:
            self.selected_bar.setOpts(x=[], height=[])
        set_range(self.plot, x=(0.3, grid_ceiling(len(steps), 16) + 0.7), y=(0, top))

    def _shown_text(self, shown, reread) -> str:
        """The highlighted step's own times, and the last branch switch's re-read."""
        t = self.appearance.theme
        text = ""
        if shown is not None and shown.step is not None:
            s = shown.step
            source = ("the prefill's last position" if s.index == 1
                      else f"one new token attending to {s.context_tokens - 1} positions")
            draw = ("no draw: you chose the token" if s.forced
                    else f"sampling {s.sample_ms:.2f} ms")
            text += (f"<br><b style='color:{t.selected}'>Step {s.index}</b>: forward {s.forward_ms:.1f} ms "
                     f"({source}) · {draw}")
        if reread is not None and reread.reread_tokens > 0:
            text += (f"<br><b style='color:{t.accent}'>Branch switch</b>: re-read {reread.reread_tokens} tokens "
                     f"in one parallel pass ({reread.ms:.1f} ms), as a prefill does")
        elif reread is not None:
            text += "<br><b>Branch switch</b>: its cache was still held, nothing re-read"
        return text
