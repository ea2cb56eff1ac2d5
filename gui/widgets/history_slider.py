"""History: the toolbar's slider over the steps so far (and the next, not yet drawn one), with its label."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QSlider

from gui.state.i18n import translate
from gui.state.intents import Intents
from gui.widgets.wrap_label import SteadyLabel


class HistorySlider(QSlider):
    """Moving it selects a step (an intent); every redraw moves it to the shown step. `label` says where it is
    (the toolbar places it apart from the slider, after the Next button)."""

    def __init__(self, intents: Intents):
        super().__init__(Qt.Horizontal)
        self.intents = intents
        self.setMinimumWidth(260)
        self.setRange(1, 1)
        # its size fixed: a label whose text changes at every frame would re-lay out the whole window
        self.label = SteadyLabel(self._widest())
        self._following = False  # True while the slider follows the intents: no select() back
        self.valueChanged.connect(self._select)
        intents.redraw.connect(self._follow)
        self.retranslate()

    @staticmethod
    def _widest() -> tuple[str, ...]:
        return (translate("History", " step {index}: next (not drawn)").format(index=99999),
                translate("History", " step {index} of {n}").format(index=99999, n=99999))

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:
            self.retranslate()

    def retranslate(self) -> None:
        self.setToolTip(translate("History", "Scrub to any step: its distribution, draw, settings and timing (the last "
                                  "position is the next, not yet drawn step)"))
        self.label.set_widest(self._widest())
        self._follow()

    def scrub(self, delta: int) -> None:
        self.setValue(self.value() + delta)

    def _select(self, value: int) -> None:
        if not self._following:
            self.intents.select(value)

    def _follow(self) -> None:
        c = self.intents
        n = len(c.steps)
        shown = c.shown()
        has_next = c.pending is not None and c.pending.index == n + 1
        self._following = True
        self.setRange(1, max(n + (1 if has_next else 0), 1))
        if shown is not None:
            self.setValue(shown.index)
        self._following = False
        self.setEnabled(n > 0)
        if shown is None:
            self.label.setText(translate("History", " no steps yet"))
        elif shown.pending:
            self.label.setText(translate("History", " step {index}: next (not drawn)").format(index=shown.index))
        else:
            self.label.setText(translate("History", " step {index} of {n}").format(index=shown.index, n=n))
