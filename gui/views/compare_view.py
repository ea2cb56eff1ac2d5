"""Compare: two branches side by side — their texts, where they part, how likely the model found each.

Log-prob is the sum of ln p_raw of the tokens a branch took (the model's own probability, the same measure
for drawn and forced tokens); perplexity is exp(−mean ln p_raw), read as "as unsure as a choice among this
many equally likely tokens". Log-probs are sums, so branches of different lengths are also compared over the
steps both have, and the view says so. The plot shows each step's entropy (of p_raw, nats) on both branches:
the steps before they part are the same on both, so the lines lie on top of each other up to there. The
texts open where the branches differ: the shared beginning is cut to its last words.

After a Reset the current branch (A) is back at the prompt: until it has a step there is nothing to compare,
and the view says that instead of comparing an empty branch with the old one.
"""

from __future__ import annotations

import html
import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QGridLayout, QLabel, QSizePolicy, QSplitter, QTextBrowser, QVBoxLayout,
                               QWidget)

from gui.state.compare import (BranchStats, branch_stats, chosen_p, default_other, parting_step,
                               same_length_log_probs)
from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.state.intents import Intents
from gui.theme import Appearance
from gui.views.base import View
from gui.state.format import display
from gui.widgets.plotting import colour, grid_ceiling, make_plot, nice_ceiling, set_range, style_plot

SIDES = ("A", "B")
SHARED_TAIL = 8  # tokens of the shared beginning kept before the step where the branches part


def fmt_log_prob(value: float) -> str:
    return "−∞" if value == -math.inf else f"{value:.2f}".replace("-", "−")


FORK = QT_TRANSLATE_NOOP("Compare", "Fork at a past step to compare two branches.")


