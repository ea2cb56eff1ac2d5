"""Loading a model: what to load (a file, a folder, the default), on which device and in which data type, the
progress dialog while it loads, and what to say when it is done or has failed."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QProgressDialog, QWidget

from inference.store import model_settings
from inference.progress import StderrProgress
from inference.settings import DEVICE_CHOICES, DTYPE_CHOICES

from gui.link.controller import Controller
from gui.state.i18n import QT_TRANSLATE_NOOP, number, translate
from gui.status_bar import StatusBar

# What each stage of a load says in the dialog and the status bar, worded here from the engine's stage codes
# (inference.progress.STAGES words them in English for the terminal).
PROGRESS_STAGES = {
    "download": QT_TRANSLATE_NOOP("Loading", "Downloading the default model"),
    "verify": QT_TRANSLATE_NOOP("Loading", "Checking the download (sha256)"),
    "hash": QT_TRANSLATE_NOOP("Loading", "Checking the file (sha256)"),
    "unpack": QT_TRANSLATE_NOOP("Loading", "Unpacking the GGUF file"),
    "read": QT_TRANSLATE_NOOP("Loading", "Reading the GGUF header and tokenizer"),
    "dequantise": QT_TRANSLATE_NOOP("Loading", "Converting the weights (dequantising)"),
    "write": QT_TRANSLATE_NOOP("Loading", "Writing the converted model"),
    "compile": QT_TRANSLATE_NOOP("Loading", "Compiling the decode kernels, once (~15-60 s)"),
    "load": QT_TRANSLATE_NOOP("Loading", "Loading the weights"),
    "tune": QT_TRANSLATE_NOOP("Loading", "Measuring the decode kernels' fastest shape on this CPU, once (~1 s)"),
}
CHOICES = {"auto": QT_TRANSLATE_NOOP("Loading", "auto")}  # the others are names: cpu, cuda, float32…


def describe(stage: str, done: int, total: int) -> str:
    """A stage of a load in the app's language, with its amount where it has one."""
    text = translate("Loading", PROGRESS_STAGES[stage]) if stage in PROGRESS_STAGES else stage
    if stage == "download" and total > 1:
        return translate("Loading", "{stage} ({done} of {total} MB)").format(stage=text, done=number(done / 1e6),
                                                                             total=number(total / 1e6))
    if total > 1:
        return translate("Loading", "{stage} ({done} of {total})").format(stage=text, done=number(done),
                                                                          total=number(total))
    return text


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
        self.dtype_actions: dict[str, QAction] = {}
        self.menus: dict[str, QMenu] = {}
        controller.progress.connect(self._on_progress)
        controller.load_finished.connect(self._on_finished)

    def load(self, spec: str) -> None:
        self._requested_spec = spec
        what = Path(spec).name if spec != 'default' else 'the default model'
        self.terminal = StderrProgress()  # one line per stage on stderr too: a first start takes a while
        self.terminal(f"loading {what}", 0, 1)
        self.status.say(translate("Loading", "Loading {model}…").format(model=Path(spec).name) if spec != "default"
                        else translate("Loading", "Loading the default model…"))
        self.progress = QProgressDialog(translate("Loading", "Loading the model…"), translate("Loading", "Cancel"), 0, 0,
                                        self.window)
        self.progress.setWindowTitle("TokenStep")
        self.progress.setMinimumDuration(400)  # quick loads from the cache never flash a dialog
        self.progress.setWindowModality(Qt.WindowModal)
        self.progress.setAutoClose(False)
        self.progress.setAutoReset(False)
        self.progress.canceled.connect(self.controller.cancel_load)
        self.controller.load(spec, self.device, self.dtype)

    def open_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, translate("Loading", "Open a Hugging Face model folder"))
        if folder:
            self.load(folder)

    def open_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, translate("Loading", "Open a GGUF model"), "",
                                              translate("Loading", "GGUF models (*.gguf)"))
        if path:
            self.load(path)

    def fill_menu(self, menu: QMenu) -> None:
        """The Model menu: a device and a data type; choosing one reloads the model with it."""
        self.menus = {"device": menu.addMenu(""), "dtype": menu.addMenu("")}
        self.device_actions = _choices(self.menus["device"], DEVICE_CHOICES, self.device, self._set_device)
        self.dtype_actions = _choices(self.menus["dtype"], DTYPE_CHOICES, self.dtype, self._set_dtype)
        menu.aboutToShow.connect(self._offer_cuda)
        menu.addSeparator()
        self.check_action = menu.addAction("", self.controller.check_weights)
        self.retranslate()

    def retranslate(self) -> None:
        """The Model menu's own entries in the app's language (the window calls it at a language change)."""
        self.menus["device"].setTitle(translate("Loading", "Device"))
        self.menus["dtype"].setTitle(translate("Loading", "Data type"))
        for actions in (self.device_actions, self.dtype_actions):
            for choice, action in actions.items():
                action.setText(translate("Loading", CHOICES[choice]) if choice in CHOICES else choice)
        self.check_action.setText(translate("Loading", "Check the weights are unchanged"))

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
            self.status.say(translate("Loading", "Model ready: write a prompt and press Prefill (Ctrl+P), then Step "
                                      "(Space)."))
            return
        previous = self.controller.info
        still = translate("Loading", "; still using {model}.").format(model=previous.name) if previous else "."
        if not message:
            self.status.say(translate("Loading", "Loading cancelled") + still)
            return
        self.status.say(translate("Loading", "Could not load the model") + still)
        self.show_error(translate("Loading", "Could not load the model"), message + (
            "\n\n" + translate("Loading", "The previous model ({model}) is still loaded.").format(model=previous.name)
            if previous else ""))

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
