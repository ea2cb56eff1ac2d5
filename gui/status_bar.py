"""The status bar: the loaded model on the right; on the left what is happening now, the last result (a load,
an export) or the last error. Unexpected errors also open a dialog with the details."""

from __future__ import annotations

import html
import sys

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QLabel, QMessageBox, QSizePolicy, QStatusBar

from inference.events import STOCK_DECODE
from inference.settings import PREFILL_CHUNK

from gui.link.controller import Controller
from gui.state.speculation import counters
from gui.state.format import fmt_bytes, fmt_params, stop_reason
from gui.state.i18n import QT_TRANSLATE_NOOP, number, translate
from gui.widgets.wrap_label import ElidedLabel

# The engine's usual decode paths (ModelInfo.decode_path, as decode_summary shortens it), worded here; another
# (a server's) is shown as the engine wrote it.
DECODE_WORDS = {
    "fused kernels": QT_TRANSLATE_NOOP("StatusBar", "fused kernels"),
    "kernels per product": QT_TRANSLATE_NOOP("StatusBar", "kernels per product"),
    STOCK_DECODE: QT_TRANSLATE_NOOP("StatusBar", "stock PyTorch ops"),
    f"{STOCK_DECODE} (compiling the decode kernels in the background…)":
        QT_TRANSLATE_NOOP("StatusBar", "stock PyTorch ops (compiling the decode kernels in the background…)"),
    f"{STOCK_DECODE}: the kernels did not build":
        QT_TRANSLATE_NOOP("StatusBar", "stock PyTorch ops: the kernels did not build"),
}


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
        self.model = QLabel(translate("StatusBar", "no model"))
        self.state = ElidedLabel()  # cut short with "…" before the model line is pushed off the window
        self.hint = QLabel()  # a standing hint (no font for the chosen language), shown only when there is one
        self.hint.setObjectName("warning")
        self.hint.hide()
        self.addPermanentWidget(self.hint)
        self._error = ""  # the last error, shown until the next request
        self._forms: list[str] = []  # the model line, whole first, then shorter (_fit_model shows one that fits)
        self._tip = self._whole = ""
        self.addPermanentWidget(self.model)
        self.addWidget(self.state, 1)
        controller.model_changed.connect(self._show_model)
        controller.weights_checked.connect(self._show_model)
        controller.state_changed.connect(self.show_generation)
        controller.error.connect(self._show_error)
        controller.progress.connect(self._show_progress)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:  # the same state, in the new language's words
            self._show_model()
            self.show_generation()

    def set_hint(self, text: str) -> None:
        self.hint.setText(text)
        self.hint.setToolTip(text)
        self.hint.setVisible(bool(text))

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
            self.say(translate("StatusBar", "Running… (Space or Pause to pause, Esc to stop)"))
        elif c.prefilling and c.prefill_event is None:  # not the last run's numbers meanwhile
            self.say(translate("StatusBar", "Reading the prompt… (Esc cancels)"))
        elif c.prefill_event is None and c.serving.active and not c.busy and not c.loading:  # a serve ended
            s = c.serving
            n = len(s.tracks)
            self.say(translate("StatusBar", "Served %n request(s) together · {tps} tokens/s in all", None, n).format(
                tps=number(s.tokens_per_s, 1)) if s.done else
                translate("StatusBar", "%n request(s) served so far: Continue in the Serving dock goes on", None, n))
        elif c.prefill_event is not None and not c.busy and not c.loading:
            p = c.prefill_event
            spec = counters(c.history)
            read = p.n_tokens
            self.say(translate("StatusBar", "Prefilled %n token(s) in {ms} ms · {generated} generated", None, read).format(ms=number(p.ms), generated=len(c.steps))
                     + (f" · {spec.text()}" if spec is not None else "")
                     + (" · " + translate("StatusBar", "ended: {reason}").format(reason=stop_reason(c.stopped.reason))
                        if c.stopped else ""))

    def _show_progress(self, stage: str, done: int, total: int) -> None:
        """A long prompt is read in chunks of PREFILL_CHUNK positions, each chunk one parallel pass."""
        if stage == "prefill" and total > PREFILL_CHUNK:
            chunk, chunks = -(-done // PREFILL_CHUNK), -(-total // PREFILL_CHUNK)
            self.say(translate("StatusBar", "Reading the prompt: chunk {chunk} of {chunks} read ({done} of {total} "
                               "positions, {size} at a time in one parallel pass each) · Esc cancels").format(
                chunk=chunk, chunks=chunks, done=number(done), total=number(total), size=PREFILL_CHUNK))

    def _show_model(self) -> None:
        info = self.controller.info
        if info is None:
            self._forms = []
            self.model.setToolTip("")
            self.model.setText(translate("StatusBar", "no model"))
            return
        # How a decode step runs: the whole layer in one kernels call, each product on the kernels (a family
        # the fused layer cannot compute, e.g. Qwen3's q/k norm), or stock ops. The kernels' shape ("4 rows/pass
        # far apart, no prefetch") and a failed build's compiler error are in the tooltip: on the line they pushed
        # the fingerprint off a 1600 px window.
        summary = decode_summary(info.decode_path)
        summary = translate("StatusBar", DECODE_WORDS[summary]) if summary in DECODE_WORDS else summary
        decode = translate("StatusBar", "decode: {path}").format(path=summary) if info.decode_path else ""
        weights = translate("StatusBar", "weights on the server") if info.dtype == "remote" else \
            translate("StatusBar", "weights {size}").format(size=fmt_bytes(info.weights_bytes))
        length = info.context_length
        window = translate("StatusBar", "context window %n token(s)", None, length)
        fingerprint, self._tip = self._fingerprint()
        # The longest form that fits beside the left line's first words: a narrow window (1024 px) drops the
        # decode path (form 1), then the dtype and device (2), then the parameter count (3); the tooltip keeps
        # everything. The name, the context window, the weights and their fingerprint are what the line is for.
        parts = ((info.name, 4), (fmt_params(info.n_params), 3), (info.dtype, 2), (info.device, 2), (decode, 1),
                 (window, 4), (weights, 4))
        self._whole = " · ".join(text for text, _ in parts if text) + fingerprint  # the tooltip's first line when cut
        self._forms = [" · ".join(f"<b>{html.escape(text)}</b>" if i == 0 else html.escape(text)
                                  for i, (text, kept_until) in enumerate(parts) if text and kept_until > form)
                       + fingerprint for form in range(4)]
        self._fit_model()

    def _fit_model(self) -> None:
        if not self._forms:
            return
        # the left line keeps about 24 characters (what is happening: "Prefilled 10 tokens in 59 ms · 64 …")
        left = max(self.state.minimumSizeHint().width(), self.state.fontMetrics().averageCharWidth() * 24)
        hint = self.hint.sizeHint().width() if self.hint.isVisible() else 0
        room = self.width() - left - hint - 40 if self.isVisible() else sys.maxsize
        for form in self._forms:
            if form != self.model.text():
                self.model.setText(form)
            if self.model.sizeHint().width() <= room:
                break
        self.model.setToolTip(self._tip if form == self._forms[0] else f"{self._whole}\n{self._tip}")

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_model()

    def _fingerprint(self) -> tuple[str, str]:
        """The weights' fingerprint at load, and as re-hashed after the last run: equal (inference never
        changes a weight). (The model line's end, the model line's tooltip.)"""
        check, info = self.controller.weights_check, self.controller.info
        notes = f"{info.dtype}: {info.decode_notes}\n" if info.decode_notes else ""  # int8: its head, its path
        decode = "\n" + translate("StatusBar", "Decode: {path}").format(path=info.decode_path) if info.decode_path else ""
        fingerprint = translate("StatusBar", "fingerprint {hash}")
        if check is None:
            tip = notes + translate("StatusBar", "Weights fingerprint at load: {hash}").format(
                hash=info.weights_fingerprint) + decode
            return " · " + fingerprint.format(hash=info.weights_fingerprint[:8]), tip
        same = check.now == check.at_load
        tip = (notes + translate(
            "StatusBar", "Weights fingerprint (sha256 of every weight's bytes)\nat load:      {at_load}\n"
            "re-hashed now: {now} ({ms} ms, in the engine)\n").format(at_load=check.at_load, now=check.now,
                                                                     ms=number(check.ms))
               + (translate("StatusBar", "equal: generating never changes a weight") if same
                  else translate("StatusBar", "DIFFERENT")) + decode)
        mark = translate("StatusBar", "= after the run ✓") if same else \
            translate("StatusBar", "≠ {hash} after the run ✗").format(hash=check.now[:8])
        return " · " + fingerprint.format(hash=check.at_load[:8]) + " " + mark, tip

    def _show_error(self, message: str, details: str, expected: bool) -> None:
        self._error = message
        self.say(message)
        if not expected:
            box = QMessageBox(QMessageBox.Critical, translate("StatusBar", "Something went wrong"), message,
                              parent=self.window())
            box.setDetailedText(details)
            box.open()
