"""The window's actions: their table (text, keys, tips), what the generation ones do, when they are enabled,
and the help dialogs that list them."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox, QWidget

from gui.link.controller import Controller
from gui.state.i18n import QT_TRANSLATE_NOOP, translate
from gui.status_bar import StatusBar
from gui.views.controls import Controls


@dataclass(frozen=True)
class ActionSpec:
    """An action's words are its English source, marked for lupdate; `retranslate_actions` words them."""

    text: str
    shortcuts: tuple[str, ...] = ()
    tip: str = ""
    checkable: bool = False
    icon_text: str = ""  # what a toolbar button shows, where the text is too long for it


ACTIONS: dict[str, ActionSpec] = {
    "prefill": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Prefill"), ("Ctrl+P",),
                          QT_TRANSLATE_NOOP("Actions", "Read the whole prompt in one parallel pass")),
    "step": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Step"), ("Space",),
                       QT_TRANSLATE_NOOP("Actions", "Generate one token (Space pauses while running)")),
    "run": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Run"), ("Ctrl+Return", "Ctrl+Enter"),
                      QT_TRANSLATE_NOOP("Actions", "Generate until a stop rule fires")),
    "pause": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Pause"), ("Pause",),
                        QT_TRANSLATE_NOOP("Actions", "Pause a run after the current step (a paced one at the step on "
                                                     "screen)")),
    "stop": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Stop"), ("Esc",),
                       QT_TRANSLATE_NOOP("Actions", "End this generation now (a paced Run at the step on screen)")),
    "reset": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Reset"), ("Ctrl+R",),
                        QT_TRANSLATE_NOOP("Actions", "Back to the prompt; re-seed: same seed, same tokens")),
    # Window-wide, yet a text field that has the focus keeps its Backspace: editors claim the key first
    # (Qt's ShortcutOverride), so the shortcut fires only while the focus is elsewhere.
    "backspace": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Remove last token"), ("Backspace",),
                            QT_TRANSLATE_NOOP("Actions", "Take back the last token: its step is pending again (no "
                                                         "forward pass); the branch is kept in the tree")),
    "kv_cache": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Use the KV cache"), ("Ctrl+K",),
                           QT_TRANSLATE_NOOP("Actions", "Off: every step re-reads the whole prefix (same logits, a "
                                                        "cost that grows with the context; Timing compares both). "
                                                        "Between steps"), checkable=True),
    "prev": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Previous step"), ("Alt+Left",),
                       QT_TRANSLATE_NOOP("Actions", "Show the previous step"), icon_text="◀"),
    "next": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Next step"), ("Alt+Right",),
                       QT_TRANSLATE_NOOP("Actions", "Show the next step"), icon_text="▶"),
    "dice": ActionSpec(QT_TRANSLATE_NOOP("Actions", "New seed"), ("Ctrl+D",),
                       QT_TRANSLATE_NOOP("Actions", "Pick a random seed")),
    "paced": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Paced playback"), ("P",),
                        QT_TRANSLATE_NOOP("Actions", "Run shows one step at a time at the pace set in Controls, every"
                                                     " view at the same step; off: as fast as possible"),
                        checkable=True),
    "record": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Record video…"), ("Ctrl+Shift+V",),
                         QT_TRANSLATE_NOOP("Actions", "Record the window as an MP4 or GIF (again: stop)"),
                         checkable=True),
    "open_model": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Open…"), ("Ctrl+O",),
                             QT_TRANSLATE_NOOP("Actions", "Choose one of the models you already have: the Hugging "
                                                          "Face cache, GGUF files, recent models")),
    "open_folder": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Open model folder…"), (),
                              QT_TRANSLATE_NOOP("Actions", "Load a Hugging Face model folder")),
    "open_gguf": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Open GGUF file…"), ("Ctrl+Shift+O",),
                            QT_TRANSLATE_NOOP("Actions", "Convert and load a .gguf file")),
    "default_model": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Load the default model"), (), "SmolLM2-135M-Instruct"),
    "connect_server": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Connect to server…"), (),
                                 QT_TRANSLATE_NOOP("Actions", "Step a model served by llama.cpp, vLLM or SGLang")),
    "serve": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Serve several requests…"), ("Ctrl+Shift+S",),
                        QT_TRANSLATE_NOOP("Actions", "Run several requests at once: continuous batching over a paged "
                                                     "KV cache (the Serving view)")),
    "export_trace": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Export trace…"), ("Ctrl+E",),
                               QT_TRANSLATE_NOOP("Actions", "Save the events as JSON Lines")),
    "play_script": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Play script…"), ("Ctrl+L",),
                              QT_TRANSLATE_NOOP("Actions", "Play a lesson script, or replay an exported trace")),
    "export_png": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Export window as PNG…"), ("Ctrl+Shift+E",),
                             QT_TRANSLATE_NOOP("Actions", "Save the whole window as a PNG")),
    "quit": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Quit"), ("Ctrl+Q",)),
    "presentation": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Presentation mode"), ("F5",),
                               QT_TRANSLATE_NOOP("Actions", "Larger text, thicker bars, more contrast for recordings"),
                               checkable=True),
    "dark": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Dark theme"), ("Ctrl+Shift+D",), checkable=True),
    "reset_layout": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Reset layout"), (),
                               QT_TRANSLATE_NOOP("Actions", "Put every view back where it started")),
    "shortcuts": ActionSpec(QT_TRANSLATE_NOOP("Actions", "Keyboard shortcuts"), ("F1",)),
    "about": ActionSpec(QT_TRANSLATE_NOOP("Actions", "About TokenStep")),
}
HELP_ORDER = ("prefill", "step", "run", "pause", "stop", "reset", "backspace", "kv_cache", "prev", "next", "dice",
              "open_model", "open_gguf", "export_trace", "play_script", "export_png", "presentation", "dark",
              "shortcuts", "quit")

