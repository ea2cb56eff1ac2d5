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

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from inference.engine.protocol import ServeRequest
from inference.settings import GenerationSettings

SYSTEM = ("You are a friendly teacher. Answer in one or two short sentences, in plain words, without lists, "
          "and stop once the question is answered.")
PROMPTS = (("What is the capital of France?", 0), ("Why is the sky blue?", 0),
           ("Name three colours of the rainbow.", 2), ("What do bees make?", 5))
MAX_REQUESTS = 16


class ServeDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, settings: GenerationSettings = GenerationSettings()):
        super().__init__(parent)
        self.setWindowTitle("Serve several requests")
        self.base = settings
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(("prompt", "arrives at step"))
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.Stretch)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeToContents)
        for prompt, arrives in PROMPTS:
            self.add_row(prompt, arrives)
        add, remove = QPushButton("Add request"), QPushButton("Remove request")
        add.clicked.connect(lambda: self.add_row("Tell me a fact about the moon.", self.table.rowCount()))
        remove.clicked.connect(self.remove_row)
        rows = QHBoxLayout()
        rows.addWidget(add)
        rows.addWidget(remove)
        rows.addStretch(1)
        self.chat = QCheckBox("Chat template")
        self.chat.setChecked(True)
        self.shared = QCheckBox("The same system prompt for every request (its blocks are shared)")
        self.shared.setChecked(True)
        self.system = QLineEdit(SYSTEM)
        self.shared.toggled.connect(self.system.setEnabled)
        self.block_tokens = QSpinBox()
        self.block_tokens.setRange(1, 256)
        self.block_tokens.setValue(16)
        self.block_tokens.setSuffix(" tokens")
        self.n_blocks = QSpinBox()
        self.n_blocks.setRange(0, 100_000)
        self.n_blocks.setValue(0)
        self.n_blocks.setSpecialValueText("enough for every request at once")
        self.n_blocks.setSuffix(" blocks")
        self.n_blocks.setToolTip("A smaller pool makes a request wait until another finishes and gives its blocks back")
        self.max_new = QSpinBox()
        self.max_new.setRange(1, 4096)
        self.max_new.setValue(min(max(settings.max_new_tokens, 1), 24))
        self.budget = QSpinBox()
        self.budget.setRange(1, 4096)
        self.budget.setValue(48)
        self.budget.setSuffix(" tokens a step")
        self.budget.setToolTip("Rows of one forward pass: decode rows first, prompt chunks share the rest")
        self.error = QLabel("")
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Serve")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("", self.chat)
        form.addRow("", self.shared)
        form.addRow("System prompt", self.system)
        form.addRow("Block size", self.block_tokens)
        form.addRow("Pool size", self.n_blocks)
        form.addRow("Max new tokens", self.max_new)
        form.addRow("Token budget", self.budget)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Requests (each samples with the Controls' settings and seed + its number):"))
        layout.addWidget(self.table, 1)
        layout.addLayout(rows)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.resize(640, 520)
        self.chosen: tuple[tuple[ServeRequest, ...], int, int, int] | None = None

    def add_row(self, prompt: str, arrives: int) -> None:
        if self.table.rowCount() >= MAX_REQUESTS:
            self.error.setText(f"At most {MAX_REQUESTS} requests.")
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
        """The requests as edited; a ValueError with one line saying what is wrong."""
        if self.table.rowCount() == 0:
            raise ValueError("Add a request: there is nothing to serve.")
        system = self.system.text().strip() if self.shared.isChecked() else ""
        out = []
        for row in range(self.table.rowCount()):
            prompt = (self.table.item(row, 0).text() if self.table.item(row, 0) else "").strip()
            arrives = (self.table.item(row, 1).text() if self.table.item(row, 1) else "0").strip() or "0"
            if not prompt:
                raise ValueError(f"Request {row}'s prompt is empty.")
            if not arrives.isdigit() or int(arrives) > 100_000:
                raise ValueError(f"Request {row} arrives at step {arrives!r}: give a whole number of steps, 0 or more.")
            settings = replace(self.base, seed=self.base.seed + row, max_new_tokens=self.max_new.value())
            out.append(ServeRequest(prompt, self.chat.isChecked(), system, settings, int(arrives)))
        return tuple(out)

    def _accept(self) -> None:
        try:
            self.chosen = (self.requests(), self.block_tokens.value(), self.n_blocks.value(), self.budget.value())
        except ValueError as e:
            self.error.setText(str(e))
            return
        self.accept()
