"""Timing: prefill time and rate; each step's forward pass and sampling time; decode tokens per second.

The shown step (the history slider's, or the newest) is highlighted and its own times named; a switch to
another branch whose cache was not held says how many tokens it re-read in one parallel pass.

With speculative decoding, a verify pass is one green block over the steps it decided (its forward pass
was one, however many tokens it kept), and the summary counts the drafts accepted and the tokens per
forward pass.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout

from ..controller import Controller
from ..speculation import counters, pass_of
from ..theme import Appearance
from .base import View
from .plotting import colour, grid_ceiling, make_plot, nice_ceiling, set_range, style_plot

ROLES = {"accepted": "an accepted draft token", "correction": "the correction (draft rejected here)",
         "bonus": "the bonus token (whole draft kept)"}


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
        self.verify_bars = pg.BarGraphItem(x=[], height=[], width=0.7)  # one per verify pass, as wide as its steps
        self.counters = None  # the speculation counters shown (None: no verify pass on this path)
        for item in (self.selected_bar, self.forward_bars, self.sample_bars, self.verify_bars):
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
            self.verify_bars.setOpts(x=[], height=[], width=[])
            self.counters = None
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
        self.counters = counters(c.history)
        if len(steps) > 1:
            per_token = float(np.mean(decode_forward + sample[1:]))
            # a verify pass's time is on its first step, 0 on the others: only the mean is a cost per token
            average, how = (np.mean, "mean") if self.counters else (np.median, "median")
            text += (f"<br><b>Decode</b>: {len(steps)} tokens, <span style='color:{t.final}'>forward</span> "
                     f"{average(decode_forward):.1f} ms + <span style='color:{t.warning}'>sampling</span> "
                     f"{np.median(sample):.2f} ms per token ({how}) = <b>{1000 / per_token:,.1f} tokens/s</b>; "
                     + ("one token at a time, each reading all weights" if self.counters is None else
                        "a verify pass reads the weights once for several tokens"))
        if c.stopped is not None and c.stopped.decode_tokens_per_s > 0:
            text += f" · session: {c.stopped.decode_tokens_per_s:,.1f} tokens/s"
        self.summary.setText(text + self._counter_text() + self._shown_text(shown, reread))
        x = np.arange(1, len(steps) + 1, dtype=float)
        shown_forward = np.minimum(forward, top * 0.97)
        shown_forward[[s.verified_by > 0 for s in steps]] = 0.0  # drawn as the pass's block instead
        self._verify_blocks(top)
        brushes = [colour(t.accent)] + [colour(t.final)] * (len(steps) - 1)
        self.forward_bars.setOpts(x=x, height=shown_forward, width=0.7, brushes=brushes[:len(steps)], pen=None)
        self.sample_bars.setOpts(x=x, y0=shown_forward, height=sample, width=0.7, brush=colour(t.warning), pen=None)
        if shown is not None and shown.step is not None:
            self.selected_bar.setOpts(x=[shown.index], height=[top], width=0.95, brush=colour(t.selected, 50),
                                      pen=None)
        else:
            self.selected_bar.setOpts(x=[], height=[])
        set_range(self.plot, x=(0.3, grid_ceiling(len(steps), 16) + 0.7), y=(0, top))

    def _verify_blocks(self, top: float) -> None:
        """One bar per verify pass of the path, spanning the steps it decided, as high as its one pass."""
        steps = self.controller.steps
        centres, heights, widths = [], [], []
        for step in steps:
            if step.verified_by and step.index == step.verified_by:
                n = sum(1 for s in steps[step.index - 1:] if s.verified_by == step.index)
                centres.append(step.index + (n - 1) / 2)
                widths.append(n - 0.3)
                heights.append(min(step.forward_ms, top * 0.97))
        self.verify_bars.setOpts(x=centres, height=heights, width=widths, brush=colour(self.appearance.theme.kept, 150),
                                 pen=pg.mkPen(colour(self.appearance.theme.kept), width=1.5))

    def _counter_text(self) -> str:
        k = self.counters
        if k is None:
            return ""
        green = self.appearance.theme.kept
        return (f"<br><b style='color:{green}'>Speculation</b> ({k.verify_passes} verify pass"
                f"{'es' if k.verify_passes != 1 else ''}, green): drafts accepted "
                f"<b>{k.accepted}/{k.drafted} = {k.acceptance:.0%}</b> · <b>{k.tokens_per_pass:.2f} tokens per "
                f"forward pass</b>")

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
            verify = pass_of(self.controller.history, s)
            if verify is not None:
                v = verify.verified
                source = (f"{ROLES[verify.role(s)]} of the verify pass at step {v.index}: one forward pass "
                          f"of {v.forward_ms:.1f} ms over {v.positions} positions for {v.emitted} tokens")
                text += f"<br><b style='color:{t.selected}'>Step {s.index}</b>: {source} · {draw}"
            else:
                text += (f"<br><b style='color:{t.selected}'>Step {s.index}</b>: forward {s.forward_ms:.1f} ms "
                         f"({source}) · {draw}")
        if reread is not None and reread.reread_tokens > 0:
            text += (f"<br><b style='color:{t.accent}'>Branch switch</b>: re-read {reread.reread_tokens} tokens "
                     f"in one parallel pass ({reread.ms:.1f} ms), as a prefill does")
        elif reread is not None:
            text += "<br><b>Branch switch</b>: its cache was still held, nothing re-read"
        return text