HELP_ORDER += ("paced", "record", "serve")


def make_actions(window: QWidget) -> dict[str, QAction]:
    """Every action in the table, not yet connected to what it does (the window does that)."""
    actions = {}
    for key, spec in ACTIONS.items():
        action = QAction(window)
        if spec.shortcuts:
            action.setShortcuts([QKeySequence(s) for s in spec.shortcuts])
        action.setCheckable(spec.checkable)
        window.addAction(action)  # shortcuts work wherever the focus is in the window
        actions[key] = action
    retranslate_actions(actions)
    return actions


def retranslate_actions(actions: dict[str, QAction]) -> None:
    """Every action's text and tips in the app's language (at start and at each language change)."""
    for key, spec in ACTIONS.items():
        action = actions[key]
        text = translate("Actions", spec.text)
        tip = translate("Actions", spec.tip) if spec.tip else ""
        if spec.shortcuts and tip:
            tip = f"{tip} ({QKeySequence(spec.shortcuts[0]).toString(QKeySequence.NativeText)})"
        action.setText(text)
        action.setToolTip(tip or text)
        action.setStatusTip(tip or text)
        if spec.icon_text:
            action.setIconText(spec.icon_text)


class Generation:
    """Prefill, Step, Run and Reset: the Controls' request and settings sent to the controller, and which of
    the generation actions the controller's state allows."""

    def __init__(self, controller: Controller, controls: Controls, actions: dict[str, QAction],
                 status: StatusBar, focus_after_prefill: QWidget):
        self.controller, self.controls, self.actions, self.status = controller, controls, actions, status
        self.focus_after_prefill = focus_after_prefill
        controller.state_changed.connect(self.enable)
        actions["backspace"].triggered.connect(controller.backspace)
        actions["kv_cache"].setChecked(controller.kv_cache)
        actions["kv_cache"].toggled.connect(lambda on: on != controller.kv_cache and controller.set_kv_cache(on))

    def prefill(self) -> None:
        prompt, chat, system = self.controls.prompt_request()
        if not prompt.strip():
            self.status.say(translate("Actions", "The prompt is empty: type something to read first."))
            return
        self.controller.set_settings(self.controls.settings())
        self.controller.prefill(prompt, chat, system)
        self.focus_after_prefill.setFocus()  # so that Space steps instead of typing into the prompt

    def step_or_pause(self) -> None:
        c = self.controller
        if c.running:
            c.pause()
        elif not c.prefilled and not c.busy:
            self.prefill()  # a first Space both reads the prompt and is ready to step
        else:
            c.step()

    def run(self) -> None:
        if not self.controller.prefilled:
            self.prefill()
            QTimer.singleShot(0, self._run_when_prefilled)
        else:
            self.controller.run()

    def _run_when_prefilled(self) -> None:
        c = self.controller
        if c.busy:  # the prefill, or its last replies (Prefilled can arrive an event-loop turn before Finished)
            QTimer.singleShot(20, self._run_when_prefilled)
        elif c.prefilled:
            c.run()

    def reset(self) -> None:
        self.controller.set_settings(self.controls.settings())
        self.controller.reset()

    def enable(self) -> None:
        c = self.controller
        has_model = c.info is not None and not c.loading
        a = self.actions
        enabled = {"prefill": has_model and not c.running,
                   "step": has_model and (c.running or not c.prefilled or c.can_step),
                   "run": has_model and not c.running and (not c.prefilled or c.can_step),
                   "pause": c.running, "stop": (c.prefilled and (c.running or c.stopped is None)) or c.serving.running,
                   "reset": has_model and c.prefilled and not c.running and c.showing_request is None,
                   "backspace": has_model and bool(c.steps) and not c.running and not c.busy
                   and c.showing_request is None,
                   "serve": has_model and not c.running and not c.busy,
                   "kv_cache": has_model and not c.running and not c.busy}  # between steps only
        for key, on in enabled.items():
            if a[key].isEnabled() != on:  # unchanged states would still relayout the toolbar
                a[key].setEnabled(on)
        if a["kv_cache"].isChecked() != c.kv_cache:
            a["kv_cache"].setChecked(c.kv_cache)
        # during a run the Step button pauses
        step_text = translate("Actions", ACTIONS["pause"].text if c.running else ACTIONS["step"].text)
        if a["step"].text() != step_text:
            a["step"].setText(step_text)


def show_shortcuts(parent: QWidget, actions: dict[str, QAction]) -> None:
    rows = []
    for key in HELP_ORDER:
        action = actions[key]
        keys = ", ".join(s.toString(QKeySequence.NativeText) for s in action.shortcuts())
        rows.append(f"<tr><td><b>{keys}</b></td><td>{action.text()}</td></tr>")
    QMessageBox.information(parent, translate("Actions", "Keyboard shortcuts"),
                            "<table cellpadding=4>" + "".join(rows) + "</table>")


def show_about(parent: QWidget) -> None:
    QMessageBox.about(parent, translate("Actions", "About TokenStep"),
                      translate("Actions", "<b>TokenStep</b><p>See how a language model writes an answer one token "
                                "at a time: prefill, decode, sampling, the KV cache and the stop rules, live.</p>"))
