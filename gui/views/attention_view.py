"""Attention: where the queries of the pass behind the shown step looked, for one layer and head.

Step 1's distribution came from the prefill, so for it (and for the pending step right after Prefill) the
view shows the prefill's whole prompt x prompt matrix: every row a query position, every column a key,
all of it computed in ONE parallel pass, with the causal mask above the diagonal drawn as masked. Step
k > 1 came from one decode pass: the new query's single row over every cached position.

Recording runs the explicit (slower) attention path, so the engine records only while this view is
shown. A pass that ran while it was closed is recomputed once on request (one pass on the engine's
scratch cache, nothing in the session changes), so opening the view shows the current step at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QLabel, QPushButton, QStackedWidget, QToolTip, QVBoxLayout
from PySide6.QtGui import QCursor, QFontMetricsF

from inference.attention import PromptAttention

from gui.state.i18n import translate
from gui.state.intents import Intents
from gui.theme import Appearance
from gui.widgets.attention_plot import AttentionPlot
from gui.views.base import View
from gui.state.format import display, fmt_bytes
from gui.widgets.head_picker import HeadPicker

LABEL_CHARS = 12
ROOMY = 520  # below this height (docked in a row of the window) the words give the matrix their room


@dataclass(frozen=True)
class Source:
    """What the shown step's pass recorded: the prefill's triangle, or a decode pass's row."""

    node: int  # the node whose token the pass fed (0: the prefill)
    prompt: PromptAttention | None = None
    row: np.ndarray | None = None  # (layers, heads, n)

    @property
    def missing(self) -> bool:
        return self.prompt is None and self.row is None


