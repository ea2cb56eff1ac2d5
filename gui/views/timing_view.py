"""Timing: prefill time and rate; each step's forward pass and sampling time; decode tokens per second.

The shown step (the history slider's, or the newest) is highlighted and its own times named; a switch to
another branch whose cache was not held says how many tokens it re-read in one parallel pass.

With speculative decoding, a verify pass is one green block over the steps it decided (its forward pass
was one, however many tokens it kept), and the summary counts the drafts accepted and the tokens per
forward pass.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QFrame, QHBoxLayout, QProgressBar, QScrollArea, QVBoxLayout

from gui.state import i18n
from gui.state.i18n import QT_TRANSLATE_NOOP, number, translate
from gui.state.intents import Intents
from gui.state.speculation import choice_text, counters, pass_of
from gui.theme import Appearance
from gui.state.timing_data import cache_off, median_cached_ms, verify_cost
from gui.views.base import View
from gui.widgets.bar_chart import BarChart, bar_set
from gui.widgets.cache_series import CacheSeries
from gui.widgets.plotting import snug_ceiling, step_top
from gui.widgets.timeline import Timeline
from gui.widgets.wrap_label import WrapLabel, line_spacing

ROLES = {"accepted": QT_TRANSLATE_NOOP("Timing", "an accepted draft token"),
         "correction": QT_TRANSLATE_NOOP("Timing", "the correction (draft rejected here)"),
         "bonus": QT_TRANSLATE_NOOP("Timing", "the bonus token (whole draft kept)")}
EMPTY = QT_TRANSLATE_NOOP("Timing", "Prefill and per-step times appear here.")
SUMMARY_LINES = 5  # the lines of the summary its scroll area always shows (prefill with its estimate, decode)
# The step chart's bar sets, in the order they are painted: the shown step's band under its bars; a step's forward
# pass in its mode's colour (step 1's is the prefill's), its draw on top; a verify pass's block over its steps.
FORWARD = ("prefill", "cached", "no cache")
STEP_BARS = ("selected", *FORWARD, "sample", "verify")


def robust_top(decode: np.ndarray, series_top: float, prefill_ms: float) -> float:
    """The highest bar the axis must hold: the decode steps' (and the cache series'), where a pass
    over 1.5 times the 90th percentile (a pause, a compile) is cut at the top as step 1's bar is."""
    values = np.concatenate([decode, [series_top] if series_top > 0 else []])
    if not len(values):
        return max(prefill_ms, 1.0)
    high = float(np.max(values))
    if len(values) >= 10:
        high = min(high, 1.5 * float(np.percentile(values, 90)))
    return max(high, 1e-3)


def touching_width(px_per_step: float, width: float = 0.7) -> float:
    """Bars `width` steps wide, or touching (1.0) where that would leave them thinner than 2 pixels: sub-pixel bars
    vanish or alias into gaps."""
    return width if width * px_per_step >= 2.0 else 1.0


