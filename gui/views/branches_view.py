"""Branches: every token taken so far, as a tree, so that no branch is lost from sight.

Each branch is a row and the tokens of a row stand left → right by step index, in columns shared by all
rows, so that step 5 of one branch sits above step 5 of another. A branch that parts from another starts
with a connector from its parent's column; a dot marks the node where branches part. On each edge the
probability of the token it leads to: p final (the distribution the draw used), or p raw for a token that
was not drawn (forced: truncation may have given it p final 0; greedy: its p final is 1). The current path
is highlighted, the current token outlined, forced tokens dashed and flagged ⚑. A click on a token goes to
its branch and shows that step.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QLabel, QScrollArea, QToolTip, QVBoxLayout, QWidget

from gui.state.compare import chosen_logit, chosen_p, edge_p
from gui.state.intents import Intents
from gui.theme import Appearance
from gui.views.base import View
from gui.widgets.canvas import begin_paint
from gui.state.format import display, quoted, rank_text
from gui.state.i18n import translate

PAD_X, PAD_Y, MARGIN, ROW_GAP = 5.0, 3.0, 6.0, 9.0
MAX_LABEL = 14  # characters of a token shown on its node (the tooltip has all of it)
FLAG = "⚑"


def assign_rows(root, hidden: set[int] = frozenset()) -> list[tuple[object, int]]:
    """(node, row) for every node (but the `hidden` ones and what follows them), root first, depth first.

    A node's first child continues its row; each later child starts a new row below the rows of the
    subtrees before it. Those rows begin further right, so a connector never crosses a token."""
    placed, next_row = [], 1
    stack = [(root, 0, True)]
    while stack:
        node, row, continues = stack.pop()
        if not continues:
            row, next_row = next_row, next_row + 1
        placed.append((node, row))
        for i in range(len(node.children) - 1, -1, -1):  # reversed: the first child's subtree comes first
            if node.children[i].id not in hidden:
                stack.append((node.children[i], row, i == 0))
    return placed


def branch_tip(node):
    """The last node of the row `node` is on (its first-child line)."""
    while node.children:
        node = node.children[0]
    return node


def format_p(p: float) -> str:
    if p >= 0.995:
        return "1.00"
    if p >= 0.01:
        return f"{p:.2f}"
    return f"{p:.0e}".replace("e-0", "e-")  # 3e-4: four characters, like 0.37


@dataclass(eq=False)
class Placed:
    node: object
    row: int
    rect: QRectF
    label: str
    junction_x: float  # where the edge into this node leaves the parent's column
    p_text: str = ""
    forced: bool = False
    parent: "Placed | None" = None  # laid out before its children (depth-first)


class BranchCanvas(QWidget):
    node_clicked = Signal(int)

    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.placed: list[Placed] = []
        self.by_id: dict[int, Placed] = {}
        self._rows: dict[int, tuple[list[float], list[Placed]]] = {}  # row -> (lefts, placed) for hit tests
        self.path: set[int] = set()
        self.current, self.shown = 0, None
        self.placeholder = ""
        self._pitch = 1.0
        self._width_cache: dict[str, float] = {}
        self._facts: dict[int, tuple] = {}  # node id -> (its step, what set_tree needs of it)
        self._root, self._reach = None, 0.0
        self.setMouseTracking(True)

    def _fonts(self):
        return self.appearance.font(1.0, mono=True), self.appearance.font(0.78)

    def set_tree(self, root, n_prompt: int, hidden: set[int] = frozenset()) -> None:
        """Lay out the whole tree (only when it changed: the marks below change without a relayout)."""
        self.placed, self.by_id, self._rows = [], {}, {}
        if root is not self._root:
            self._root = root
            self._facts.clear()
        if root is None:
            self.setMinimumSize(0, 0)
            self.update()
            return
        font, small = self._fonts()
        fm, sm = QFontMetricsF(font), QFontMetricsF(small)
        height = fm.height() + 2 * PAD_Y
        self._pitch = height + ROW_GAP
        rows = assign_rows(root, hidden)
        facts, widths = [], {}
        for node, _ in rows:
            fact = self._node_facts(node, n_prompt, fm, height)
            facts.append(fact)
            widths[node.depth] = max(widths.get(node.depth, 0.0), fact[1])
        gap = sm.horizontalAdvance("0.00") + 18
        self._reach = max(widths.values()) + gap  # how far left of a visible point an edge may start
        lefts = [MARGIN]
        for depth in range(max(widths) + 1):
            lefts.append(lefts[-1] + widths.get(depth, 0.0) + gap)
        for (node, row), (label, w, p_text, forced) in zip(rows, facts):
            depth = node.depth
            rect = QRectF(lefts[depth], MARGIN + row * self._pitch, w, height)
            parent = self.by_id.get(node.parent.id) if node.parent is not None else None
            placed = Placed(node, row, rect, label, lefts[depth] - gap + 5 if depth else 0.0, p_text, forced, parent)
            self.placed.append(placed)
            self.by_id[node.id] = placed
            lefts_in_row, in_row = self._rows.setdefault(row, ([], []))  # depth-first: left to right
            lefts_in_row.append(rect.left())
            in_row.append(placed)
        n_rows = 1 + max(self._rows)
        self.setMinimumSize(int(lefts[-1] + MARGIN), int(2 * MARGIN + n_rows * self._pitch))
        self.update()

    def _node_facts(self, node, n_prompt: int, fm: QFontMetricsF, height: float) -> tuple:
        """(label, width, p text, forced) of a node, kept while its step is the same report."""
        kept = self._facts.get(node.id)
        if kept is not None and kept[0] is node.step:
            return kept[1]
        label = self._label(node, n_prompt)
        w = self._width_cache.get(label)
        if w is None:
            w = self._width_cache[label] = max(fm.horizontalAdvance(label) + 2 * PAD_X, 2.2 * height)
        p_text, forced = "", False
        if node.step is not None:
            p_text, forced = format_p(edge_p(node.step)[0]), bool(getattr(node.step, "forced", False))
        fact = (label, w, p_text, forced)
        if node.step is not None:  # the root's label counts the prompt's tokens: not kept
            self._facts[node.id] = (node.step, fact)
        return fact

    @staticmethod
    def _label(node, n_prompt: int) -> str:
        if node.step is None:
            return translate("Branches", "prompt ({n})").format(n=n_prompt)
        text = display(node.step.token.piece)
        if len(text) > MAX_LABEL:
            text = text[:MAX_LABEL - 1] + "…"
        return (FLAG + text) if getattr(node.step, "forced", False) else text

    def set_marks(self, path: set[int], current: int, shown: int | None) -> None:
        self.path, self.current, self.shown = path, current, shown
        self.update()

    def relayout(self) -> None:
        self._width_cache.clear()
        self._facts.clear()

    def sizeHint(self) -> QSize:
        return QSize(600, max(self.minimumHeight(), 120))

    # --- painting -------------------------------------------------------------------------------------
    def paintEvent(self, event):
        painter = begin_paint(self, self.appearance, self.placeholder, not self.placed)
        if painter is None:
            return
        visible = QRectF(event.rect()).adjusted(-40, -self._pitch, 40, self._pitch)
        shown = [pl for pl in self._near(visible) if pl.rect.intersects(visible) or self._edge_visible(pl, visible)]
        self._paint_edges(painter, [pl for pl in shown if pl.node.id not in self.path], on_path=False)
        self._paint_edges(painter, [pl for pl in shown if pl.node.id in self.path], on_path=True)
        self._paint_forks(painter, shown)
        self._paint_nodes(painter, [pl for pl in shown if pl.rect.intersects(visible)])

    def _near(self, visible: QRectF) -> list[Placed]:
        """The nodes whose node or incoming edge may be in `visible`: by x in every row (a fork's connector
        may cross rows that are out of sight at both ends)."""
        near = []
        for lefts, in_row in self._rows.values():
            start = bisect_right(lefts, visible.left() - self._reach)
            near += in_row[start:bisect_right(lefts, visible.right() + self._reach)]
        return near

    @staticmethod
    def _edge_visible(placed: Placed, visible: QRectF) -> bool:
        return placed.parent is not None and visible.intersects(placed.rect.united(placed.parent.rect))

    def _paint_edges(self, painter: QPainter, placed: list[Placed], on_path: bool) -> None:
        t, scale = self.appearance.theme, self.appearance.scale
        pen = QPen(QColor(t.selected if on_path else t.grid), (2.6 if on_path else 1.4) * scale)
        small = self._fonts()[1]
        painter.setFont(small)
        label_h = QFontMetricsF(small).height()
        label_colour, panel = QColor(t.text if on_path else t.muted), QColor(t.panel)
        painter.setBrush(Qt.NoBrush)
        for pl in placed:
            parent = pl.parent
            if parent is None:
                continue
            start = QPointF(parent.rect.right(), parent.rect.center().y())
            y, xj = pl.rect.center().y(), pl.junction_x
            route = QPainterPath(start)
            if pl.row != parent.row:  # a fork: along the parent's row to the junction, down, then across
                route.lineTo(xj, start.y())
                route.lineTo(xj, y)
            route.lineTo(pl.rect.left(), y)
            painter.setPen(pen)
            painter.drawPath(route)
            # the probability sits on its edge, on a patch of the background the line stops at
            gap = QRectF(xj + 2, y - label_h / 2, pl.rect.left() - xj - 4, label_h)
            label = painter.boundingRect(gap, Qt.AlignCenter, pl.p_text).adjusted(-2, 0, 2, 0)
            painter.fillRect(label, panel)
            painter.setPen(label_colour)
            painter.drawText(gap, Qt.AlignCenter, pl.p_text)

    def _paint_forks(self, painter: QPainter, placed: list[Placed]) -> None:
        """A dot where branches part: on the parent's row, at the junction its children's edges leave from."""
        t = self.appearance.theme
        radius = 4.0 * self.appearance.scale
        painter.setPen(Qt.NoPen)
        painter.setBrush(QColor(t.accent))
        for pl in placed:
            if len(pl.node.children) > 1:
                child = self.by_id.get(pl.node.children[1].id)
                if child is not None:
                    painter.drawEllipse(QPointF(child.junction_x, pl.rect.center().y()), radius, radius)

    def _paint_nodes(self, painter: QPainter, placed: list[Placed]) -> None:
        t, scale = self.appearance.theme, self.appearance.scale
        painter.setFont(self._fonts()[0])
        for pl in placed:
            node_id = pl.node.id
            on_path = node_id in self.path
            fill = QColor(t.prompt_chip if pl.node.step is None else t.generated_chip if on_path else t.window)
            pen = QPen(QColor(t.grid), 1.0 * scale) if not on_path else QPen(Qt.NoPen)
            if pl.forced:
                pen = QPen(QColor(t.warning), 1.8 * scale, Qt.DashLine)
            if node_id == self.shown:
                fill = QColor(t.selected)
                fill.setAlpha(90)
                pen = QPen(QColor(t.selected), 2.5 * scale, Qt.DashLine if pl.forced else Qt.SolidLine)
            if node_id == self.current:
                pen = QPen(QColor(t.newest), 2.5 * scale, Qt.DashLine if pl.forced else Qt.SolidLine)
            painter.setPen(pen)
            painter.setBrush(fill)
            painter.drawRoundedRect(pl.rect, 4, 4)
            painter.setPen(QColor(t.text if on_path else t.muted))
            painter.drawText(pl.rect, Qt.AlignCenter, pl.label)

    # --- the mouse ------------------------------------------------------------------------------------
    def placed_at(self, point: QPointF) -> Placed | None:
        row = int((point.y() - MARGIN) // self._pitch) if self._pitch > 0 else -1
        lefts, in_row = self._rows.get(row, ([], []))
        i = bisect_right(lefts, point.x()) - 1
        if i >= 0 and in_row[i].rect.contains(point):
            return in_row[i]
        return None

    def mouseMoveEvent(self, event):
        placed = self.placed_at(event.position())
        self.setCursor(Qt.ArrowCursor if placed is None or placed.node.step is None else Qt.PointingHandCursor)
        if placed is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), tooltip(placed), self)

    def mousePressEvent(self, event):
        placed = self.placed_at(event.position())
        if placed is not None and event.button() == Qt.LeftButton:
            self.node_clicked.emit(placed.node.id)


def tooltip(placed: Placed) -> str:
    step = placed.node.step
    if step is None:
        return translate("Branches", "The prompt, read in one prefill pass: every branch starts here.")
    kind = edge_p(step)[1].replace("_", " ")
    forced = getattr(step, "forced", False)
    how = (translate("Branches", "forced ⚑: taken, not drawn") if forced else
           translate("Branches", "greedy: the argmax, no draw") if step.random_u is None else
           translate("Branches", "drawn with u = {u}").format(u=f"{step.random_u:.4f}"))
    return (translate("Branches", "step {index} · token id {id}").format(index=step.index, id=step.token.id)
            + f"  {quoted(step.token.piece)}\n"
            + translate("Branches", "p raw {p_raw} · p final {p_final}   (the edge shows {kind})").format(
                p_raw=f"{chosen_p(step):.4f}", p_final=f"{chosen_p(step, 'p_final'):.4f}", kind=kind) + "\n"
            + translate("Branches", "logit {logit}   rank {rank}").format(logit=f"{chosen_logit(step):.3f}",
                                                                          rank=rank_text(step.chosen_rank))
            + f"\n{how}\n"
            + translate("Branches", "branch row {row} · node {node}").format(row=placed.row + 1, node=placed.node.id))


class BranchesView(View):
    def __init__(self, intents: Intents, appearance: Appearance):
        super().__init__(intents, appearance)
        # One line, so that the tree keeps the room of a short dock: what is where, then the legend.
        self.summary = QLabel()
        # what the summary says, as a function: a language change words it again, also behind another tab
        self._summary_words = lambda: translate("Branches", "No prompt read yet.") + " " + self._legend
        self.summary.setTextFormat(Qt.RichText)
        self.summary.setWordWrap(True)
        self.canvas = BranchCanvas(appearance)
        self.canvas.node_clicked.connect(self._on_node_clicked)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.canvas)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addWidget(self.summary)
        layout.addWidget(self.scroll, 1)
        self._tree_key = self._marks = None
        self._select_after: tuple[int, int] | None = None  # (node id, step): shown once the switch lands
        self.retranslate()

    def retranslate(self) -> None:
        self.restyle()
        self.summary.setText(self._summary_words())

    def _say(self, words) -> None:
        self._summary_words = words
        self.summary.setText(words())

    def restyle(self) -> None:
        t = self.appearance.theme
        self.canvas.placeholder = translate("Branches", "Every token taken appears here as a tree: go back to a step "
                                            "(history slider or a token in Context) and take another candidate to "
                                            "start a branch.")
        self._legend = translate(
            "Branches", "<span style='color:{muted}'><span style='color:{accent}'>●</span> branches part · on each edge "
            "<b>p final</b> (greedy or <span style='color:{warning}'>{flag} forced</span>: <b>p raw</b>) · click a "
            "token to go there</span>").format(muted=t.muted, accent=t.accent, warning=t.warning, flag=FLAG)
        self.summary.setToolTip(translate(
            "Branches", "Each row is a branch; its tokens stand left → right by step, so a step's tokens share a "
            "column.\nA branch that parts from another starts with a connector from its parent; ● marks that node.\n"
            "On each edge: p final, the probability in the distribution the draw used. A forced token ({flag}, "
            "dashed) or a greedy one\nwas not drawn, so its edge shows p raw, the model's own probability.\nThe "
            "current path is highlighted, the current token outlined, the step shown filled.\nClick a token: its "
            "branch becomes current and its step is shown (a branch whose cache was dropped is re-read in one "
            "pass).").format(flag=FLAG))
        self.canvas.relayout()
        self._tree_key = self._marks = None

    def refresh(self) -> None:
        c, h = self.intents, self.intents.history
        if self.tabbed_away():  # behind another tab: drawn when raised
            return
        prefill = c.prefill_event
        # the root itself (a new one could get a freed one's id), and the log's length: any report changes it
        tree_key = (h.root, len(h.log), prefill is not None)
        if tree_key != self._tree_key:
            self._tree_key = tree_key
            self.canvas.set_tree(h.root if prefill is not None else None, len(prefill.tokens) if prefill else 0,
                                 h.unrevealed())  # a paced playback's steps once it shows them
        if prefill is None:
            self._say(lambda: translate("Branches", "No prompt read yet.") + " " + self._legend)
            self._marks = None
            return
        path = h.path_nodes()
        shown = c.shown()
        shown_id = path[shown.index - 1].id if shown is not None and not shown.pending and \
            0 < shown.index <= len(path) else None
        current = h.shown_current
        marks = (tree_key, current.id, shown_id)
        if marks != self._marks:
            moved = self._marks is None or self._marks[1] != current.id or self._marks[0] != tree_key
            self._marks = marks
            self.canvas.set_marks({0} | {n.id for n in path}, current.id, shown_id)
            if moved:
                QTimer.singleShot(0, self._reveal_current)
            n_tips = len(h.leaves())
            n_tokens = len(h.nodes) - 1 - len(h.unrevealed())
            n_steps, row = len(path), self.canvas.by_id[current.id].row + 1

            def where() -> str:
                if not n_tips:
                    return translate("Branches", "No token taken yet.") + " &nbsp; " + self._legend
                return ("<b>" + translate("Branches", "%n branch(es)", None, n_tips) + "</b> · "
                        + translate("Branches", "%n token(s)", None, n_tokens) + " · "
                        + translate("Branches", "current: row {row}, %n step(s)", None, n_steps).format(row=row)
                        + " &nbsp; " + self._legend)
            self._say(where)
        self._select_when_switched()

    def _reveal_current(self) -> None:
        placed = self.canvas.by_id.get(self.intents.history.shown_current.id)
        if placed is not None:
            centre = placed.rect.center()
            self.scroll.ensureVisible(int(centre.x()), int(centre.y()), int(placed.rect.width()) + 60, 40)

    def _on_node_clicked(self, node_id: int) -> None:
        """On the current path: show that step. Elsewhere: switch to the branch (its whole row, so that
        nothing is cut off it) and show the step clicked once the switch has landed."""
        c, h = self.intents, self.intents.history
        node = h.nodes.get(node_id)
        if node is None or node.step is None:
            return
        if node_id in {n.id for n in h.path_nodes()}:
            c.select(node.step.index)
            return
        if not c.can_move:  # during a run, or while another move is on its way
            return
        tip = branch_tip(node)
        self._select_after = (tip.id, node.step.index)
        c.switch(tip.id)

    def _select_when_switched(self) -> None:
        if self._select_after is not None and self.intents.history.current.id == self._select_after[0]:
            index, self._select_after = self._select_after[1], None
            self.intents.select(index)
