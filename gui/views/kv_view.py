"""KV cache: the keys and values kept for every past position, how they grow, and what they cost.

Shows the formula with this model's numbers, used vs allocated bytes against the context length, the
per-layer K and V bytes, and the cache at the full context window and for N concurrent requests next to
the weights, so that the context window (a capacity in tokens), the parameters (the model's fixed
weights) and the KV cache (this request's notes, growing per token) read as three different things.
At step k (the newest or a past one) every figure is the cache as it stood after step k: the prompt and k
tokens, step k's own included (its K and V are written by the next pass), the convention of every view
(Context greys the tokens after k, Explain counts the same bytes); with a past step shown, the later growth
stays on the curve, greyed. For a model whose layers attend through a sliding window (Mistral, Gemma 2 and
3), it says which do and what the cache would hold if it kept only their windows.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QSplitter, QVBoxLayout, QWidget

from gui.state.i18n import number, translate
from gui.state.intents import Intents
from gui.theme import Appearance
from gui.views.base import View
from gui.state.format import fmt_bytes, fmt_params
from gui.widgets.bar_chart import BarChart, ChartText, bar_set, series
from gui.widgets.plotting import covering, nice_ceiling
from gui.widgets.wrap_label import WrapLabel


def window_note(info, n_ctx: int) -> str:
    """Which layers attend through a sliding window (ModelInfo.layer_windows) and what a cache that dropped
    the positions they no longer read would hold, now and at the full context; "" when no layer has one.
    This cache keeps every position of every layer (a rewind may need them), so the difference is a saving
    it could make, not one it makes."""
    windows = info.layer_windows
    windowed = [i for i, w in enumerate(windows) if w]
    if not windowed:
        return ""
    per_layer_token = info.kv_bytes_per_token / max(info.n_layers, 1)  # K and V of one position in one layer

    def held(n: int) -> float:
        return per_layer_token * sum(min(w, n) if w else n for w in windows)

    sizes = sorted({windows[i] for i in windowed})
    kind = translate("KV", "a {n}-token window").format(n=number(sizes[0])) if len(sizes) == 1 else \
        translate("KV", "windows of {sizes} tokens").format(sizes=", ".join(number(w) for w in sizes))
    whole = [i for i, w in enumerate(windows) if not w]  # the global layers
    n_windowed, n_whole = len(windowed), len(whole)
    if len(windowed) <= 6:
        which = translate("KV", "layer(s) {list}", None, n_windowed).format(list=", ".join(map(str, windowed)))
    elif whole and len(whole) <= 6:
        which = translate("KV", "all but layer(s) {list}", None, n_whole).format(list=", ".join(map(str, whole)))
    else:
        which = translate("KV", "layers {list}, …, {last}").format(list=", ".join(map(str, windowed[:3])),
                                                                  last=windowed[-1])
    full = info.context_length
    now = translate("KV", "; now {held} instead of {all}").format(
        held=fmt_bytes(held(n_ctx)), all=fmt_bytes(per_layer_token * info.n_layers * n_ctx)) if n_ctx else ""
    return translate("KV", "<b>{n} of {layers} layers keep {kind}</b> ({which}): at full context ({full} tokens) the "
                     "cache would hold <b>{held}</b> instead of {all}{now}. This cache keeps every position (a rewind "
                     "may need them); those layers read only their window<br>").format(
        n=len(windowed), layers=info.n_layers, kind=kind, which=which, full=number(full), held=fmt_bytes(held(full)),
        all=fmt_bytes(per_layer_token * info.n_layers * full), now=now)


class KvView(View):
    COSTLY = True  # takes turns with the other plot views during Run

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.formula = WrapLabel(translate("KV", "Load a model to see its KV cache."))
        self.formula.setTextFormat(Qt.RichText)
        self.formula.setTextInteractionFlags(Qt.TextSelectableByMouse)

        # painted charts (bar_chart.py): as pyqtgraph plots they cost a Run's frame a graphics scene each
        self.growth = BarChart(appearance)  # series "used", "allocated" and "later" (after a past step shown)
        self.layers = BarChart(appearance)  # titled by retranslate()

        self._make_compare(appearance)

        # The paragraphs over and under the charts take the height their lines need (minimumSizeHint): a
        # short dock scrolls instead of drawing a paragraph over a chart; the layer chart takes the rest.
        self.formula.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.formula)
        lv.addWidget(self.layers, 1)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.project_to = QLabel()
        row.addWidget(self.project_to)
        row.addWidget(self.requests)
        row.addStretch(1)
        rv.addLayout(row)
        rv.addWidget(self.compare, 1)
        rv.addWidget(self.projection)
        self.split = split = QSplitter(Qt.Horizontal)
        split.setChildrenCollapsible(False)
        split.splitterMoved.connect(self._paragraphs_changed)
        for w in (left, self.growth, right):
            split.addWidget(w)
        split.setSizes([330, 260, 320])
        for i, stretch in enumerate((4, 3, 4)):  # the text column keeps its share as the dock widens
            split.setStretchFactor(i, stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(split, 1)
        self._key = None
        self._paragraphs_height = 0  # what minimumSizeHint last counted for the paragraphs
        self.shown_used_bytes = 0  # what the view shows now: the cache of the shown step
        self.shown_positions = 0
        self.retranslate()

    def retranslate(self) -> None:
        self.growth.set_bottom_label(translate("KV", "tokens in the context"))
        self.growth.set_left_label("MB")
        self.layers.set_title(translate("KV", "each layer's K (dark) and V (light), KB"))
        self.layers.set_bottom_label(translate("KV", "layer"))
        self.compare.set_title(translate("KV", "weights vs KV cache (log scale)"))
        self.project_to.setText(translate("KV", "Project to"))
        self.requests.setSuffix(translate("KV", " concurrent requests"))
        self.requests.setToolTip(translate("KV", "How many requests a server holds at once, each with its own KV cache"))
        if self.intents.info is None:
            self.formula.setText(translate("KV", "Load a model to see its KV cache."))
        self.restyle()  # the plots' titles in their colours and size

    def _make_compare(self, appearance: Appearance) -> None:
        """Weights vs the KV cache now, at a full window, and for N requests at once."""
        self.compare = BarChart(appearance, rows=True)  # titled by retranslate(); x: log10 of the bytes
        self.compare.set_x_ticks([(3, "1 KB"), (6, "1 MB"), (9, "1 GB"), (12, "1 TB")])
        self.requests = QSpinBox()
        self.requests.setRange(1, 4096)
        self.requests.setValue(16)
        self.requests.valueChanged.connect(self._force_refresh)
        self.projection = QLabel()
        self.projection.setWordWrap(True)
        self.projection.setTextFormat(Qt.RichText)

    def minimumSizeHint(self) -> QSize:
        """Each column's paragraph at its wrapped height plus its chart's minimum: the dock's scroll area
        honours a minimum size (not a height for a width), and a paragraph squeezed below its lines was
        drawn over the chart under it (the "weights vs KV cache" chart in presentation mode)."""
        hint = super().minimumSizeHint()
        self._paragraphs_height = self._paragraphs()
        margins = self.layout().contentsMargins()
        return QSize(hint.width(), max(hint.height(), self._paragraphs_height + margins.top() + margins.bottom()))

    def _paragraphs(self) -> int:
        """The taller column's need: its paragraph at its width, its chart's minimum, the spacing between."""
        def wrapped(label: QLabel) -> int:
            return label.heightForWidth(max(label.width(), 120)) if label.text() else 0
        spacing = 6
        left = wrapped(self.formula) + self.layers.minimumHeight() + spacing
        row = max(self.requests.sizeHint().height(), self.requests.minimumSizeHint().height())
        right = row + self.compare.minimumHeight() + wrapped(self.projection) + 2 * spacing
        return max(left, right, self.growth.minimumHeight())

    def _paragraphs_changed(self, *_) -> None:
        if self._paragraphs() != self._paragraphs_height:
            self.updateGeometry()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._paragraphs_changed()

    def restyle(self) -> None:
        a, t = self.appearance, self.appearance.theme
        for plot in (self.growth, self.layers, self.compare):
            plot.setMinimumHeight(int(90 * a.scale))  # room for the axes under bigger type
            plot.update()  # the painted charts read the theme as they paint
        self.updateGeometry()
        # The key is the title (a legend inside the plot would sit on the allocated line).
        self.growth.set_title(
            translate("KV", "<span style='color:{used_colour}'>━ used</span> and <span style='color:{allocated_colour}'>"
                      "╌ allocated</span> vs context").format(used_colour=t.final, allocated_colour=t.warning))
        self._key = None

    def _force_refresh(self) -> None:
        self._key = None
        self.refresh()

    def refresh(self) -> None:
        c = self.intents
        info = c.info
        if info is None:
            return
        points = self._points()
        past = self.past_step()
        # Step k, past or newest, is the cache after it: the prompt and k tokens (points[k]), as when it was the newest
        upto = past.index + 1 if past is not None else len(points)
        key = (info.weights_fingerprint, len(points), self.requests.value(), points[-1] if points else None, upto,
               c.run_horizon)
        if key == self._key:
            return
        self._key = key
        n_ctx, used, allocated = points[upto - 1] if points else (0, 0, 0)
        self.shown_used_bytes, self.shown_positions = used, n_ctx
        self._formula(info, n_ctx, used, allocated, past)
        self._growth(points, upto)
        t = self.appearance.theme
        layers = np.arange(info.n_layers, dtype=float)
        per_tensor = used / (2 * info.n_layers) if info.n_layers else 0
        kb = per_tensor / 1e3
        self.layers.set_bars("K", bar_set(t.final, layers - 0.4, 0.0, 0.8, np.full(info.n_layers, kb)))
        self.layers.set_bars("V", bar_set(t.temp, layers - 0.4, kb, 0.8, np.full(info.n_layers, kb)))
        self.layers.set_range(x=(-1, info.n_layers), y=(0, nice_ceiling(max(2 * kb, 1) * 1.1)))
        self._compare(info, used, translate("KV", "KV now") if past is None else
                      translate("KV", "KV at step {index}").format(index=past.index))
        self._paragraphs_changed()  # new text may wrap to more lines

    def _formula(self, info, n_ctx: int, used: int, allocated: int, past) -> None:
        t = self.appearance.theme
        if info.dtype == "remote":  # sources/remote.py: the cache lives on the server
            self.formula.setText(self._remote_note(n_ctx, past))
            return
        per_token = info.kv_bytes_per_token
        old = max(n_ctx - 1, 0)
        when = translate("KV", "<b>now</b>") if past is None else \
            translate("KV", "<b style='color:{colour}'>at step {index}</b>").format(colour=t.selected, index=past.index)
        text = translate("KV", "<b>{per_token} bytes per token</b> = 2 (K and V) × {layers} layers × {kv_heads} KV heads "
                         "× {head_dim} dims × {element} B ({dtype})<br>{when} {n} tokens → <b>{used}</b> used of "
                         "{allocated} allocated<br>").format(
            per_token=number(per_token), layers=info.n_layers, kv_heads=info.n_kv_heads, head_dim=info.head_dim,
            element=info.kv_element_bytes, dtype=info.kv_dtype, when=when, n=number(n_ctx), used=fmt_bytes(used),
            allocated=fmt_bytes(allocated))
        text += window_note(info, n_ctx)
        if past is not None:
            later = len(self.intents.steps) - past.index
            text += translate("KV", "the cache after step {index} (the prompt and {index} tokens, its own included); the "
                              "%n later position(s) (greyed on the curve) came after it<br>", None, later).format(
                index=past.index)
        if not self.intents.kv_cache:  # decoding without the cache (Ctrl+K): nothing is kept
            text += translate("KV", "<b style='color:{colour}'>KV cache off</b>: nothing is kept between steps (0 B "
                              "used); each step projects K and V of all {n} positions again in every layer, so its "
                              "forward pass grows with the context (Timing shows both modes)").format(
                colour=t.chosen, n=number(n_ctx))
        elif past is None and not self.intents.steps:  # right after the prefill: it projected them all
            text += translate("KV", "the prefill projected all {n} positions in one pass; <span style='color:{colour}'>"
                              "saves</span> the next step re-projecting them: it projects only its new token and reads "
                              "these {n} from the cache ({used}, +{per_token} per token)").format(
                n=number(n_ctx), colour=t.kept, used=fmt_bytes(used), per_token=fmt_bytes(per_token))
        else:
            text += (translate("KV", "<span style='color:{saves_colour}'>saves</span> re-projecting the {old} older "
                               "positions in every layer; <span style='color:{costs_colour}'>costs</span> memory, and "
                               "each step reads all of it ({used} now, +{per_token} per token)") if past is None else
                     translate("KV", "<span style='color:{saves_colour}'>saves</span> re-projecting the {old} older "
                               "positions in every layer; <span style='color:{costs_colour}'>costs</span> memory, and "
                               "each step reads all of it ({used} then, +{per_token} per token)")).format(
                saves_colour=t.kept, old=number(old), costs_colour=t.chosen, used=fmt_bytes(used),
                per_token=fmt_bytes(per_token))
        self.formula.setText(text)

    def _remote_note(self, n_ctx: int, past) -> str:
        """A server's cache: its bytes are not known here; what the server said with the step shown."""
        shown = past or (self.intents.steps[-1] if self.intents.steps else None)
        note = shown.dist.server if shown is not None else None
        said = []
        if note is not None and note.cached_tokens is not None:
            context = shown.context_tokens - 1  # what was sent for the step shown
            said.append(translate("KV", "it took {n} of the context's tokens from its prefix cache").format(
                n=number(note.cached_tokens)) + (
                translate("KV", " and read all {n} again: <b>no cache at work</b> (its prefix cache keeps whole blocks "
                          "only — vLLM: 16 tokens on a GPU, 128 on a CPU — or is off)").format(n=number(context))
                if note.cached_tokens == 0 and shown.index > 1 else ""))
        if note is not None and note.kv_usage is not None:
            said.append(translate("KV", "its KV cache is {percent} % full (all requests)").format(
                percent=number(note.kv_usage * 100, 1)))
        return (translate("KV", "{n} tokens of context · <b>KV bytes not known</b>: the cache is the server's ({server}), "
                          "which does not report its size").format(n=number(n_ctx),
                                                                   server=self.intents.info.device.split(" (")[0])
                + ("<br>" + translate("KV", "at the step shown {said}").format(said="; ".join(said)) if said else ""))

    def _growth(self, points: list[tuple[int, int, int]], upto: int) -> None:
        """Used and allocated bytes after prefill and each step; after a shown past step, greyed."""
        a, t = self.appearance, self.appearance.theme
        if not points:
            for key, colour in (("used", t.final), ("allocated", t.warning), ("later", t.muted)):
                self.growth.set_series(key, series(colour, [], []))
            return
        x = np.array([p[0] for p in points], dtype=float)
        used_mb = np.array([p[1] for p in points]) / 1e6
        self.growth.set_series("used", series(t.final, x[:upto], used_mb[:upto], 2.5 * a.scale, dots=5 * a.scale))
        self.growth.set_series("allocated", series(t.warning, x, np.array([p[2] for p in points]) / 1e6, 1.5 * a.scale,
                                                   dashed=True))
        later = slice(upto - 1, None) if upto < len(points) else slice(0, 0)
        self.growth.set_series("later", series(t.muted, x[later], used_mb[later], 2 * a.scale, alpha=110))
        top = max(p[2] for p in points) / 1e6
        horizon = self.intents.run_horizon  # steps; the axis is in context tokens, the window at most
        end = None if horizon is None else min(x[0] + horizon, self.intents.info.context_length)
        self.growth.set_range(x=covering(float(x[0]), float(x[-1]), 16, end), y=(0, nice_ceiling(top * 1.15)))

    def _points(self) -> list[tuple[int, int, int]]:
        """(context tokens, used bytes, allocated bytes) after prefill and after every step."""
        c = self.intents
        per_token = c.info.kv_bytes_per_token
        if c.prefill_event is None:
            return []
        p = c.prefill_event
        points = [(p.n_tokens, p.kv_used_bytes, p.kv_allocated_bytes)]
        for s in c.steps:
            # a step's event reports the cache that produced its distribution; the token it drew adds one more
            points.append((s.context_tokens, s.kv_used_bytes + per_token, max(s.kv_allocated_bytes,
                                                                              s.kv_used_bytes + per_token)))
        return points

    def _compare(self, info, used: int, used_name: str) -> None:
        t = self.appearance.theme
        n = self.requests.value()
        full = info.kv_bytes_per_token * info.context_length
        if info.dtype == "remote":  # no byte figures from a server: no bars that would read as 1 B
            self.compare.clear_bars()
            self.compare.set_labels([])
            self.projection.setText(translate("KV", "<b>{params}</b> on the server · <b>context window {n} tokens</b> · "
                                              "the sizes of its weights and KV cache are not known here").format(
                params=fmt_params(info.n_params), n=number(info.context_length)))
            return
        rows = [(translate("KV", "weights"), info.weights_bytes, t.accent), (used_name, max(used, 1), t.final),
                (translate("KV", "KV at full window"), full, t.warning),
                (translate("KV", "KV × {n} at full window").format(n=n), full * n, t.chosen)]
        values = np.array([max(v, 1) for _, v, _ in rows], dtype=float)
        for i, (_, _, col) in enumerate(rows):  # a bar a row, each in its colour
            self.compare.set_bars(str(i), bar_set(col, 0.0, i - 0.3, np.log10(values[i]), 0.6))
        self.compare.set_y_ticks([(i, name) for i, (name, _, _) in enumerate(rows)])
        top = np.log10(values.max())
        self.compare.set_range(x=(0, float(np.ceil(top + 2.4))), y=(-0.6, 3.6))
        # the log scale's floor of 1 B is not a size: 0 B
        self.compare.set_labels([ChartText(fmt_bytes(rows[i][1] if i != 1 else used),
                                           round(float(np.log10(values[i])) + 0.05, 2), i) for i in range(4)])
        self.projection.setText(translate(
            "KV", "<b>{params}</b>: fixed weights shared by all requests · <b>context window {n} tokens</b>: what one "
            "request may hold · <b>KV cache</b>: each request's own notes, {full} when its window is full").format(
            params=fmt_params(info.n_params), n=number(info.context_length), full=fmt_bytes(full)))