class TimingView(View):
    COSTLY = True  # a chart and a strip redrawn at every step

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.summary = WrapLabel(translate("Timing", EMPTY))
        self.summary.setTextFormat(Qt.RichText)
        self.kv_cache = QCheckBox()
        self.kv_cache.setChecked(intents.kv_cache)
        self.kv_cache.toggled.connect(self._on_toggle)
        self.progress = QProgressBar()

        self.progress.hide()
        # painted (bar_chart.py): as a pyqtgraph plot its bars, changed at every step, cost a Run's frames a
        # graphics scene's layout and paint
        self.step_chart = BarChart(appearance)
        self.step_chart.set_left_label("ms")
        self._clear_steps()  # the bar sets made in the order they are painted
        self.counters = None  # the speculation counters shown (None: no verify pass on this path)
        self.series = CacheSeries(self.step_chart, appearance)  # the cache on/off lines, over the bars
        self.timeline = Timeline(appearance)
        self.decode_ms: float | None = None  # the median cached decode pass, kept across prompts of a model
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        header = QHBoxLayout()
        # in a small window the words scroll rather than squeeze the plots below a readable height
        self.words = words = QScrollArea()
        words.setWidget(self.summary)
        words.setWidgetResizable(True)
        words.setFrameShape(QFrame.NoFrame)
        # the scroll bar's room kept: a decode summary outgrows the prefill's, and a bar that came and went would
        # narrow the text, wrap it again and move it at the first step of every run
        words.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOn)
        header.addWidget(words, 1)
        header.addWidget(self.kv_cache, 0, Qt.AlignTop)
        layout.addLayout(header, 2)
        layout.addWidget(self.progress)
        layout.addWidget(self.step_chart, 3)
        layout.addWidget(self.timeline.chart, 2)
        self._key = None
        intents.progress.connect(self._on_progress)
        intents.state_changed.connect(self._sync_toggle)
        intents.model_changed.connect(self._forget_model)
        self.restyle()
        self.retranslate()

    def _summary_room(self) -> None:
        """In Chinese the summary's lines are taller than the Latin ones its share of the dock was made for: its
        first lines (the prefill with its estimate, the decode) keep their room; English keeps its layout."""
        chinese = i18n.language() != "en"
        self.words.setMinimumHeight(SUMMARY_LINES * line_spacing(self.summary) if chinese else 0)

    def retranslate(self) -> None:
        self._summary_room()
        self.kv_cache.setText(translate("Timing", "KV cache"))
        self.kv_cache.setToolTip(translate("Timing", "Decode with the KV cache (Ctrl+K). Off: every step re-reads the "
                                           "whole prefix (same logits, a cost that grows with the context). Applies "
                                           "between steps."))
        self.progress.setFormat(translate("Timing", "prefill: %v of %m positions read"))
        self.step_chart.setToolTip(translate("Timing", "Each step's forward pass and draw; step k's pass read prompt + k − 1 "
                                       "positions"))
        self.timeline.retranslate()
        self._key = None

    def restyle(self) -> None:
        self.step_chart.update()  # it reads the theme as it paints; the bars' colours come with the next refresh
        self.summary.setFont(self.appearance.font(0.9))
        self._summary_room()
        self.timeline.restyle()
        self.timeline.chart.setMinimumHeight(int(56 * self.appearance.scale))
        self.step_chart.setMinimumHeight(int(100 * self.appearance.scale))
        self._key = None

    # --- the toggle and the prefill's progress -----------------------------------------------------------
    def _on_toggle(self, on: bool) -> None:
        if on != self.intents.kv_cache:
            self.intents.set_kv_cache(on)

    def _sync_toggle(self) -> None:
        c = self.intents
        if self.kv_cache.isChecked() != c.kv_cache:
            self.kv_cache.setChecked(c.kv_cache)
        self.kv_cache.setEnabled(c.info is not None and not c.loading and not c.running and not c.busy)
        if not c.busy and self.progress.isVisible():
            self.progress.hide()

    def _forget_model(self) -> None:
        self.decode_ms = None
        self._sync_toggle()

    def _on_progress(self, stage: str, done: int, total: int) -> None:
        """A long prompt is read in chunks: the bar follows them, and hides when the last one is read."""
        if stage != "prefill":
            return
        if done >= total:
            self.progress.hide()
            return
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.show()

    # --- drawing ---------------------------------------------------------------------------------------
    def refresh(self) -> None:
        c = self.intents
        shown = c.shown()
        reread = c.history.reread
        # identities, not lengths: a rewind, a fork or a branch switch can leave as many steps as before
        key = (c.epoch, id(c.prefill_event), id(c.steps[-1]) if c.steps else None, len(c.steps),
               None if shown is None else shown.index, c.stopped is None, id(reread), len(c.history.log),
               self.step_chart.width(), self.timeline.chart.width(), c.run_horizon)  # the step axis holds the run's length
        if key == self._key:
            return
        self._key = key
        self.timeline.update(c.history.log, shown.step if shown is not None else None)
        p = c.prefill_event
        if p is None:
            self.summary.setText(translate("Timing", EMPTY))
            self._clear_steps()
            self.series.update([])
            self.counters = None
            return
        self.counters = counters(c.history)
        self.summary.setText(self._text(shown, reread))
        self._draw_steps(shown)

    def _text(self, shown, reread) -> str:
        c, t, p = self.intents, self.appearance.theme, self.intents.prefill_event
        steps = c.steps
        median = median_cached_ms(c.history.log)
        self.decode_ms = median if median is not None else self.decode_ms
        # The words are coloured as their bars: they are the plot's legend.
        if c.showing_request is not None:  # a served request: its prompt went through batched passes, shared
            text = translate("Timing", "<b style='color:{colour}'>Prefill</b> of request {request}: {n} positions, "
                             "{ms} ms of batched passes (each shared with the other requests' rows, and counted "
                             "whole)").format(colour=t.accent, request=c.showing_request, n=p.n_tokens,
                                              ms=number(p.ms, 1))
        else:
            text = translate("Timing", "<b style='color:{colour}'>Prefill</b>: {n} positions in one pass, {ms} ms = "
                             "<b>{speed} tokens/s</b>").format(colour=t.accent, n=p.n_tokens, ms=number(p.ms, 1),
                                                              speed=number(p.tokens_per_s)) + self._estimate(p.n_tokens)
        if len(steps) > 1:
            forward = np.array([s.forward_ms for s in steps[1:]])  # step 1 was drawn from the prefill's logits
            sample = np.array([s.sample_ms for s in steps])
            per_token = float(np.mean(forward + sample[1:]))
            # a verify pass's time is on its first step, 0 on the others: only the mean is a cost per token
            average, how = (np.mean, translate("Timing", "mean")) if self.counters else \
                (np.median, translate("Timing", "median"))
            text += "<br>" + translate(
                "Timing", "<b>Decode</b>: {n} tokens, <span style='color:{forward_colour}'>forward</span> {forward} ms + "
                "<span style='color:{sample_colour}'>sampling</span> {sample} ms ({how}) = <b>{speed} tokens/s</b>").format(
                n=len(steps), forward_colour=t.final, forward=number(average(forward), 1), sample_colour=t.warning,
                sample=number(np.median(sample), 2), how=how, speed=number(1000 / per_token, 1))
        if c.stopped is not None and c.stopped.decode_tokens_per_s > 0:
            text += " · " + translate("Timing", "session: {speed} tokens/s").format(
                speed=number(c.stopped.decode_tokens_per_s, 1))
        return (text + self._cache_text() + self._counter_text() + self._shown_text(shown, reread, median)
                + f"<br><span style='color:{t.muted}'>"
                + translate("Timing", "Below the steps: every pass to scale in ms (hatched: a re-read)") + "</span>")

    def _estimate(self, n: int) -> str:
        """n positions read in one pass, against n decode steps one after another (measured median)."""
        if self.decode_ms is None:
            return ""
        return translate("Timing", "; {n} × one decode step would have taken ≈ <b>{total} ms</b> <span "
                         "style='color:{colour}'>(estimate: × the median cached step measured, {ms} ms)</span>").format(
            n=n, total=number(n * self.decode_ms), colour=self.appearance.theme.muted, ms=number(self.decode_ms, 1))

    def _cache_text(self) -> str:
        """The two series' legend, once this prompt has steps in both modes; or that the cache is off."""
        c, t = self.intents, self.appearance.theme
        if self.series.shown:
            return "<br>" + self.series.words(c.info, c.prefill_event.n_tokens + len(c.steps))
        if not c.kv_cache:
            return "<br>" + translate("Timing", "<b style='color:{colour}'>KV cache off</b>: each step re-reads the whole "
                                      "prefix; turn it on and step the same prompt to compare").format(colour=t.chosen)
        return ""

    def _clear_steps(self) -> None:
        for key in STEP_BARS:
            self.step_chart.set_bars(key, bar_set("", [], [], [], []))

    def _draw_steps(self, shown) -> None:
        """Step k's bar centred on x = k: its forward pass, its draw on top; the x axis holds the run's length."""
        c, t = self.intents, self.appearance.theme
        steps = c.steps
        forward = np.array([s.forward_ms for s in steps])
        sample = np.array([s.sample_ms for s in steps])
        series_top = self.series.update(c.history.log)
        top = snug_ceiling(robust_top(forward[1:] + sample[1:], series_top, c.prefill_event.ms) * 1.1)
        # A long prefill would flatten the decode bars: its bar (step 1's) is cut at the top.
        x = np.arange(1, len(steps) + 1, dtype=float)
        span = step_top(len(steps), 16, c.run_horizon) + 0.4
        width = touching_width(self.step_chart.data_size().width() / span)
        left = x - width / 2
        shown_forward = np.minimum(forward, top * 0.97)
        shown_forward[[s.verified_by > 0 for s in steps]] = 0.0  # drawn as the pass's block instead
        chart = self.step_chart
        if shown is not None and shown.step is not None:
            band = max(width, 0.95)
            chart.set_bars("selected", bar_set(t.selected, shown.index - band / 2, 0.0, band, top, alpha=50))
        else:
            chart.set_bars("selected", bar_set(t.selected, [], [], [], []))
        # step 1's pass is the prefill's (its colour), then cached steps and steps without the cache
        modes = np.array([0 if i == 0 else 2 if cache_off(s) else 1 for i, s in enumerate(steps)], dtype=int)
        for mode, (key, fill) in enumerate(zip(FORWARD, (t.accent, t.final, t.chosen))):
            at = modes == mode
            outline = fill if width >= 1.0 else None  # touching: outlined in their colour, each at least a pixel
            chart.set_bars(key, bar_set(fill, left[at], 0.0, width, shown_forward[at], outline=outline))
        chart.set_bars("sample", bar_set(t.warning, left, shown_forward, width, sample))
        self._verify_blocks(top)
        chart.set_range(x=(0.3, span + 0.3), y=(0, top))
        if self.series.shown:
            chart.setToolTip(self.series.formula_text(c.info, c.prefill_event.n_tokens + len(steps)))

    def _verify_blocks(self, top: float) -> None:
        """One bar per verify pass of the path, spanning the steps it decided, as high as its one pass."""
        steps = self.intents.steps
        lefts, heights, widths = [], [], []
        for step in steps:
            if step.verified_by and step.index == step.verified_by:
                n = sum(1 for s in steps[step.index - 1:] if s.verified_by == step.index)
                widths.append(n - 0.3)
                lefts.append(step.index - 0.35)  # centred on the steps it decided: (index + (n - 1) / 2) - width / 2
                heights.append(min(step.forward_ms, top * 0.97))
        kept = self.appearance.theme.kept
        self.step_chart.set_bars("verify", bar_set(kept, lefts, 0.0, widths, heights, alpha=150, outline=kept,
                                                   outline_width=1.5))

    def _counter_text(self) -> str:
        k = self.counters
        if k is None:
            return ""
        green = self.appearance.theme.kept
        passes = k.verify_passes
        return "<br>" + translate("Timing", "<b style='color:{colour}'>Speculation</b> (%n verify pass(es), green): "
                                  "drafts accepted <b>{accepted}/{drafted} = {rate}</b> · <b>{per_pass} tokens per "
                                  "forward pass</b>", None, passes).format(
            colour=green, accepted=k.accepted, drafted=k.drafted, rate=f"{k.acceptance:.0%}",
            per_pass=number(k.tokens_per_pass, 2))

    def _shown_text(self, shown, reread, median: float | None) -> str:
        """The highlighted step's own times, and the last branch switch's re-read (`median`: this prompt's median
        plain cached step, what a verify pass is priced in when the engine sent no step time)."""
        t = self.appearance.theme
        text = ""
        if shown is not None and shown.step is not None:
            s = shown.step
            source = (translate("Timing", "the prefill's last position") if s.index == 1
                      else translate("Timing", "one new token attending to {n} positions").format(n=s.context_tokens - 1))
            draw = (translate("Timing", "no draw: you chose the token") if s.forced
                    else translate("Timing", "sampling {ms} ms").format(ms=number(s.sample_ms, 2)))
            heading = translate("Timing", "<b style='color:{colour}'>Step {index}</b>").format(colour=t.selected,
                                                                                              index=s.index)
            verify = pass_of(self.intents.history, s)
            if verify is not None:
                v = verify.verified
                source = translate("Timing", "{role} of the verify pass at step {index}: one forward pass of {ms} ms "
                                   "over {positions} positions for {emitted} tokens").format(
                    role=translate("Timing", ROLES[verify.role(s)]), index=v.index, ms=number(v.forward_ms, 1),
                    positions=v.positions, emitted=v.emitted)
                cost = verify_cost(v, median)
                if cost is not None:
                    source += translate("Timing", " = {cost} one-token steps of {step_ms} ms").format(
                        cost=f"{cost[0]:.1f}", step_ms=f"{cost[1]:.1f}")
                why = choice_text(v)
                text += f"<br>{heading}: {source} · {draw}" + (f"<br>{why}" if why else "")
            else:
                text += "<br>" + translate("Timing", "{heading}: forward {ms} ms ({source}) · {draw}").format(
                    heading=heading, ms=number(s.forward_ms, 1), source=source, draw=draw)
        if reread is not None and reread.reread_tokens > 0:
            text += "<br>" + translate("Timing", "<b style='color:{colour}'>Branch switch</b>: re-read {n} tokens in one "
                                       "parallel pass ({ms} ms), as a prefill does").format(
                colour=t.accent, n=reread.reread_tokens, ms=number(reread.ms, 1))
        elif reread is not None:
            text += "<br>" + translate("Timing", "<b>Branch switch</b>: its cache was still held, nothing re-read")
        return text
