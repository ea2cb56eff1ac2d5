"""Model → Connect to server…: the address of a llama.cpp, vLLM or SGLang server, and optionally the served
model's tokenizer, loaded like any model (the engine connects and checks the tokenizer; a failure is the
usual one-line load error and the previous model stays).

With no tokenizer named, the server's reported model path would decide which local file is read: so Connect
first asks the server (`inference.store.remote_model.offer`, in a process of its own, as the GUI never
imports torch) and shows that path and the local tokenizer it names, filled in; a second Connect reads it,
Browse… or an edit names another, Cancel declines."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlencode

from PySide6.QtCore import QProcess, QSettings
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QWidget)

from inference.messages import from_data

from gui.state.engine_words import word
from gui.state.i18n import translate

DEFAULT_URL = "http://127.0.0.1:8080"
ROOT = Path(__file__).resolve().parents[2]  # where `python -m inference...` finds the package


def server_spec(url: str, tokenizer: str = "") -> str:
    """What the engine loads: the URL, with a named tokenizer riding along as `#tokenizer=PATH`."""
    url = url.strip()
    return f"{url}#{urlencode({'tokenizer': tokenizer.strip()})}" if tokenizer.strip() else url


class ConnectDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, url: str = DEFAULT_URL, tokenizer: str = ""):
        super().__init__(parent)
        self.setWindowTitle(translate("Connect", "Connect to an inference server"))
        self.url = QLineEdit(url)
        self.url.setPlaceholderText(DEFAULT_URL)
        self.tokenizer = QLineEdit(tokenizer)
        self.tokenizer.setPlaceholderText(translate("Connect", "left empty: the one the server's model path names here, "
                                                    "shown first"))
        browse = QPushButton(translate("Connect", "Browse…"))
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.tokenizer, 1)
        row.addWidget(browse)
        note = QLabel(translate("Connect", "llama.cpp (llama-server), vLLM or SGLang. Each step is one request with the "
                                "context as token ids; the server sends its top-N, the rest shows as one \"other\" bar. "
                                "The logit lens and attention need the weights here: they are off while connected."))
        note.setWordWrap(True)
        note.setObjectName("muted")
        self.offered = QLabel("")  # what the server said its model path names here, once asked
        self.offered.setWordWrap(True)
        self.offered_path = ""  # the tokenizer the server's model path named, filled into `tokenizer`
        self.asking: QProcess | None = None
        self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        self.buttons.button(QDialogButtonBox.Ok).setText(translate("Connect", "Connect"))
        self.buttons.button(QDialogButtonBox.Cancel).setText(translate("Connect", "Cancel"))
        self.buttons.accepted.connect(self._connect)
        self.buttons.rejected.connect(self.reject)
        self.url.textChanged.connect(self._url_changed)
        form = QFormLayout(self)
        form.addRow(translate("Connect", "Server address"), self.url)
        form.addRow(translate("Connect", "Tokenizer (optional)"), row)
        form.addRow(self.offered)
        form.addRow(note)
        form.addRow(self.buttons)
        self.resize(560, self.sizeHint().height())
        self._check()

    def _check(self) -> None:
        ok = self.url.text().strip().startswith(("http://", "https://")) and len(self.url.text().strip()) > 8
        self.buttons.button(QDialogButtonBox.Ok).setEnabled(ok and self.asking is None)

    def _url_changed(self) -> None:
        """Another server: what the last one offered no longer holds."""
        if self.offered_path and self.tokenizer.text() == self.offered_path:
            self.tokenizer.clear()
        self.offered_path = ""
        self.offered.setText("")
        self._check()

    def _connect(self) -> None:
        if self.tokenizer.text().strip():
            self.accept()
            return
        self.offered.setText(translate("Connect", "Asking the server which model it serves…"))
        self.asking = QProcess(self)
        self.asking.setWorkingDirectory(str(ROOT))
        self.asking.finished.connect(self._answered)
        self.asking.errorOccurred.connect(self._not_started)
        self.asking.start(sys.executable, ["-m", "inference.store.remote_model", self.url.text().strip()])
        self._check()

    def _not_started(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.FailedToStart:  # no `finished` follows
            self._answered()

    def _answered(self) -> None:
        asked, self.asking = self.asking, None
        asked.deleteLater()
        lines = bytes(asked.readAllStandardOutput()).decode("utf-8", "replace").splitlines()
        try:
            said = json.loads(lines[-1])
        except (IndexError, ValueError):  # it failed to start, or crashed: its last word
            err = bytes(asked.readAllStandardError()).decode("utf-8", "replace").strip().splitlines()
            said = {"error": translate("Connect", "could not ask the server ({error})").format(
                error=err[-1] if err else asked.errorString())}
        self.offered.setText(offer_text(said))
        if said.get("tokenizer"):
            self.offered_path = said["tokenizer"]
            self.tokenizer.setText(self.offered_path)
        self._check()

    def done(self, result: int) -> None:
        if self.asking is not None:  # closed while asking: the answer is no longer wanted
            asked, self.asking = self.asking, None
            asked.finished.disconnect(self._answered)
            asked.kill()
            asked.waitForFinished(2000)
        super().done(result)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, translate("Connect", "The served model's tokenizer"), "",
                                              translate("Connect", "Tokenizers (tokenizer.json *.gguf);;All files (*)"))
        if path:
            self.tokenizer.setText(path)

    def spec(self) -> str:
        return server_spec(self.url.text(), self.tokenizer.text())

    def named(self) -> str:
        """The tokenizer the user named, not the one the server's model path offered (asked again next time)."""
        text = self.tokenizer.text().strip()
        return "" if text == self.offered_path else text


def offer_text(said: dict) -> str:
    """What the dialog says about a server's `remote_model.offer`."""
    if said.get("error"):  # the engine's sentence, worded here when it came with its code
        return word(from_data(said["said"]) if "said" in said else None, said["error"])
    where = translate("Connect", "The {dialect} server reports its model at {path}").format(
        dialect=said["dialect"], path=said["model_path"] or translate("Connect", "(no path)"))
    if said.get("tokenizer"):
        return translate("Connect", "{where}: its tokenizer will be read from {tokenizer} on this machine. Connect to "
                         "read it, or name another.").format(where=where, tokenizer=said["tokenizer"])
    return translate("Connect", "{where}, which names no tokenizer on this machine: name the served model's "
                     "tokenizer.").format(where=where)


def connect_to_server(window) -> None:
    """Ask for the address (the last one used is offered again) and load it through the window's loader."""
    stored = getattr(window, "qsettings", None) or QSettings()
    dialog = ConnectDialog(window, str(stored.value("server/url", DEFAULT_URL)),
                           str(stored.value("server/tokenizer", "")))
    if dialog.exec() == QDialog.Accepted:
        stored.setValue("server/url", dialog.url.text().strip())
        stored.setValue("server/tokenizer", dialog.named())
        window.load_model(dialog.spec())
