"""Timing's two series, cache on vs off: forward ms by context position of the steps taken in each mode on
this prompt, and beside each the work its step does by the formula.

With the cache a step projects K and V for ONE new position and reads every cached one; without it a step
projects K and V for every position again. The first grows only by the reading and stays nearly flat; the
second grows with the context.
"""

from __future__ import annotations

import numpy as np

from inference.events import ModelInfo

from gui.theme import Appearance
from gui.state.timing_data import mode_series, work
from gui.state.format import fmt_bytes, fmt_count
from gui.state.i18n import number, translate
from gui.widgets.bar_chart import BarChart, series

KEYS = {True: "cache on", False: "cache off"}  # the chart's series


class CacheSeries:
    """The two series, drawn as lines with a dot per step (no dots past 80 steps: a dense line reads better)
    in a painted chart that holds the per-step bars too."""

    def __init__(self, chart: BarChart, appearance: Appearance):
        self.appearance = appearance
        self.chart = chart
        self.data: dict[bool, tuple[np.ndarray, np.ndarray]] = {True: (np.zeros(0),) * 2, False: (np.zeros(0),) * 2}
        self.shown = False  # both modes have steps: the series are drawn

    def colours(self) -> dict[bool, str]:
        t = self.appearance.theme
        return {True: t.final, False: t.chosen}

    def update(self, log) -> float:
        """Read the series from the log; returns their highest ms (0 while only one mode has steps)."""
        self.data = mode_series(log)
        self.shown = all(len(x) for x, _ in self.data.values())
        top = 0.0
        scale = self.appearance.scale
        for mode, key in KEYS.items():
            x, y = self.data[mode] if self.shown else (np.zeros(0), np.zeros(0))
            self.chart.set_series(key, series(self.colours()[mode], x, y, 2.0 * scale,
                                              dots=5 * scale if len(x) < 80 else 0.0))
            if len(y):
                top = max(top, float(np.max(y)))
        return top

    def words(self, info: ModelInfo | None, context: int) -> str:
        """What one step does in each mode at `context` positions, from the formula (the series' legend)."""
        if info is None:
            return ""
        w = work(info, context)
        c = self.colours()
        return translate("Timing", "<b style='color:{off_colour}'>cache off</b>: K/V of all {context} positions = "
                         "{off_macs} mult-adds per step (grows with the context); <b style='color:{on_colour}'>cache "
                         "on</b>: K/V of 1 = {on_macs} + read {read} of stored K/V (nearly flat)").format(
            off_colour=c[False], context=context, off_macs=fmt_count(w.kv_macs_no_cache), on_colour=c[True],
            on_macs=fmt_count(w.kv_macs_cached), read=fmt_bytes(w.kv_read_cached))

    def formula_text(self, info: ModelInfo | None, context: int) -> str:
        """The formula behind the labels, for the tooltip."""
        if info is None:
            return ""
        w = work(info, context)
        return translate(
            "Timing", "Per decode step at {context} positions (formula):\nwith the cache: K/V projections of ONE new "
            "position = 2 × {layers} layers × {hidden} × {kv_heads} KV heads × {head_dim} = {on_macs} multiply-adds, "
            "plus reading the past K/V: {per_token} B × {context} = {read}\nwithout it: the K/V projections of every "
            "position again = {on_macs} × {context} = {off_macs} multiply-adds (and the rest of the model for every "
            "position too)").format(context=context, layers=info.n_layers, hidden=info.hidden_size,
                                    kv_heads=info.n_kv_heads, head_dim=info.head_dim, on_macs=number(w.kv_macs_cached),
                                    per_token=number(info.kv_bytes_per_token), read=fmt_bytes(w.kv_read_cached),
                                    off_macs=number(w.kv_macs_no_cache))