class AttentionView(View):
    COSTLY = True  # a plot: several ms per redraw
    cells_selected = Signal(list)  # context positions [query, key] of the clicked cell ([] to clear)

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.picker = HeadPicker(appearance)
        self.picker.changed.connect(self._force)
        self.contrast = QCheckBox()
        self.contrast.setChecked(True)
        self.picker.row.addWidget(self.contrast)
        fit = QPushButton()
        self.fit_button = fit
        self.picker.row.addWidget(fit)
        self.picker.row.addStretch(1)
        self.plot = AttentionPlot(appearance)
        fit.clicked.connect(self.plot.fit)
        self.contrast.toggled.connect(self.plot.set_contrast)
        self.plot.hovered.connect(self._hover)
        self.plot.clicked.connect(self._select)
        self.placeholder = QLabel()
        self.placeholder.setObjectName("muted")
        self.placeholder.setWordWrap(True)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.plot)
        self.hover_text = QLabel(" ")
        self.caption = QLabel()
        self.caption.setObjectName("muted")
        self.caption.setWordWrap(True)
        self.caption.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self.picker)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.hover_text)
        layout.addWidget(self.caption)
        intents.model_changed.connect(self._model)
        intents.state_changed.connect(self._retry)
        self._key = None
        self.source: Source | None = None
        self.rows: list[int] = []  # the context position of each shown row
        self.labels: list[str] = []  # every context position's token text
        self._model()
        self.retranslate()

    def retranslate(self) -> None:
        self.contrast.setText(translate("Attention", "√ colours"))
        self.contrast.setToolTip(translate("Attention", "Colour by the square root of the weight: small weights beside a "
                                           "large one (often the first position) stay visible. The colour bar shows "
                                           "the weights."))
        self.fit_button.setText(translate("Attention", "Fit"))
        self.fit_button.setToolTip(translate("Attention", "Show the whole matrix again (the wheel zooms, a drag pans)"))
        self.fit_button.setMinimumWidth(self.fit_button.sizeHint().width())  # never squeezed to "Fi"
        self.picker.retranslate()
        self._key = None

    @property
    def grid(self) -> np.ndarray | None:
        return self.plot.grid if self.stack.currentWidget() is self.plot else None

    def heightForWidth(self, width: int) -> int:
        """The least height at this width: the dock's scroll area sizes a view with wrapped text to its height
        for the viewport's width, and the preferred one (the plot's) scrolled the matrix's key labels out
        of a docked view."""
        layout = self.layout()
        return layout.totalMinimumHeightForWidth(width) if layout is not None else super().heightForWidth(width)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_words()

    def _fit_words(self) -> None:
        """Docked in a row of the window (short): the caption keeps two lines, the whole of it in its tooltip,
        and the head picker only its links, so that the matrix keeps its axes; floated or tall, all of it."""
        short = self.height() < ROOMY * self.appearance.scale
        lines = QFontMetricsF(self.caption.font()).lineSpacing()
        self.caption.setMaximumHeight(int(2 * lines + 2) if short else 16777215)
        self.caption.setToolTip(self.caption.text() if short else "")
        self.picker.set_brief(short)

    def restyle(self) -> None:
        self.plot.restyle()
        self.picker.restyle()
        self._fit_words()
        self._key = None

    def _model(self) -> None:
        info = self.intents.info
        self.picker.set_model(info.n_layers if info else 0, info.n_heads if info else 0,
                              info.n_kv_heads if info else 0)

    def _retry(self) -> None:
        """A recomputation that could not be asked for while the engine was busy is asked for now."""
        if self._key is None and self.isVisible():
            self.refresh()

    def _force(self) -> None:
        self._key = None
        self.refresh()

    def find_source(self) -> Source | None:
        """The attention of the pass behind the shown step: recorded with it, or recomputed on request."""
        c = self.intents
        shown = c.shown()
        if shown is None or c.prefill_event is None:
            return None
        node = shown.step.parent if shown.step is not None else c.history.current.id
        again = c.history.attention.get(node)
        if node == 0:
            prompt = c.prefill_event.prompt_attention or (again.prompt if again is not None else None)
            return Source(0, prompt=prompt)
        if shown.step is not None:
            row = shown.step.attention
        else:
            row = c.pending.attention if c.pending is not None and c.pending.index == shown.index else None
        return Source(node, row=row if row is not None else (again.attention if again is not None else None))

    def refresh(self) -> None:
        if self.tabbed_away():  # behind another tab: nothing recorded, nothing recomputed until raised
            return
        c = self.intents
        source = self.find_source()
        shown = c.shown()
        key = (c.epoch, shown.index if shown else None, id(shown.step) if shown else None,
               id(source.prompt if source else None), id(source.row if source else None),
               source.node if source else None, self.picker.current, len(c.steps))
        if key == self._key:
            return
        self._key = key
        self.source = source
        if source is None or source.missing:
            self._placeholder(source)
            return
        self.labels = [display(t.piece)[:LABEL_CHARS] for t in c.prefill_event.tokens] + \
                      [display(s.token.piece)[:LABEL_CHARS] for s in c.steps]
        if source.prompt is not None:
            self._draw_prefill(source.prompt)
        else:
            self._draw_row(source.row)
        self.stack.setCurrentWidget(self.plot)
        self.hover_text.setText(" ")  # it described the cell under the mouse in the previous picture

    def _placeholder(self, source: Source | None) -> None:
        c = self.intents
        self.plot.clear_grid()
        if source is None:
            text = translate("Attention", "Prefill a prompt (Ctrl+P): this view then shows the prompt's attention, "
                             "every query position against every key, for the layer and head chosen above.")
        elif c.request_attention(source.node):  # once per node; the answer brings a redraw
            text = translate("Attention", "Computing this pass's attention: it ran while this view was closed, so it "
                             "was not recorded. The engine re-reads its positions once on a scratch cache (nothing "
                             "else changes).")
        else:  # a step or a run is on its way: ask when it is done (state_changed)
            self._key = None
            text = translate("Attention", "This pass ran while this view was closed, so its attention was not "
                             "recorded. It is recomputed once the engine is free; steps taken from now on are "
                             "recorded as they run.")
        self.placeholder.setText(text)
        self.stack.setCurrentWidget(self.placeholder)
        self.caption.setText("")
        self._fit_words()

    def _draw_prefill(self, prompt: PromptAttention) -> None:
        layer, head = self.picker.current
        grid = prompt.matrix(layer, head)
        P = prompt.n_positions
        self.rows = list(range(P))
        self.plot.show_grid(grid, self.labels[:P], self.labels[:P])
        capped = (translate("Attention", " Showing the first {P} of the {n} prompt positions: the prefill's triangles "
                            "of every layer and head are kept as float16 up to {size}.").format(
            P=P, n=prompt.n_prompt, size=fmt_bytes(prompt.packed.nbytes)) if prompt.capped else "")
        self.caption.setText(translate(
            "Attention", "Prefill, layer {layer}, {head}: all {P}×{P} weights came out of ONE parallel pass over the "
            "prompt. Each row is a query position, each column a key it may read; a row sums to 1. Above the diagonal "
            "(hatched) is the causal mask: no position sees a later one.").format(
            layer=layer + 1, head=self.picker.head_name(head), P=P) + capped)
        self._fit_words()

    def _draw_row(self, row: np.ndarray) -> None:
        layer, head = self.picker.current
        weights = row[layer].mean(axis=0) if head is None else row[layer, head]  # (n,)
        n = weights.shape[0]
        query = n - 1
        self.rows = [query]
        self.plot.show_grid(weights[None, :].astype(np.float32), [self.labels[query]], self.labels[:n])
        shown = self.intents.shown()
        self.caption.setText(translate(
            "Attention", "Decode pass for step {index}, layer {layer}, {head}: ONE new query, the token {token} at "
            "position {position}, reads all {n} cached positions (its own K/V just joined the cache). One row: the "
            "earlier rows are not recomputed, their K and V wait in the KV cache.").format(
            index=shown.index, layer=layer + 1, head=self.picker.head_name(head), token=repr(self.labels[query]),
            position=query, n=n))
        self._fit_words()

    def describe(self, r: int, c: int) -> str:
        """query token, key token and weight of a cell."""
        layer, head = self.picker.current
        q = self.rows[r]
        weight = self.plot.grid[r, c]
        value = translate("Attention", "masked (causal mask: a later position)") if np.isnan(weight) else \
            translate("Attention", "weight {w}").format(w=f"{weight:.4f}")
        return translate("Attention", "query {q} {q_token} → key {k} {k_token}: {value} · layer {layer}, {head}").format(
            q=q, q_token=repr(self.labels[q]), k=c, k_token=repr(self.labels[c]), value=value, layer=layer + 1,
            head=self.picker.head_name(head))

    def _hover(self, r: int, c: int) -> None:
        if r < 0 or self.plot.grid is None:
            self.hover_text.setText(" ")
            return
        text = self.describe(r, c)
        self.hover_text.setText(text)
        QToolTip.showText(QCursor.pos(), text, self.plot)

    def _select(self, r: int, c: int) -> None:
        if r < 0 or self.plot.grid is None:
            return
        self.plot.mark(r, c)
        self.cells_selected.emit([self.rows[r], c])