class CompareView(View):
    COSTLY = True  # a plot: several ms per redraw

    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        self.parting = QLabel(translate("Compare", FORK))
        # what the parting line says, as a function: a language change words it again, also behind another tab
        self._parting_words = lambda: translate("Compare", FORK)
        self.parting.setTextFormat(Qt.RichText)
        self.parting.setWordWrap(True)
        self.combos = {side: QComboBox() for side in SIDES}
        self.headings = {side: QLabel() for side in SIDES}
        self.stats = {side: QLabel() for side in SIDES}
        self.texts = {side: QTextBrowser() for side in SIDES}
        top = QWidget()
        grid = QGridLayout(top)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setVerticalSpacing(3)
        for column, side in enumerate(SIDES):
            self.combos[side].setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            self.combos[side].setMinimumContentsLength(4)  # the default layout's share of the width holds
            self.combos[side].activated.connect(self._on_chosen)
            self.headings[side].setTextFormat(Qt.RichText)
            self.stats[side].setTextFormat(Qt.RichText)
            self.stats[side].setWordWrap(True)
            self.texts[side].setOpenLinks(False)
            self.texts[side].setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Ignored)  # the plot keeps room
            self.texts[side].setMinimumHeight(36)
            grid.addWidget(self.headings[side], 0, 2 * column)
            grid.addWidget(self.combos[side], 0, 2 * column + 1)
            grid.addWidget(self.stats[side], 1, 2 * column, 1, 2)
            grid.addWidget(self.texts[side], 2, 2 * column, 1, 2)
            grid.setColumnStretch(2 * column + 1, 1)
        grid.setRowStretch(2, 1)  # height to spare goes to the texts
        self.plot = make_plot(appearance)
        self.plot.setMinimumHeight(80)
        self.curves = {side: self.plot.plot([], [], antialias=True) for side in SIDES}
        self.part_line = pg.InfiniteLine(angle=90, movable=False)
        self.part_line.setVisible(False)
        self.plot.addItem(self.part_line)
        split = QSplitter(Qt.Vertical)
        split.setChildrenCollapsible(False)
        split.addWidget(top)
        split.addWidget(self.plot)
        split.setSizes([420, 580])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.setSpacing(3)
        layout.addWidget(self.parting)
        layout.addWidget(split, 1)
        self._items_key = self._key = None
        self.chosen: dict[str, int | None] = {"A": None, "B": None}
        self._user_chose = {side: False for side in SIDES}  # a side the user set keeps its branch
        self.results: dict[str, BranchStats | None] = {"A": None, "B": None}
        self.retranslate()

    def retranslate(self) -> None:
        self.plot.setToolTip(translate("Compare", "Each step's entropy (of p raw, in nats) by step: A solid, B dashed; "
                                       "the dotted line is the step where they part"))
        # the x axis is the step: its numbers say so
        self.plot.getPlotItem().setLabel("left", translate("Compare", "entropy (nats)"))
        self._items_key = None  # the branch names in the lists, worded again
        if self._key == "clear":
            self._key = None
        self.restyle()
        self.parting.setText(self._parting_words())

    def restyle(self) -> None:
        t = self.appearance.theme
        style_plot(self.plot, self.appearance)
        for side, hex_colour, style in (("A", t.selected, Qt.SolidLine), ("B", t.warning, Qt.DashLine)):
            self.curves[side].setPen(pg.mkPen(colour(hex_colour), width=2.2 * self.appearance.scale, style=style))
            self.curves[side].setSymbol("o")
            self.curves[side].setSymbolSize(5 * self.appearance.scale)
            self.curves[side].setSymbolBrush(colour(hex_colour))
            self.curves[side].setSymbolPen(None)
            self.headings[side].setText(translate("Compare", "<b style='color:{colour}'>Branch {side}</b>").format(
                colour=hex_colour, side=side))
        self.part_line.setPen(pg.mkPen(colour(t.accent), width=1.5, style=Qt.DotLine))
        self._key = None

    # --- which two branches ---------------------------------------------------------------------------
    def _items(self) -> list[tuple[int, str]]:
        """(node id, name) of each branch tip, and the current node when it is not a tip (after a rewind)."""
        h = self.intents.history
        tips = list(h.leaves())
        nodes = tips if h.current in tips else tips + [h.current]  # the root: back at the prompt (a Reset)
        items = []
        for number, node in enumerate(nodes, 1):
            if node.step is None:
                items.append((node.id, translate("Compare", "current: the prompt only (0 steps)")))
                continue
            last, up = [], node
            while up is not None and up.step is not None and len(last) < 4:
                last.append(up.step.token.text)
                up = up.parent
            tail = display("".join(reversed(last)))[-18:]
            where = translate("Compare", "current") if node is h.current else \
                translate("Compare", "tip {number}").format(number=number)
            depth = node.depth
            items.append((node.id, translate("Compare", "{where}: …{tail} (%n step(s))", None, depth).format(
                where=where, tail=tail)))
        return items

    def _update_combos(self) -> None:
        """Refill the lists when the tree or the current node changed. A side keeps what the user chose while
        that node is still listed; otherwise it follows the default (A the current branch, B the newest other)."""
        h = self.intents.history
        key = (h.root, len(h.log))  # the root itself (kept, its id cannot be reused by a new one)
        if key == self._items_key:
            return
        if self._items_key is None or self._items_key[0] != key[0]:
            self._user_chose = {side: False for side in SIDES}
        self._items_key = key
        items = self._items()
        ids = [node_id for node_id, _ in items]
        if not self._user_chose["A"] or self.chosen["A"] not in ids:
            self.chosen["A"], self._user_chose["A"] = h.current.id, False
        if not self._user_chose["B"] or self.chosen["B"] not in ids:
            self.chosen["B"], self._user_chose["B"] = default_other(self.chosen["A"], ids), False
        for side in SIDES:
            combo = self.combos[side]
            combo.blockSignals(True)
            combo.clear()
            for node_id, name in items:
                combo.addItem(name, node_id)
            combo.setCurrentIndex(combo.findData(self.chosen[side]) if self.chosen[side] is not None else -1)
            combo.blockSignals(False)

    def _on_chosen(self, _index: int) -> None:
        for side in SIDES:
            chosen = self.combos[side].currentData()
            if chosen != self.chosen[side]:
                self.chosen[side], self._user_chose[side] = chosen, True
        self._key = None
        self.refresh()

    # --- drawing --------------------------------------------------------------------------------------
    def refresh(self) -> None:
        c, h = self.intents, self.intents.history
        if self.tabbed_away():  # behind another tab: drawn when raised
            return
        if c.prefill_event is None or h.current is None:
            self._clear(lambda: translate("Compare", FORK))
            return
        self._update_combos()
        key = (self._items_key, self.chosen["A"], self.chosen["B"])
        if key == self._key:
            return
        self._key = key
        paths = {side: (h.path_to(h.nodes[self.chosen[side]]) if self.chosen[side] in h.nodes else None)
                 for side in SIDES}
        for side in SIDES:
            self.results[side] = branch_stats(paths[side]) if paths[side] is not None else None
        self._parting_words = lambda: self._parting(paths["A"], paths["B"])
        self.parting.setText(self._parting_words())
        self._show_branches(paths["A"], paths["B"])
        self._show_entropy(paths["A"], paths["B"])

    def _clear(self, words) -> None:
        if self._key == "clear":
            return
        self._key, self._items_key = "clear", None
        self._parting_words = words
        self.parting.setText(words())
        for side in SIDES:
            self.combos[side].clear()
            self.stats[side].setText("")
            self.texts[side].setPlainText("")
            self.curves[side].setData([], [])
            self.results[side] = None
        self.part_line.setVisible(False)

    @staticmethod
    def _empty(a, b) -> bool:
        """Nothing to compare: a side is back at the prompt (a Reset, a rewind to step 1)."""
        return (a is not None and not a) or (b is not None and not b)

    def _parting(self, a, b) -> str:
        """Where the two branches part, in words."""
        t = self.appearance.theme
        if b is None:
            return translate("Compare", "Only one branch so far: go back to a step and take another token to compare.")
        if self._empty(a, b):
            empty, other = ("A", b) if not a else ("B", a)
            kept = len(other)
            return translate("Compare", "Branch {empty} is back at the prompt (no steps yet): nothing to compare. Step "
                             "or Run, then compare it with branch {other} (%n step(s), kept).", None, kept).format(
                empty=empty, other="B" if empty == "A" else "A")
        at = parting_step(a, b)
        if at is None:
            shorter, longer = ("A", "B") if len(a) <= len(b) else ("B", "A")
            return (translate("Compare", "Both are the same branch.") if len(a) == len(b) else
                    translate("Compare", "Branch {longer} continues branch {shorter} after step {at}.")
                    .format(longer=longer, shorter=shorter, at=min(len(a), len(b))) + self._lengths(a, b))
        took = []
        for side, path, hex_colour in (("A", a, t.selected), ("B", b, t.warning)):
            step = path[at - 1]
            flag = " ⚑ " + translate("Compare", "forced") if getattr(step, "forced", False) else ""
            took.append(translate("Compare", "<b style='color:{colour}'>{side}</b> took <b>{token}</b> (p raw {p}{flag})")
                        .format(colour=hex_colour, side=side, token=html.escape(display(step.token.piece)),
                                p=f"{chosen_p(step):.3f}", flag=flag))
        return translate("Compare", "They part at <b>step {at}</b> (after {shared} shared): {took}.").format(
            at=at, shared=at - 1, took=", ".join(took)) + self._lengths(a, b)

    @staticmethod
    def _lengths(a, b) -> str:
        """Branches of different lengths: log p sums over the steps, so it is also given over the same steps."""
        if len(a) == len(b):
            return ""
        n, lp_a, lp_b = same_length_log_probs(a, b)
        return "<br>" + translate("Compare", "A has {a} steps, B {b}: log p adds ln p at every step, so the longer one is "
                                  "lower by its length alone; over their first {n} steps, log p A {lp_a}, B {lp_b} "
                                  "(perplexity is per step).").format(a=len(a), b=len(b), n=n, lp_a=fmt_log_prob(lp_a),
                                                                      lp_b=fmt_log_prob(lp_b))

    def _show_branches(self, a, b) -> None:
        t = self.appearance.theme
        at = parting_step(a, b) if b is not None else None
        shared = (at - 1) if at is not None else min(len(a), len(b)) if b is not None else 0
        for side, path, hex_colour in (("A", a, t.selected), ("B", b, t.warning)):
            stats = self.results[side]
            if path is None or stats is None:
                self.stats[side].setText("")
                self.texts[side].setPlainText("")
                continue
            n_steps = stats.n_steps
            self.stats[side].setText(
                translate("Compare", "log p <b>{log_p}</b> over %n step(s) · perplexity <b>{perplexity}</b>", None,
                          n_steps).format(log_p=fmt_log_prob(stats.log_prob), perplexity=f"{stats.perplexity:.2f}")
                if n_steps else translate("Compare", "no steps yet: the prompt only"))
            self.stats[side].setToolTip(translate(
                "Compare", "%n step(s). log p: the sum of ln p raw of the tokens this branch took (how likely the model "
                "found the whole text); perplexity: exp(−log p / steps), as unsure as a choice among that many equally "
                "likely tokens at each step.", None, n_steps))
            self.texts[side].setHtml(self._text_html(path, shared, at is not None, hex_colour))
            self.texts[side].scrollToAnchor("part")  # a long text opens where the branches part

    def _text_html(self, path, shared: int, parts: bool, hex_colour: str) -> str:
        t = self.appearance.theme

        def chunk(steps) -> str:
            return html.escape("".join(s.token.text for s in steps)).replace("\n", "<br>")

        # the shared beginning cut to its last words: the text opens where the branches differ
        cut = max(shared - SHARED_TAIL, 0)
        skipped = translate("Compare", "[%n shared step(s)] …", None, cut) if cut else ""
        same = f"<span style='color:{t.muted}'>{skipped}{chunk(path[cut:shared])}</span><a name='part'></a>"
        if not parts or shared >= len(path):
            rest = chunk(path[shared:])
        else:
            fork = f"<span style='background:{hex_colour}; color:{t.panel}'>{chunk(path[shared:shared + 1])}</span>"
            rest = fork + chunk(path[shared + 1:])
        return f"<div style='white-space: pre-wrap; color:{t.text}'>{same}{rest}</div>"

    def _show_entropy(self, a, b) -> None:
        longest, top = 1, 1.0
        empty = self._empty(a, b)  # nothing to compare: no line of one branch alone, as if it were compared
        for side, path in (("A", a), ("B", b)):
            stats = self.results[side]
            if path is None or stats is None or empty:
                self.curves[side].setData([], [])
                continue
            self.curves[side].setData([s.index for s in path], list(stats.entropies))
            longest = max(longest, len(path))
            top = max(top, max(stats.entropies, default=0.0))
        at = parting_step(a, b) if b is not None else None
        self.part_line.setVisible(at is not None)
        if at is not None:
            self.part_line.setValue(at)
        set_range(self.plot, x=(0.5, grid_ceiling(longest, 16) + 0.5), y=(0.0, nice_ceiling(top * 1.1)))
