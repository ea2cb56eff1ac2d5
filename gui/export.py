"""Export: the events so far as a JSON Lines trace, and the window or one dock as a PNG.

Each returns the path written, or None when there was nothing to write or the user cancelled; with no path
given, a file dialog asks for one."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from gui.state.i18n import translate
from gui.status_bar import StatusBar


def export_trace(parent: QWidget, lines: list[str], status: StatusBar, path: str | None = None) -> str | None:
    if not lines:
        status.say(translate("Export", "Nothing to export yet."))
        return None
    if not path:
        path, _ = QFileDialog.getSaveFileName(parent, translate("Export", "Export trace"), "trace.jsonl",
                                              translate("Export", "JSON Lines (*.jsonl)"))
    if not path:
        return None
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    events = len(lines)
    status.say(translate("Export", "Trace written to {path} (%n event(s))", None, events).format(path=path))
    return path


def export_png(parent: QWidget, widget: QWidget, name: str, status: StatusBar, path: str | None = None) -> str | None:
    """Save what `widget` shows; `name` is the file name the dialog suggests."""
    if not path:
        path, _ = QFileDialog.getSaveFileName(parent, translate("Export", "Export as PNG"), name,
                                              translate("Export", "PNG image (*.png)"))
    if not path:
        return None
    if not widget.grab().save(path, "PNG"):
        QMessageBox.warning(parent, translate("Export", "Export failed"),
                            translate("Export", "Could not write {path}").format(path=path))
        return None
    status.say(translate("Export", "Saved {path}").format(path=path))
    return path
