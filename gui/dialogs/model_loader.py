"""Loading a model: what to load (a file, a folder, the default), on which device and in which data type, the
progress dialog while it loads, and what to say when it is done or has failed."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QProgressDialog, QWidget

from inference.store import model_settings
from inference.progress import STAGES, StderrProgress, describe
from inference.settings import DEVICE_CHOICES, DTYPE_CHOICES

from gui.link.controller import Controller
from gui.status_bar import StatusBar

# What each stage of a load says in the dialog and the status bar; the same words go to the terminal.
PROGRESS_STAGES = {stage: text[0].upper() + text[1:] for stage, text in STAGES.items()}


class ModelLoader(QObject):
    def __init__(self, window: QWidget, controller: Controller, status: StatusBar, spec: str, device: str,
                 dtype: str):
        super().__init__(window)
        self.window, self.controller, self.status = window, controller, status
        self.device, self.dtype = device, dtype
        self.spec = spec  # what is loaded: 'default', a folder or a .gguf
        self._requested_spec = spec
        self.progress: QProgressDialog | None = None
        self.terminal = StderrProgress()
        self.error_box: QMessageBox | None = None
        self.device_actions: dict[str, QAction] = {}
        controller.progress.connect(self._on_progress)
        controller.load_finished.connect(self._on_finished)

    def load(self, spec: str) -> None:
        self._requested_spec = spec
        what = Path(spec).name if spec != 'default' else 'the default model'
        self.terminal = StderrProgress()  # one line per stage on stderr too: a first start takes a while
        self.terminal(f"loading {what}", 0, 1)
        self.status.say(f"Loading {what}…")
        self.progress = QProgressDialog("Loading the model…", "Cancel", 0, 0, self.window)
        self.progress.setWindowTitle("TokenStep")
        self.progress.setMinimumDuration(400)  # quick loads from the cache never flash a dialog
        self.progress.setWindowModality(Qt.WindowModal)
        self.progress.setAutoClose(False)
        self.progress.setAutoReset(False)
        self.progress.canceled.connect(self.controller.cancel_load)
        self.controller.load(spec, self.device, self.dtype)

    def open_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, "Open a Hugging Face model folder")
        if folder:
            self.load(folder)

    def open_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open a GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.load(path)

    def fill_menu(self, menu: QMenu) -> None:
        """The Model menu: a device and a data type; choosing one reloads the model with it."""
        self.device_actions = _choices(menu.addMenu("Device"), DEVICE_CHOICES, self.device, self._set_device)
        _choices(menu.addMenu("Data type"), DTYPE_CHOICES, self.dtype, self._set_dtype)
        menu.aboutToShow.connect(self._offer_cuda)
        menu.addSeparator()
        menu.addAction("Check the weights are unchanged", self.controller.check_weights)

    def close_progress(self) -> None:
        if self.progress is not None:
            self.progress.canceled.disconnect()
            # reset() stops the dialog's show-after-400-ms timer: closed alone, a dialog not yet shown would
            # still pop up (modal, its Cancel connected to nothing) over the error box that follows.
            self.progress.reset()
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None

    def _set_device(self, device: str) -> None:
        self.device = device
        if self.controller.info is not None:
            self.load(self.spec)

    def _set_dtype(self, dtype: str) -> None:
        self.dtype = dtype
        if self.controller.info is not None:
            self.load(self.spec)

    def _offer_cuda(self) -> None:
        if self.controller.cuda_available is not None:  # the engine says so once it is up
            self.device_actions["cuda"].setEnabled(self.controller.cuda_available)

    def _on_progress(self, stage: str, done: int, total: int) -> None:
        if stage == "prefill":  # the status bar says which chunk of a long prompt is being read
            return
        self.terminal(stage, done, total)
        text = describe(stage, done, total)
        text = text[0].upper() + text[1:]
        self.status.say(text + "…")
        if self.progress is not None:
            self.progress.setLabelText(text + "…")
            self.progress.setMaximum(total if total > 1 else 0)
            self.progress.setValue(done if total > 1 else 0)

    def _on_finished(self, ok: bool, message: str) -> None:
        self.close_progress()
        if ok:
            self.terminal.ready(f"{self.controller.info.name} ready")
            if "in the background" in self.controller.info.decode_path:  # loaded on stock ops meanwhile
                self.terminal("compiling the decode kernels in the background, once (~15-60 s)", 0, 1)
            self.spec = self._requested_spec
            model_settings.record_loaded(self.spec)  # listed first under Model → Open… from now on
            self.status.say("Model ready: write a prompt and press Prefill (Ctrl+P), then Step (Space).")
            return
        previous = self.controller.info
        still = f"; still using {previous.name}." if previous else "."
        if not message:
            self.status.say("Loading cancelled" + still)
            return
        self.status.say("Could not load the model" + still)
        self.show_error("Could not load the model", message + (
            f"\n\nThe previous model ({previous.name}) is still loaded." if previous else ""))

    def show_error(self, title: str, text: str) -> None:
        """A window-modal error box that does not block the event loop: replies keep arriving, and one click
        on OK closes it."""
        if self.error_box is not None:
            self.error_box.close()
        box = QMessageBox(QMessageBox.Critical, title, text, QMessageBox.Ok, self.window)
        box.setAttribute(Qt.WA_DeleteOnClose)
        box.finished.connect(self._error_closed)
        self.error_box = box
        box.open()

    def _error_closed(self) -> None:
        self.error_box = None


def _choices(menu: QMenu, choices, current: str, slot) -> dict[str, QAction]:
    """One checkable action per choice, exclusive; choosing one calls slot(choice)."""
    group = QActionGroup(menu)
    actions = {}
    for choice in choices:
        act = menu.addAction(choice, lambda c=choice: slot(c))
        act.setCheckable(True)
        act.setChecked(choice == current)
        group.addAction(act)
        actions[choice] = act
    return actions
