"""The Context view's plain transcript: the prompt (the chat template as the model read it) and the answer
as ordinary text, the template's special tokens dimmed; read-only, for reading a long answer whole."""

from __future__ import annotations

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit

from gui.theme import Appearance


class Transcript(QPlainTextEdit):
    def __init__(self, appearance: Appearance):
        super().__init__()
        self.appearance = appearance
        self.setReadOnly(True)
        self.setPlaceholderText("The prompt and the answer appear here as plain text after Prefill (Ctrl+P).")
        self._shown: tuple = ()

    def show_tokens(self, tokens) -> None:
        """`tokens`: the prompt's and then the generated Token events, in order. Redrawn only when they
        changed; kept scrolled to the end while the reader is there."""
        key = tuple((t.id, t.text) for t in tokens)
        if key == self._shown:
            return
        self._shown = key
        bar = self.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        self.clear()
        cursor = self.textCursor()
        plain, dim = QTextCharFormat(), QTextCharFormat()
        plain.setForeground(QColor(self.appearance.theme.text))
        dim.setForeground(QColor(self.appearance.theme.muted))
        run, special = [], False
        for token in tokens:  # runs of one kind, inserted at once
            if token.special != special and run:
                cursor.insertText("".join(run), dim if special else plain)
                run = []
            special = token.special
            run.append(token.text)
        if run:
            cursor.insertText("".join(run), dim if special else plain)
        if follow:
            self.moveCursor(QTextCursor.End)
            bar.setValue(bar.maximum())

    def restyle(self) -> None:
        self._shown = ()  # recoloured at the next show_tokens
