"""Choose a layer and a head; the query heads are grouped by the K/V head they share (grouped-query
attention), both in the head list and in a line that draws the groups: "K/V head 0: q0 q1 q2 │ ...".
A head in that line is a link: click it to show it."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from inference.attention import kv_groups

from gui.theme import Appearance

KV = "K/\u2060V"  # a word joiner: never broken after its slash
MEAN = -1  # the head "index" of the mean over all heads


class HeadPicker(QWidget):
    changed = Signal()

    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.layer = QComboBox()
        self.head = QComboBox()
        self.head.setMinimumContentsLength(14)
        self.groups = QLabel()
        self.groups.setWordWrap(True)
        self.groups.linkActivated.connect(lambda href: self.select(int(self.layer.currentIndex()), int(href)))
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for widget in (QLabel("Layer"), self.layer, QLabel("Head"), self.head):
            row.addWidget(widget)
        self.row = row
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.groups)
        self.n_heads, self.n_kv_heads = 0, 0
        self.brief = False  # only the heads' links, the words about them in the tooltip (a short dock)
        self.layer.currentIndexChanged.connect(self._changed)
        self.head.currentIndexChanged.connect(self._changed)

    def set_model(self, n_layers: int, n_heads: int, n_kv_heads: int) -> None:
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        for combo in (self.layer, self.head):
            combo.blockSignals(True)
            combo.clear()
        for layer in range(n_layers):
            self.layer.addItem(f"{layer + 1} of {n_layers}", layer)
        self.head.addItem("mean of all heads", MEAN)
        model: QStandardItemModel = self.head.model()
        grouped = n_kv_heads < n_heads
        for kv, heads in enumerate(kv_groups(n_heads, n_kv_heads)):
            if grouped:
                self.head.addItem(f"K/V head {kv}:", None)
                model.item(self.head.count() - 1).setEnabled(False)
            for h in heads:
                self.head.addItem(f"  q{h}" + (f"  (K/V {kv})" if grouped else ""), h)
        self.layer.setCurrentIndex(max(0, n_layers - 1))
        self.head.setCurrentIndex(0)
        for combo in (self.layer, self.head):
            combo.blockSignals(False)
        self._draw_groups()
        self.changed.emit()

    @property
    def current(self) -> tuple[int, int | None]:
        """(layer, head); head None = the mean over heads."""
        head = self.head.currentData()
        return max(0, self.layer.currentIndex()), (None if head in (None, MEAN) else int(head))

    def select(self, layer: int, head: int | None) -> None:
        self.layer.setCurrentIndex(layer)
        self.head.setCurrentIndex(self.head.findData(MEAN if head is None else head))

    def head_name(self, head: int | None) -> str:
        if head is None:
            return "the mean of all heads"
        if self.n_kv_heads < self.n_heads:
            return f"query head q{head} (K/V head {head // (self.n_heads // self.n_kv_heads)})"
        return f"head {head}"

    def restyle(self) -> None:
        self._draw_groups()

    def set_brief(self, brief: bool) -> None:
        if brief != self.brief:
            self.brief = brief
            self._draw_groups()

    def _changed(self) -> None:
        self._draw_groups()
        self.changed.emit()

    def _draw_groups(self) -> None:
        if not self.n_heads:
            self.groups.setText("")
            return
        t = self.appearance.theme
        _, chosen = self.current
        parts = []
        for kv, heads in enumerate(kv_groups(self.n_heads, self.n_kv_heads)):
            links = "&nbsp;".join(
                f'<a href="{h}" style="color:{t.selected if h == chosen else t.text}; text-decoration:none">'
                + (f"<b>[q{h}]</b>" if h == chosen else f"q{h}") + "</a>" for h in heads)
            parts.append(f'<span style="color:{t.muted}">{KV}&nbsp;head&nbsp;{kv}:</span>&nbsp;{links}')
        if self.n_kv_heads < self.n_heads:
            group = self.n_heads // self.n_kv_heads
            intro = (f"Grouped-query attention: {self.n_heads} query heads share {self.n_kv_heads} K/V heads "
                     f"({group} each: one cached K/V serves the whole group). ").replace("K/V", KV)
        else:
            intro = f"{self.n_heads} heads, each with its own K/V head. "
        links = " &nbsp;│&nbsp; ".join(parts)
        self.groups.setToolTip(intro.replace(KV, "K/V") if self.brief else "")
        if self.brief and self.n_kv_heads < self.n_heads:  # the gist; the tooltip says the rest
            intro = f"{self.n_heads} query heads share {self.n_kv_heads} {KV} heads: "
        elif self.brief:
            intro = ""
        self.groups.setText(f'<span style="color:{t.muted}">{intro}</span>' + links)
