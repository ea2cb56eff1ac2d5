"""Choose a layer and a head; the query heads are grouped by the K/V head they share (grouped-query
attention), both in the head list and in a line that draws the groups: "K/V head 0: q0 q1 q2 │ ...".
A head in that line is a link: click it to show it."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from inference.attention import kv_groups

from gui.state.i18n import translate
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
        self.layer_label, self.head_label = QLabel(), QLabel()
        for widget in (self.layer_label, self.layer, self.head_label, self.head):
            row.addWidget(widget)
        self.row = row
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.groups)
        self.n_heads, self.n_kv_heads = 0, 0
        self.group_items: dict[int, int] = {}  # the head list's rows that head a K/V group: their group
        self.brief = False  # only the heads' links, the words about them in the tooltip (a short dock)
        self.layer.currentIndexChanged.connect(self._changed)
        self.head.currentIndexChanged.connect(self._changed)
        self.retranslate()

    def retranslate(self) -> None:
        """The labels, and the lists' words (their data, and so the choice, unchanged)."""
        self.layer_label.setText(translate("Attention", "Layer"))
        self.head_label.setText(translate("Attention", "Head"))
        for i in range(self.layer.count()):
            self.layer.setItemText(i, translate("Attention", "{layer} of {n}").format(layer=i + 1, n=self.layer.count()))
        for i in range(self.head.count()):
            data = self.head.itemData(i)
            if data == MEAN:
                self.head.setItemText(i, translate("Attention", "mean of all heads"))
            elif i in self.group_items:  # a K/V group's heading
                self.head.setItemText(i, translate("Attention", "K/V head {kv}:").format(kv=self.group_items[i]))
        self._draw_groups()
    def set_model(self, n_layers: int, n_heads: int, n_kv_heads: int) -> None:
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        for combo in (self.layer, self.head):
            combo.blockSignals(True)
            combo.clear()
        for layer in range(n_layers):
            self.layer.addItem(translate("Attention", "{layer} of {n}").format(layer=layer + 1, n=n_layers), layer)
        self.head.addItem(translate("Attention", "mean of all heads"), MEAN)
        self.group_items = {}
        model: QStandardItemModel = self.head.model()
        grouped = n_kv_heads < n_heads
        for kv, heads in enumerate(kv_groups(n_heads, n_kv_heads)):
            if grouped:
                self.group_items[self.head.count()] = kv
                self.head.addItem(translate("Attention", "K/V head {kv}:").format(kv=kv), None)
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
            return translate("Attention", "the mean of all heads")
        if self.n_kv_heads < self.n_heads:
            return translate("Attention", "query head q{head} (K/V head {kv})").format(
                head=head, kv=head // (self.n_heads // self.n_kv_heads))
        return translate("Attention", "head {head}").format(head=head)

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
            head_word = translate("Attention", "{kv_mark}&nbsp;head&nbsp;{kv}:").format(kv_mark=KV, kv=kv)
            parts.append(f'<span style="color:{t.muted}">{head_word}</span>&nbsp;{links}')
        if self.n_kv_heads < self.n_heads:
            group = self.n_heads // self.n_kv_heads
            intro = translate("Attention", "Grouped-query attention: {heads} query heads share {kv_heads} K/V heads "
                              "({group} each: one cached K/V serves the whole group). ").format(
                heads=self.n_heads, kv_heads=self.n_kv_heads, group=group).replace("K/V", KV)
        else:
            intro = translate("Attention", "{heads} heads, each with its own K/V head. ").format(heads=self.n_heads)
        links = " &nbsp;│&nbsp; ".join(parts)
        self.groups.setToolTip(intro.replace(KV, "K/V") if self.brief else "")
        if self.brief and self.n_kv_heads < self.n_heads:  # the gist; the tooltip says the rest
            intro = translate("Attention", "{heads} query heads share {kv_heads} {kv_mark} heads: ").format(
                heads=self.n_heads, kv_heads=self.n_kv_heads, kv_mark=KV)
        elif self.brief:
            intro = ""
        self.groups.setText(f'<span style="color:{t.muted}">{intro}</span>' + links)
