"""Generation → Serve several requests…: a small editor of the requests a Serve sends (issue 39): their prompts
and the scheduler step each arrives at, a system prompt shared by all (so that their first KV blocks are the
same and are shared), the block size, the pool size and the token budget of a step.

The defaults show something at one click on Serve: four chat requests sharing a system prompt longer than two
blocks, arriving at steps 0, 0, 2 and 5, with a token budget small enough that a prompt is read in chunks beside
the others' decode rows. Each request samples with the Controls' settings and its own seed (the Controls' seed
plus its number), so two requests of one prompt write two different answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from gui.state.i18n import translate
from inference.engine.protocol import ServeRequest
from inference.settings import GenerationSettings

# The requests' defaults are what the model reads (an English chat model): they stay in English, as the Controls'
# default prompt does.
SYSTEM = ("You are a friendly teacher. Answer in one or two short sentences, in plain words, without lists, "
          "and stop once the question is answered.")
PROMPTS = (("What is the capital of France?", 0), ("Why is the sky blue?", 0),
           ("Name three colours of the rainbow.", 2), ("What do bees make?", 5))
MAX_REQUESTS = 16


class ServeDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, settings: GenerationSettings = GenerationSettings()):
        super().__init__(parent)
        self.base = settings
        self.table = QTableWidget(0, 2)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.Stretch)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeToContents)
        self.error = QLabel("")
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        self._error: Callable[[], str] | None = None  # the error shown, worded again at a language switch
        for prompt, arrives in PROMPTS:
            self.add_row(prompt, arrives)
        self.add_button, self.remove_button = QPushButton(), QPushButton()
        self.add_button.clicked.connect(lambda: self.add_row("Tell me a fact about the moon.", self.table.rowCount()))
        self.remove_button.clicked.connect(self.remove_row)
        rows = QHBoxLayout()
        rows.addWidget(self.add_button)
        rows.addWidget(self.remove_button)
        rows.addStretch(1)
        self.chat = QCheckBox()
        self.chat.setChecked(True)
        self.shared = QCheckBox()
        self.shared.setChecked(True)
        self.system = QLineEdit(SYSTEM)
        self.shared.toggled.connect(self.system.setEnabled)
        self.block_tokens = QSpinBox()
        self.block_tokens.setRange(1, 256)
        self.block_tokens.setValue(16)
        self.n_blocks = QSpinBox()
        self.n_blocks.setRange(0, 100_000)
        self.n_blocks.setValue(0)
        self.max_new = QSpinBox()
        self.max_new.setRange(1, 4096)
        self.max_new.setValue(min(max(settings.max_new_tokens, 1), 24))
        self.budget = QSpinBox()
        self.budget.setRange(1, 4096)
        self.budget.setValue(48)
        self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("", self.chat)
        form.addRow("", self.shared)
        self.form_labels = {key: QLabel() for key in ("system", "block", "pool", "max_new", "budget")}
        for key, field in (("system", self.system), ("block", self.block_tokens), ("pool", self.n_blocks),
                           ("max_new", self.max_new), ("budget", self.budget)):
            form.addRow(self.form_labels[key], field)
        self.requests_label = QLabel()
        layout = QVBoxLayout(self)
        layout.addWidget(self.requests_label)
        layout.addWidget(self.table, 1)
        layout.addLayout(rows)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.retranslate()
        self.resize(640, 520)
        self.chosen: tuple[tuple[ServeRequest, ...], int, int, int] | None = None

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:  # an open dialog follows View → Language too
            self.retranslate()

    def retranslate(self) -> None:
        self.setWindowTitle(translate("ServeDialog", "Serve several requests"))
        self.table.setHorizontalHeaderLabels((translate("ServeDialog", "prompt"),
                                              translate("ServeDialog", "arrives at step")))
        self.add_button.setText(translate("ServeDialog", "Add request"))
        self.remove_button.setText(translate("ServeDialog", "Remove request"))
        self.chat.setText(translate("ServeDialog", "Chat template"))
        self.shared.setText(translate("ServeDialog", "The same system prompt for every request (its blocks are "
                                      "shared)"))
        self.block_tokens.setSuffix(translate("ServeDialog", " tokens"))
        self.n_blocks.setSpecialValueText(translate("ServeDialog", "enough for every request at once"))
        self.n_blocks.setSuffix(translate("ServeDialog", " blocks"))
        self.n_blocks.setToolTip(translate("ServeDialog", "A smaller pool makes a request wait until another finishes "
                                           "and gives its blocks back"))
        self.budget.setSuffix(translate("ServeDialog", " tokens a step"))
        self.budget.setToolTip(translate("ServeDialog", "Rows of one forward pass: decode rows first, prompt chunks "
                                         "share the rest"))
        for key, text in (("system", translate("ServeDialog", "System prompt")),
                          ("block", translate("ServeDialog", "Block size")),
                          ("pool", translate("ServeDialog", "Pool size")),
                          ("max_new", translate("ServeDialog", "Max new tokens")),
                          ("budget", translate("ServeDialog", "Token budget"))):
            self.form_labels[key].setText(text)
        self.requests_label.setText(translate("ServeDialog", "Requests (each samples with the Controls' settings and "
                                              "seed + its number):"))
        self.buttons.button(QDialogButtonBox.Ok).setText(translate("ServeDialog", "Serve"))
        self.buttons.button(QDialogButtonBox.Cancel).setText(translate("ServeDialog", "Cancel"))
        self._show_error(self._error)

    def _show_error(self, error: Callable[[], str] | None) -> None:
        self._error = error
        self.error.setText(error() if error is not None else "")

    def add_row(self, prompt: str, arrives: int) -> None:
        if self.table.rowCount() >= MAX_REQUESTS:
            self._show_error(lambda: translate("ServeDialog", "At most {n} requests.").format(n=MAX_REQUESTS))
            return
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, 0, QTableWidgetItem(prompt))
        self.table.setItem(row, 1, QTableWidgetItem(str(arrives)))
        self._number_rows()

    def _number_rows(self) -> None:
        """Requests count from 0, as the Serving dock and the trace number them."""
        self.table.setVerticalHeaderLabels([str(i) for i in range(self.table.rowCount())])

    def remove_row(self) -> None:
        row = self.table.currentRow() if self.table.currentRow() >= 0 else self.table.rowCount() - 1
        if row >= 0:
            self.table.removeRow(row)
            self._number_rows()

    def requests(self) -> tuple[ServeRequest, ...]:
        """The requests as edited; a ValueError with one line saying what is wrong (in the app's language)."""
        if self.table.rowCount() == 0:
            raise ValueError(translate("ServeDialog", "Add a request: there is nothing to serve."))
        system = self.system.text().strip() if self.shared.isChecked() else ""
        out = []
        for row in range(self.table.rowCount()):
            prompt = (self.table.item(row, 0).text() if self.table.item(row, 0) else "").strip()
            arrives = (self.table.item(row, 1).text() if self.table.item(row, 1) else "0").strip() or "0"
            if not prompt:
                raise ValueError(translate("ServeDialog", "Request {request}'s prompt is empty.").format(request=row))
            if not arrives.isdigit() or int(arrives) > 100_000:
                raise ValueError(translate("ServeDialog", "Request {request} arrives at step {arrives}: give a whole "
                                           "number of steps, 0 or more.").format(request=row, arrives=repr(arrives)))
            settings = replace(self.base, seed=self.base.seed + row, max_new_tokens=self.max_new.value())
            out.append(ServeRequest(prompt, self.chat.isChecked(), system, settings, int(arrives)))
        return tuple(out)

    def _error_now(self) -> str:
        """The edited requests' error worded now (the table may have changed since: then none)."""
        try:
            self.requests()
        except ValueError as e:
            return str(e)
        return ""

    def _accept(self) -> None:
        try:
            self.chosen = (self.requests(), self.block_tokens.value(), self.n_blocks.value(), self.budget.value())
        except ValueError:
            self._show_error(self._error_now)
            return
        self.accept()
