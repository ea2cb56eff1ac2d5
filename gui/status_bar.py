"""The status bar: the loaded model on the right; on the left what is happening now, the last result (a load,
an export) or the last error. Unexpected errors also open a dialog with the details."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QLabel, QMessageBox, QSizePolicy, QStatusBar

from inference.events import STOCK_DECODE
from inference.settings import PREFILL_CHUNK

from gui.link.controller import Controller
from gui.state.speculation import counters
from gui.state.format import fmt_bytes, fmt_params, plural


def decode_summary(decode_path: str) -> str:
    """The status line's words for ModelInfo.decode_path: "fused kernels", "stock PyTorch ops: the kernels did not
    build", without the kernels' shape or the compiler's error and log (the tooltip has the whole path)."""
    if decode_path.startswith(f"{STOCK_DECODE}: "):
        return decode_path.partition(" (")[0]
    return decode_path.partition(", ")[0]


class StatusBar(QStatusBar):
    def __init__(self, controller: Controller):
        super().__init__()
        # As QMainWindow.statusBar() sets up its own bar: a long message never makes the window wider.
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.controller = controller
        self.model = QLabel("no model")
        self.state = QLabel()
        self._error = ""  # the last error, shown until the next request
        self.addPermanentWidget(self.model)
        self.addWidget(self.state, 1)
        controller.model_changed.connect(self._show_model)
        controller.weights_checked.connect(self._show_model)
        controller.state_changed.connect(self.show_generation)
        controller.error.connect(self._show_error)
        controller.progress.connect(self._show_progress)

    def say(self, text: str) -> None:
        if self.state.text() != text:  # state_changed comes at every step; only a new text needs the label redone
            self.state.setText(text)

    def show_generation(self) -> None:
        """Running, or what the last prefill read and how far generation got; a load keeps its own text."""
        c = self.controller
        if c.busy or c.running or c.loading:
            self._error = ""  # a new request: the last error is history
        elif self._error:
            self.say(self._error)  # it stays until the next request, not overwritten by the status after it
            return
        if c.running:
            self.say("Running… (Space or Pause to pause, Esc to stop)")
        elif c.prefilling and c.prefill_event is None:  # not the last run's numbers meanwhile
            self.say("Reading the prompt… (Esc cancels)")
        elif c.prefill_event is not None and not c.busy and not c.loading:
            p = c.prefill_event
            spec = counters(c.history)
            self.say(f"Prefilled {plural(p.n_tokens, 'token')} in {p.ms:.0f} ms · {len(c.steps)} generated"
                     + (f" · {spec.text()}" if spec is not None else "")
                     + (f" · ended: {c.stopped.reason}" if c.stopped else ""))

    def _show_progress(self, stage: str, done: int, total: int) -> None:
        """A long prompt is read in chunks of PREFILL_CHUNK positions, each chunk one parallel pass."""
        if stage == "prefill" and total > PREFILL_CHUNK:
            chunk, chunks = -(-done // PREFILL_CHUNK), -(-total // PREFILL_CHUNK)
            self.say(f"Reading the prompt: chunk {chunk} of {chunks} read ({done:,} of {total:,} positions, "
                     f"{PREFILL_CHUNK} at a time in one parallel pass each) · Esc cancels")

    def _show_model(self) -> None:
        info = self.controller.info
        if info is None:
            self.model.setText("no model")
            return
        # How a decode step runs: the whole layer in one kernels call, each product on the kernels (a family
        # the fused layer cannot compute, e.g. Qwen3's q/k norm), or stock ops. The kernels' shape ("4 rows/pass
        # far apart, no prefetch") and a failed build's compiler error are in the tooltip: on the line they pushed
        # the fingerprint off a 1600 px window.
        decode = f" · decode: {html.escape(decode_summary(info.decode_path))}" if info.decode_path else ""
        weights = "weights on the server" if info.dtype == "remote" else f"weights {fmt_bytes(info.weights_bytes)}"
        self.model.setText(
            f"<b>{info.name}</b> · {fmt_params(info.n_params)} · {info.dtype} · {info.device}{decode} · "
            f"context window {info.context_length:,} tokens · {weights}" + self._fingerprint())

    def _fingerprint(self) -> str:
        """The weights' fingerprint at load, and as re-hashed after the last run: equal (inference never
        changes a weight)."""
        check, info = self.controller.weights_check, self.controller.info
        notes = f"{info.dtype}: {info.decode_notes}\n" if info.decode_notes else ""  # int8: its head, its path
        decode = f"\nDecode: {info.decode_path}" if info.decode_path else ""
        if check is None:
            self.model.setToolTip(f"{notes}Weights fingerprint at load: {info.weights_fingerprint}{decode}")
            return f" · fingerprint {info.weights_fingerprint[:8]}"
        same = check.now == check.at_load
        self.model.setToolTip(f"{notes}Weights fingerprint (sha256 of every weight's bytes)\n"
                              f"at load:      {check.at_load}\n"
                              f"re-hashed now: {check.now} ({check.ms:.0f} ms, in the engine)\n"
                              + ("equal: generating never changes a weight" if same else "DIFFERENT") + decode)
        mark = "= after the run ✓" if same else f"≠ {check.now[:8]} after the run ✗"
        return f" · fingerprint {check.at_load[:8]} {mark}"

    def _show_error(self, message: str, details: str, expected: bool) -> None:
        self._error = message
        self.say(message)
        if not expected:
            box = QMessageBox(QMessageBox.Critical, "Something went wrong", message, parent=self.window())
            box.setDetailedText(details)
            box.open()
