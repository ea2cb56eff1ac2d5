"""Serving: many requests at once (issue 39), as the engine's scheduler ran them on this model.

- the timeline: a row per request over the passes' time (waiting, a prompt chunk, a decode row);
- the block pool: the paged KV cache's blocks, each in its request's colour, a shared prefix block with its
  reference count, free blocks grey, the unused tail of each request's last block pale;
- the numbers: tokens/s of the batch and of each request, time to first token and per output token, blocks in
  use, the largest batch the pool holds at this context length;
- throughput against the batch size, measured here (Measure), next to the weights-read floor.
A click on a request (its row, one of its blocks, its line in the table) shows its own steps in the other views.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QPushButton, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from gui.state.format import fmt_bytes, stop_reason
from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.state.intents import Intents
from gui.state.serving import DECODE, FINISHED, IDLE, PREFILL, WAITING, Serving, Track, waiting_reason
from gui.theme import Appearance, request_colour
from gui.views.base import View
from gui.widgets.plotting import colour, make_plot, set_data, style_plot, titled
from gui.widgets.serving_canvas import BlockGrid, TimelineCanvas
from gui.widgets.wrap_label import WrapLabel

def intro() -> str:
    return translate("Serving", "Serve several requests at once (Generation → Serve several requests…): the "
                     "scheduler's steps, the KV cache's blocks and the numbers show here.")


# The table's columns (its header's tooltips say the abbreviated ones in full)
COLUMNS = (QT_TRANSLATE_NOOP("Serving", "request"), QT_TRANSLATE_NOOP("Serving", "state"),
           QT_TRANSLATE_NOOP("Serving", "prompt"), QT_TRANSLATE_NOOP("Serving", "shared"),
           QT_TRANSLATE_NOOP("Serving", "tokens"), QT_TRANSLATE_NOOP("Serving", "tok/s"),
           QT_TRANSLATE_NOOP("Serving", "TTFT ms"), QT_TRANSLATE_NOOP("Serving", "TPOT ms"),
           QT_TRANSLATE_NOOP("Serving", "text"))
COLUMN_TIPS = (QT_TRANSLATE_NOOP("Serving", "The request's number (its colour in the timeline and the block pool)"),
               QT_TRANSLATE_NOOP("Serving", "What the request is doing at the newest scheduler step"),
               QT_TRANSLATE_NOOP("Serving", "Tokens of its prompt"),
               QT_TRANSLATE_NOOP("Serving", "Prompt tokens taken from blocks another request had already computed"),
               QT_TRANSLATE_NOOP("Serving", "Tokens generated"),
               QT_TRANSLATE_NOOP("Serving", "Its tokens per second, from its first pass to its last step"),
               QT_TRANSLATE_NOOP("Serving", "Time to first token, from its arrival (ms)"),
               QT_TRANSLATE_NOOP("Serving", "Time per output token after the first (ms)"),
               QT_TRANSLATE_NOOP("Serving", "What it wrote"))
STATES = {WAITING: QT_TRANSLATE_NOOP("Serving", "waiting"), PREFILL: QT_TRANSLATE_NOOP("Serving", "reading prompt"),
          DECODE: QT_TRANSLATE_NOOP("Serving", "decoding"), IDLE: QT_TRANSLATE_NOOP("Serving", "running"),
          FINISHED: QT_TRANSLATE_NOOP("Serving", "finished"), "absent": QT_TRANSLATE_NOOP("Serving", "not arrived")}


def state_of(track: Track) -> str:
    if track.finished:
        return translate("Serving", "finished ({reason})").format(reason=stop_reason(track.done.reason))
    phase = track.phases[-1] if track.phases else "absent"
    if phase == WAITING and track.waiting_for:  # why: the pool, the batch, or a request before it
        return translate("Serving", "waiting: {why}").format(why=waiting_reason(track.waiting_for))
    return translate("Serving", STATES[phase]) if phase in STATES else phase


def blend(a: str, b: str, share_a: float) -> str:
    """The colour `share_a` of the way from `b` to `a` (a pale swatch over the panel, for a legend)."""
    ca, cb = QColor(a), QColor(b)
    mix = [round(x * share_a + y * (1 - share_a)) for x, y in zip(ca.getRgb()[:3], cb.getRgb()[:3])]
    return QColor(*mix).name()


def ms(value: float | None) -> str:
    return "…" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


class FittedLayout(QVBoxLayout):
    """The view's layout, saying it has no height-for-width: its word-wrapped labels would have it, and a scroll
    area then sizes the view to its preferred height (taller than a dock at half the window), hiding the table
    and the curve below the fold; without it the view fits the dock and scrolls only below its minimum."""

    def hasHeightForWidth(self) -> bool:
        return False


class ServingView(View):
    COSTLY = True
    serve_asked = Signal()  # "Serve several requests…": the window opens its dialog

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.numbers = WrapLabel(intro())
        self.numbers.setTextFormat(Qt.RichText)
        self.serve_button = QPushButton()  # its words: retranslate()
        self.serve_button.clicked.connect(self.serve_asked)
        self.stop_button = QPushButton()
        self.stop_button.clicked.connect(intents.stop_serving)
        self.continue_button = QPushButton()
        self.continue_button.clicked.connect(lambda: intents.serve_more())

        self.timeline = TimelineCanvas(appearance)
        self.grid = BlockGrid(appearance)
        self.timeline.request_clicked.connect(self._select_at)
        self.grid.request_clicked.connect(self._select)
        self.timeline_legend = QLabel()
        self.grid_legend = QLabel()
        for label in (self.timeline_legend, self.grid_legend):
            label.setTextFormat(Qt.RichText)
            label.setWordWrap(True)

        self.table = self._request_table()
        self.curve = make_plot(appearance)
        self.curve.getPlotItem().getAxis("bottom").setTicks([[(math.log2(n), str(n)) for n in (1, 2, 4, 8, 16)]])
        self.curve.getPlotItem().setLogMode(x=False, y=True)  # the measured curve's shape beside the floor's line
        self.measured = self.curve.plot([], [], antialias=True)  # x: log2 of the batch size, labelled with it
        self.ceiling = self.curve.plot([], [], antialias=True)
        self.measure_button = QPushButton()
        self.measure_button.clicked.connect(lambda: intents.measure_batch())
        self.curve_note = QLabel()
        self.curve_note.setWordWrap(True)
        self.curve_note.setTextFormat(Qt.RichText)
        self.curve_title = QLabel()
        self.curve_title.setObjectName("muted")
        self._arrange()
        self._table_key = None
        self._curve_key = None
        self.retranslate()
        self.restyle()

    def _request_table(self) -> QTableWidget:
        """One line per request: its state, numbers and colour; a click selects it."""
        table = QTableWidget(0, len(COLUMNS))
        for i in range(len(COLUMNS)):
            table.setHorizontalHeaderItem(i, QTableWidgetItem())
        table.verticalHeader().setVisible(False)
        table.setSelectionBehavior(QAbstractItemView.SelectRows)
        table.setSelectionMode(QAbstractItemView.SingleSelection)
        table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        header = table.horizontalHeader()
        for i in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(i, QHeaderView.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.Stretch)
        table.cellClicked.connect(lambda row, _column: self._select(row))
        return table

    def _arrange(self) -> None:
        """Buttons and numbers on top; the timeline beside the block pool; the table beside the curve."""
        buttons = QHBoxLayout()
        buttons.addWidget(self.serve_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.continue_button)
        buttons.addStretch(1)
        top = QWidget()
        tv = QVBoxLayout(top)
        tv.setContentsMargins(0, 0, 0, 0)
        tv.addLayout(buttons)
        tv.addWidget(self.numbers)
        pictures = QSplitter(Qt.Horizontal)
        pictures.setChildrenCollapsible(False)
        pictures.addWidget(titled(QT_TRANSLATE_NOOP("Plots", "Scheduler steps (x: the passes' time)"), self.timeline,
                                  self.timeline_legend))
        pictures.addWidget(titled(QT_TRANSLATE_NOOP("Plots", "KV cache block pool"), self.grid, self.grid_legend))
        pictures.setSizes([560, 300])
        pictures.setStretchFactor(0, 3)
        pictures.setStretchFactor(1, 2)
        curve_box = QWidget()
        cv = QVBoxLayout(curve_box)
        cv.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.curve_title)
        row.addStretch(1)
        row.addWidget(self.measure_button)
        cv.addLayout(row)
        cv.addWidget(self.curve, 1)
        cv.addWidget(self.curve_note)
        lower = QSplitter(Qt.Horizontal)
        lower.setChildrenCollapsible(False)
        lower.addWidget(self.table)
        lower.addWidget(curve_box)
        lower.setSizes([560, 300])
        lower.setStretchFactor(0, 3)
        lower.setStretchFactor(1, 2)
        self.split = QSplitter(Qt.Vertical)
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(pictures)
        self.split.addWidget(lower)
        self.split.setSizes([300, 200])
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        layout = FittedLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(top)
        layout.addWidget(self.split, 1)

    def retranslate(self) -> None:
        self.serve_button.setText(translate("Serving", "Serve several requests…"))
        self.stop_button.setText(translate("Serving", "Stop"))
        self.stop_button.setToolTip(translate("Serving", "End the serve (or the measurement) after the current "
                                              "scheduler step"))
        self.continue_button.setText(translate("Serving", "Continue"))
        self.continue_button.setToolTip(translate("Serving", "Go on with the requests not finished yet"))
        self.measure_button.setText(translate("Serving", "Measure"))
        self.measure_button.setToolTip(translate("Serving", "Time decode steps of 1, 2, 4, 8 and 16 requests "
                                                 "together on this machine (a few seconds; Stop ends it)"))
        self.curve_title.setText(translate("Serving", "tokens/s vs requests decoding together"))
        for i, (name, tip) in enumerate(zip(COLUMNS, COLUMN_TIPS)):
            item = self.table.horizontalHeaderItem(i)
            item.setText(translate("Serving", name))
            item.setToolTip(translate("Serving", tip))
        self._legends()
        self._table_key = self._curve_key = None

    def _select(self, index: int) -> None:
        """A request chosen in the table or the grid: the grid stays at the step it shows."""
        self.intents.show_request(index, self.intents.serving.grid_step)

    def _select_at(self, index: int, step: int) -> None:
        """A request's row clicked at a scheduler step: the grid shows the pool then, the other views its step."""
        self.intents.show_request(index, None if step < 0 else step)

    def restyle(self) -> None:
        a, t = self.appearance, self.appearance.theme
        style_plot(self.curve, a)
        self.curve.setMinimumHeight(int(90 * a.scale))
        self.timeline.setMinimumHeight(int(90 * a.scale))
        self.measured.setPen(pg.mkPen(t.final, width=2.5 * a.scale))
        self.measured.setSymbol("o")
        self.measured.setSymbolSize(6 * a.scale)
        self.measured.setSymbolBrush(colour(t.final))
        self.measured.setSymbolPen(None)
        self.ceiling.setPen(pg.mkPen(t.warning, width=1.5 * a.scale, style=Qt.DashLine))
        self._legends()
        self._table_key = self._curve_key = None
        self.timeline.update()
        self.grid.update()

    def _legends(self) -> None:
        t = self.appearance.theme
        swatch = "<span style='color:{}'>■</span>"
        c = request_colour(0)
        pale = blend(c, t.panel, 0.25)
        self.timeline_legend.setText(f"<span style='color:{t.muted}'>" + translate(
            "Serving", "{decode} decode · {chunk} prompt chunk · {waiting} waiting · {arrival} arrival · click a row: "
            "its steps in the other views").format(
            decode=swatch.format(c), chunk=f"<span style='color:{c}'>▨</span>", waiting=swatch.format(pale),
            arrival=f"<span style='color:{c}'>|</span>") + "</span>")
        self.grid_legend.setText(f"<span style='color:{t.muted}'>" + translate(
            "Serving", "{free} free · {used} in use (pale: unused) · <b>×n</b> shared by n").format(
            free=swatch.format(t.grid), used=swatch.format(c)) + "</span>")

    # --- drawing --------------------------------------------------------------------------------------
    def refresh(self) -> None:
        s: Serving = self.intents.serving
        running = s.running or self.intents.busy and s.curve.measuring
        self.stop_button.setEnabled(running)
        self.continue_button.setEnabled(self.intents.can_serve_more)
        self.serve_button.setEnabled(self.intents.info is not None and not self.intents.running
                                     and not self.intents.busy)
        self.measure_button.setEnabled(self.serve_button.isEnabled())
        self._curve(s)
        self.timeline.show_serving(s)  # nothing served (yet, or since a new model): their placeholders
        self.grid.show_serving(s)
        self.numbers.setText(self.summary(s) if s.active else intro())
        self._table(s)

    def summary(self, s: Serving) -> str:
        t = self.appearance.theme
        n = len(s.tracks)
        head = translate("Serving", "<b>%n request(s) serving</b>", None, n) if s.running else \
            translate("Serving", "<b>%n request(s) served</b>", None, n) if s.done else \
            translate("Serving", "<b>%n request(s) paused (Continue goes on)</b>", None, n)
        at = translate("Serving", " (the grid shows scheduler step {step}: click a row at another step, or on the "
                       "left of the rows for the newest)").format(step=s.grid_step) if s.grid_step is not None else ""
        block_bytes = s.started.block_bytes
        return (head + translate("Serving", ": scheduler step {step}, {ms} ms of forward passes · <b>{tps} tokens/s"
                                 "</b> in all ({tokens} tokens)").format(
                    step=max(s.n_steps - 1, 0), ms=f"{s.total_ms:,.0f}", tps=f"{s.tokens_per_s:,.1f}",
                    tokens=s.n_generated) + "<br>"
                + translate("Serving", "Blocks: <b>{used} of {pool}</b> in use ({shared} shared; {used_bytes} of "
                            "{pool_bytes}; {block} tokens a block, {unused} positions unused in last blocks) · "
                            "largest batch at {context} tokens of context: <b>{largest} requests</b>{at}").format(
                    used=s.blocks_used, pool=s.n_blocks, shared=s.blocks_shared,
                    used_bytes=fmt_bytes(s.blocks_used * block_bytes), pool_bytes=fmt_bytes(s.n_blocks * block_bytes),
                    block=s.block_tokens, unused=s.fragmentation(), context=s.context_length(),
                    largest=s.largest_batch(), at=at)
                + (f"<br><span style='color:{t.muted}'>" + translate(
                    "Serving", "request {request} is shown in the other views").format(request=s.selected) + "</span>"
                   if s.selected is not None else ""))

    def _table(self, s: Serving) -> None:
        rows = []
        for track in s.tracks:
            text = track.stopped.text if track.stopped is not None else "".join(
                st.token.shown_text for st in track.steps)
            shared = track.done.shared_tokens if track.done is not None else None
            rows.append((str(track.index), state_of(track), str(track.prompt_tokens),
                         "…" if shared is None else str(shared), str(track.n_generated),
                         f"{s.request_tokens_per_s(track):.1f}", ms(s.ttft_ms(track)), ms(s.tpot_ms(track)),
                         " ".join(text.split())))
        key = (tuple(rows), s.selected)
        if key == self._table_key:
            return
        self._table_key = key
        self.table.setRowCount(len(rows))
        for r, values in enumerate(rows):
            for column, value in enumerate(values):
                item = self.table.item(r, column)
                if item is None:
                    item = QTableWidgetItem()
                    self.table.setItem(r, column, item)
                if item.text() != value:
                    item.setText(value)
                if column == 0:
                    item.setForeground(QColor(request_colour(r)))
                    item.setText(f"■ {r}")
        if s.selected is not None and self.table.currentRow() != s.selected:
            self.table.selectRow(s.selected)

    def _curve(self, s: Serving) -> None:
        curve = s.curve
        key = (curve.floor, curve.points, curve.measuring, self.appearance.theme)
        if key == self._curve_key:
            return
        self._curve_key = key
        t = self.appearance.theme
        xs = [pt.requests for pt in curve.points]
        set_data(self.measured, [math.log2(n) for n in xs], [pt.tokens_per_s for pt in curve.points])
        if curve.floor is not None and xs:
            sizes = list(curve.sizes or xs)
            set_data(self.ceiling, [math.log2(n) for n in sizes], [n * 1000 / curve.floor.ms for n in sizes])
        else:
            set_data(self.ceiling, [], [])
        if curve.measuring:
            done = len(curve.points)
            nxt = curve.sizes[done] if done < len(curve.sizes) else None
            sizes = len(curve.sizes)
            note = translate("Serving", "Measuring %n request(s) decoding together… ({done} of {sizes} sizes done)",
                             None, nxt).format(done=done, sizes=sizes) if nxt is not None else \
                translate("Serving", "Measuring…")
            if curve.floor is None:
                note = translate("Serving", "Measuring this machine's memory speed for the weights-read floor…")
        elif curve.points:
            one, last = curve.points[0], curve.points[-1]
            floor = curve.floor
            note = translate("Serving", "{line} {n} requests: {tps} tokens/s, {speedup}× one; a step {longer}× as "
                             "long").format(line=f"<span style='color:{t.final}'>━</span>", n=last.requests,
                                            tps=f"{last.tokens_per_s:,.0f}",
                                            speedup=f"{last.tokens_per_s / one.tokens_per_s:.1f}",
                                            longer=f"{last.step_ms / one.step_ms:.1f}")
            if floor is not None:
                note += translate("Serving", " · {line} at the floor ({ms} ms a step)").format(
                    line=f"<span style='color:{t.warning}'>╌</span>", ms=f"{floor.ms:.0f}")
            points = translate("Serving", ", ").join(
                translate("Serving", "{n}: {ms} ms a step").format(n=pt.requests, ms=f"{pt.step_ms:.0f}")
                for pt in curve.points)
            tip = translate("Serving", "Measured on this machine: {points}.").format(points=points)
            if floor is not None:
                tip += translate("Serving", " The floor: every step reads the weights once ({bytes} at {speed} GB/s = "
                                 "{ms} ms) whatever the batch, so N requests could at best make N tokens per {ms} "
                                 "ms.").format(bytes=fmt_bytes(floor.read_bytes), speed=f"{floor.gb_per_s:.1f}",
                                               ms=f"{floor.ms:.1f}")
            self.curve_note.setToolTip(tip)
        else:
            note = translate("Serving", "Measure times 1, 2, 4, 8 and 16 requests decoding at once on this machine.")
        self.curve_note.setText(note)
