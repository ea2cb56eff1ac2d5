"""Model → Connect to server…: the address of a llama.cpp, vLLM or SGLang server, and optionally the served
model's tokenizer, loaded like any model (the engine connects and checks the tokenizer; a failure is the
usual one-line load error and the previous model stays)."""

from __future__ import annotations

from urllib.parse import urlencode

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QWidget)

DEFAULT_URL = "http://127.0.0.1:8080"


def server_spec(url: str, tokenizer: str = "") -> str:
    """What the engine loads: the URL, with a named tokenizer riding along as `#tokenizer=PATH`."""
    url = url.strip()
    return f"{url}#{urlencode({'tokenizer': tokenizer.strip()})}" if tokenizer.strip() else url


class ConnectDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, url: str = DEFAULT_URL, tokenizer: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Connect to an inference server")
        self.url = QLineEdit(url)
        self.url.setPlaceholderText(DEFAULT_URL)
        self.tokenizer = QLineEdit(tokenizer)
        self.tokenizer.setPlaceholderText("the server's own, when its model path is readable here")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.tokenizer, 1)
        row.addWidget(browse)
        note = QLabel("llama.cpp (llama-server), vLLM or SGLang. Each step is one request with the context as "
                      "token ids; the server sends its top-N, the rest shows as one \"other\" bar. The logit lens "
                      "and attention need the weights here: they are off while connected.")
        note.setWordWrap(True)
        note.setObjectName("muted")
        self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        self.buttons.button(QDialogButtonBox.Ok).setText("Connect")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.url.textChanged.connect(self._check)
        form = QFormLayout(self)
        form.addRow("Server address", self.url)
        form.addRow("Tokenizer (optional)", row)
        form.addRow(note)
        form.addRow(self.buttons)
        self.resize(560, self.sizeHint().height())
        self._check()

    def _check(self) -> None:
        ok = self.url.text().strip().startswith(("http://", "https://")) and len(self.url.text().strip()) > 8
        self.buttons.button(QDialogButtonBox.Ok).setEnabled(ok)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "The served model's tokenizer", "",
                                              "Tokenizers (tokenizer.json *.gguf);;All files (*)")
        if path:
            self.tokenizer.setText(path)

    def spec(self) -> str:
        return server_spec(self.url.text(), self.tokenizer.text())


def connect_to_server(window) -> None:
    """Ask for the address (the last one used is offered again) and load it through the window's loader."""
    stored = getattr(window, "qsettings", None) or QSettings()
    dialog = ConnectDialog(window, str(stored.value("server/url", DEFAULT_URL)),
                           str(stored.value("server/tokenizer", "")))
    if dialog.exec() == QDialog.Accepted:
        stored.setValue("server/url", dialog.url.text().strip())
        stored.setValue("server/tokenizer", dialog.tokenizer.text().strip())
        window.load_model(dialog.spec())
