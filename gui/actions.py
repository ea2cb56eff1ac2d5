"""The window's actions: their table (text, keys, tips), what the generation ones do, when they are enabled,
and the help dialogs that list them."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox, QWidget

from gui.link.controller import Controller
from gui.status_bar import StatusBar
from gui.views.controls import Controls


@dataclass(frozen=True)
class ActionSpec:
    text: str
    shortcuts: tuple[str, ...] = ()
    tip: str = ""
    checkable: bool = False
    icon_text: str = ""  # what a toolbar button shows, where the text is too long for it


ACTIONS: dict[str, ActionSpec] = {
    "prefill": ActionSpec("Prefill", ("Ctrl+P",), "Read the whole prompt in one parallel pass"),
    "step": ActionSpec("Step", ("Space",), "Generate one token (Space pauses while running)"),
    "run": ActionSpec("Run", ("Ctrl+Return", "Ctrl+Enter"), "Generate until a stop rule fires"),
    "pause": ActionSpec("Pause", ("Pause",), "Pause a run after the current step (a paced one at the step on screen)"),
    "stop": ActionSpec("Stop", ("Esc",), "End this generation now (a paced Run at the step on screen)"),
    "reset": ActionSpec("Reset", ("Ctrl+R",), "Back to the prompt; re-seed: same seed, same tokens"),
    # Window-wide, yet a text field that has the focus keeps its Backspace: editors claim the key first
    # (Qt's ShortcutOverride), so the shortcut fires only while the focus is elsewhere.
    "backspace": ActionSpec("Remove last token", ("Backspace",), "Take back the last token: its step is "
                            "pending again (no forward pass); the branch is kept in the tree"),
    "kv_cache": ActionSpec("Use the KV cache", ("Ctrl+K",), "Off: every step re-reads the whole prefix (same "
                           "logits, a cost that grows with the context; Timing compares both). Between steps",
                           checkable=True),
    "prev": ActionSpec("Previous step", ("Alt+Left",), "Show the previous step", icon_text="◀"),
    "next": ActionSpec("Next step", ("Alt+Right",), "Show the next step", icon_text="▶"),
    "dice": ActionSpec("New seed", ("Ctrl+D",), "Pick a random seed"),
    "paced": ActionSpec("Paced playback", ("P",), "Run shows one step at a time at the pace set in Controls, "
                        "every view at the same step; off: as fast as possible", checkable=True),
    "record": ActionSpec("Record video…", ("Ctrl+Shift+V",), "Record the window as an MP4 or GIF (again: stop)",
                         checkable=True),
    "open_model": ActionSpec("Open…", ("Ctrl+O",), "Choose one of the models you already have: the Hugging Face "
                             "cache, GGUF files, recent models"),
    "open_folder": ActionSpec("Open model folder…", (), "Load a Hugging Face model folder"),
    "open_gguf": ActionSpec("Open GGUF file…", ("Ctrl+Shift+O",), "Convert and load a .gguf file"),
    "default_model": ActionSpec("Load the default model", (), "SmolLM2-135M-Instruct"),
    "connect_server": ActionSpec("Connect to server…", (), "Step a model served by llama.cpp, vLLM or SGLang"),
    "serve": ActionSpec("Serve several requests…", ("Ctrl+Shift+S",), "Run several requests at once: continuous "
                        "batching over a paged KV cache (the Serving view)"),
    "export_trace": ActionSpec("Export trace…", ("Ctrl+E",), "Save the events as JSON Lines"),
    "play_script": ActionSpec("Play script…", ("Ctrl+L",), "Play a lesson script, or replay an exported trace"),
    "export_png": ActionSpec("Export window as PNG…", ("Ctrl+Shift+E",), "Save the whole window as a PNG"),
    "quit": ActionSpec("Quit", ("Ctrl+Q",)),
    "presentation": ActionSpec("Presentation mode", ("F5",), "Larger text, thicker bars, more contrast for "
                               "recordings", checkable=True),
    "dark": ActionSpec("Dark theme", ("Ctrl+Shift+D",), checkable=True),
    "reset_layout": ActionSpec("Reset layout", (), "Put every view back where it started"),
    "shortcuts": ActionSpec("Keyboard shortcuts", ("F1",)),
    "about": ActionSpec("About TokenStep"),
}
HELP_ORDER = ("prefill", "step", "run", "pause", "stop", "reset", "backspace", "kv_cache", "prev", "next", "dice", "open_model",
              "open_gguf", "export_trace", "play_script", "export_png", "presentation", "dark", "shortcuts", "quit")

HELP_ORDER += ("paced", "record", "serve")


def make_actions(window: QWidget) -> dict[str, QAction]:
    """Every action in the table, not yet connected to what it does (the window does that)."""
    actions = {}
    for key, spec in ACTIONS.items():
        action = QAction(spec.text, window)
        tip = spec.tip
        if spec.shortcuts:
            action.setShortcuts([QKeySequence(s) for s in spec.shortcuts])
            if tip:
                tip = f"{tip} ({QKeySequence(spec.shortcuts[0]).toString(QKeySequence.NativeText)})"
        action.setToolTip(tip or spec.text)
        action.setStatusTip(tip or spec.text)
        action.setCheckable(spec.checkable)
        if spec.icon_text:
            action.setIconText(spec.icon_text)
        window.addAction(action)  # shortcuts work wherever the focus is in the window
        actions[key] = action
    return actions


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
            self.status.say("The prompt is empty: type something to read first.")
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
        step_text = "Pause" if c.running else "Step"  # during a run the Step button pauses
        if a["step"].text() != step_text:
            a["step"].setText(step_text)


def show_shortcuts(parent: QWidget, actions: dict[str, QAction]) -> None:
    rows = []
    for key in HELP_ORDER:
        action = actions[key]
        keys = ", ".join(s.toString(QKeySequence.NativeText) for s in action.shortcuts())
        rows.append(f"<tr><td><b>{keys}</b></td><td>{action.text()}</td></tr>")
    QMessageBox.information(parent, "Keyboard shortcuts", "<table cellpadding=4>" + "".join(rows) + "</table>")


def show_about(parent: QWidget) -> None:
    QMessageBox.about(parent, "About TokenStep",
                      "<b>TokenStep</b><p>See how a language model writes an answer one token at a time: "
                      "prefill, decode, sampling, the KV cache and the stop rules, live.</p>")
