"""The main window: docks, toolbar, menus, shortcuts, status bar, and the saved layout."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QProgressDialog, QSlider, QTabWidget, QToolBar, QWidget)

from inference.settings import DEVICE_CHOICES, DTYPE_CHOICES

from .controller import Controller
from .theme import Appearance
from .views.attention_view import AttentionView
from .views.candidates_view import CandidatesView
from .views.context_view import ContextView
from .views.controls import Controls
from .views.explain_view import LANGUAGES, ExplainView
from .views.format import fmt_bytes, fmt_count
from .views.kv_view import KvView
from .views.stop_view import StopView
from .views.timing_view import TimingView

LAYOUT_VERSION = 5  # bump when docks change: an older saved layout then falls back to the default
PROGRESS_STAGES = {"download": "Downloading the default model", "hash": "Checking the file",
                   "dequantise": "Converting the weights (dequantising)", "write": "Writing the converted model",
                   "load": "Loading the weights", "prefill": "Reading the prompt (prefill)"}


class MainWindow(QMainWindow):
    def __init__(self, settings: QSettings | None = None, appearance: Appearance | None = None,
                 model: str = "default", device: str = "auto", dtype: str = "auto", autoload: bool = True):
        super().__init__()
        self.setObjectName("TokenStepMainWindow")
        self.setWindowTitle("TokenStep — one token at a time")
        self.qsettings = settings or QSettings("TokenStep", "TokenStep")
        self.appearance = appearance or Appearance()
        self.device, self.dtype = device, dtype
        self.model_spec = model  # what is loaded: 'default', a folder or a .gguf
        self._requested_spec = model
        self.controller = Controller()
        self.actions: dict[str, QAction] = {}
        self._make_actions()
        self.controls = Controls(self.actions)
        self.controller.settings = self.controls.settings()
        self.views = {
            "context": ContextView(self.controller, self.appearance),
            "candidates": CandidatesView(self.controller, self.appearance),
            "kv": KvView(self.controller, self.appearance),
            "timing": TimingView(self.controller, self.appearance),
            "stop": StopView(self.controller, self.appearance),
            "explain": ExplainView(self.controller, self.appearance,
                                   self.qsettings.value("explain/language", "en")),
            "attention": AttentionView(self.controller, self.appearance),
        }
        self.docks: dict[str, QDockWidget] = {}
        self._make_docks()
        self._make_toolbar()
        self._make_menus()
        self._make_status_bar()
        self.progress: QProgressDialog | None = None

        c = self.controller
        self.controls.settings_changed.connect(self._on_settings)
        self.controls.prompt.textChanged.connect(self._update_state)
        self.controls.chat.toggled.connect(self._update_state)
        self.controls.system.textChanged.connect(self._update_state)
        c.state_changed.connect(self._update_state)
        c.redraw.connect(self._update_history)
        c.model_changed.connect(self._on_model_changed)
        c.progress.connect(self._on_progress)
        c.load_finished.connect(self._on_load_finished)
        c.error.connect(self._on_error)
        self.appearance.changed.connect(self._update_state)
        self.actions["presentation"].toggled.connect(self._presentation_layout)
        self.docks["attention"].visibilityChanged.connect(self._attention_visible)

        self.default_state = self.saveState(LAYOUT_VERSION)
        self._state_before_presentation: QByteArray | None = None
        self._updating_history = False
        self.layout_restored = self.restore_layout()
        self._update_state()
        self.views["context"].canvas.setFocus()
        if autoload:
            QTimer.singleShot(0, lambda: self.load_model(model))

    # --- building -------------------------------------------------------------------------------------
    def _action(self, key: str, text: str, slot, shortcuts=(), tip: str = "", checkable: bool = False) -> QAction:
        action = QAction(text, self)
        if shortcuts:
            action.setShortcuts([QKeySequence(s) for s in shortcuts])
            tip = f"{tip} ({QKeySequence(shortcuts[0]).toString(QKeySequence.NativeText)})" if tip else tip
        action.setToolTip(tip or text)
        action.setStatusTip(tip or text)
        action.setCheckable(checkable)
        action.triggered.connect(slot)
        self.addAction(action)  # shortcuts work wherever the focus is in the window
        self.actions[key] = action
        return action

    def _make_actions(self) -> None:
        a = self._action
        a("prefill", "Prefill", self.prefill, ["Ctrl+P"], "Read the whole prompt in one parallel pass")
        a("step", "Step", self.step_or_pause, ["Space"], "Generate one token (Space pauses while running)")
        a("run", "Run", self.run, ["Ctrl+Return", "Ctrl+Enter"], "Generate until a stop rule fires")
        a("pause", "Pause", self.controller.pause, ["Pause"], "Pause a run after the current step")
        a("stop", "Stop", self.controller.stop, ["Esc"], "End this generation now (between steps)")
        a("reset", "Reset", self.reset, ["Ctrl+R"], "Back to the prompt; re-seed: same seed, same tokens")
        a("prev", "Previous step", lambda: self._scrub(-1), ["Alt+Left"], "Show the previous step")
        a("next", "Next step", lambda: self._scrub(+1), ["Alt+Right"], "Show the next step")
        self.actions["prev"].setIconText("◀")
        self.actions["next"].setIconText("▶")
        a("dice", "New seed", lambda: self.controls.roll_seed(), ["Ctrl+D"], "Pick a random seed")
        a("open_folder", "Open model folder…", self.open_folder, ["Ctrl+O"], "Load a Hugging Face model folder")
        a("open_gguf", "Open GGUF file…", self.open_gguf, ["Ctrl+Shift+O"], "Convert and load a .gguf file")
        a("default_model", "Load the default model", lambda: self.load_model("default"), (),
          "SmolLM2-135M-Instruct")
        a("export_trace", "Export trace…", self.export_trace, ["Ctrl+E"], "Save the events as JSON Lines")
        a("export_png", "Export window as PNG…", lambda: self.export_png(None), ["Ctrl+Shift+E"],
          "Save the whole window as a PNG")
        a("quit", "Quit", self.close, ["Ctrl+Q"])
        a("presentation", "Presentation mode", self.appearance.set_presentation, ["F5"],
          "Larger text, thicker bars, more contrast for recordings", checkable=True)
        a("dark", "Dark theme", self.appearance.set_dark, ["Ctrl+Shift+D"], checkable=True)
        a("reset_layout", "Reset layout", self.reset_layout, (), "Put every view back where it started")
        a("shortcuts", "Keyboard shortcuts", self.show_shortcuts, ["F1"])
        a("about", "About TokenStep", self.show_about)

    def _dock(self, key: str, title: str, widget: QWidget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock_{key}")
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable |
                         QDockWidget.DockWidgetClosable)
        self.addDockWidget(area, dock)
        self.docks[key] = dock
        return dock

    def _make_docks(self) -> None:
        placeholder = QWidget()
        placeholder.setMaximumSize(0, 0)
        self.setCentralWidget(placeholder)
        self.setDockNestingEnabled(True)
        self.setTabPosition(Qt.AllDockWidgetAreas, QTabWidget.TabPosition.North)  # tabs read like titles
        v = self.views
        controls = self._dock("controls", "Controls", self.controls, Qt.LeftDockWidgetArea)
        context = self._dock("context", "Context", v["context"], Qt.RightDockWidgetArea)
        candidates = self._dock("candidates", "Candidates", v["candidates"], Qt.RightDockWidgetArea)
        kv = self._dock("kv", "KV cache", v["kv"], Qt.RightDockWidgetArea)
        stop = self._dock("stop", "Stop", v["stop"], Qt.RightDockWidgetArea)
        timing = self._dock("timing", "Timing", v["timing"], Qt.RightDockWidgetArea)
        explain = self._dock("explain", "Explain", v["explain"], Qt.LeftDockWidgetArea)
        attention = self._dock("attention", "Attention", v["attention"], Qt.RightDockWidgetArea)
        # Controls and Explain on the left; Context on top; Candidates over KV; Stop over Timing on the right.
        self.splitDockWidget(controls, explain, Qt.Vertical)
        self.splitDockWidget(context, candidates, Qt.Vertical)
        self.splitDockWidget(candidates, kv, Qt.Vertical)
        self.splitDockWidget(candidates, stop, Qt.Horizontal)
        self.splitDockWidget(kv, timing, Qt.Horizontal)
        self.tabifyDockWidget(timing, attention)
        timing.raise_()
        attention.hide()
        self.proportion_docks()

    def proportion_docks(self) -> None:
        """The default share of the window for each dock (also after the type size changes)."""
        d = self.docks
        width, height = max(self.width(), 1280), max(self.height(), 720)
        left = int(width * 0.22)
        self.resizeDocks([d["controls"], d["context"]], [left, width - left], Qt.Horizontal)
        shares = (0.13, 0.45, 0.42) if self.appearance.presentation else (0.14, 0.47, 0.35)
        self.resizeDocks([d["context"], d["candidates"], d["kv"]], [int(height * s) for s in shares], Qt.Vertical)
        right = width - left
        tabbed = {w for key in ("candidates", "kv", "controls") for w in self.tabifiedDockWidgets(d[key])}
        if d["stop"] not in tabbed:
            self.resizeDocks([d["candidates"], d["stop"]], [int(right * 0.72), int(right * 0.28)], Qt.Horizontal)
        if d["timing"] not in tabbed:
            self.resizeDocks([d["kv"], d["timing"]], [int(right * 0.70), int(right * 0.30)], Qt.Horizontal)
        if d["explain"] not in tabbed:
            self.resizeDocks([d["controls"], d["explain"]], [int(height * 0.58), int(height * 0.42)], Qt.Vertical)

    @Slot(bool)
    def _presentation_layout(self, on: bool) -> None:
        """Bigger type needs room: presentation mode stacks the secondary docks as tabs (Explain behind
        Controls; Stop and Timing behind the KV cache), so Candidates and the KV cache get the whole
        width; leaving it puts back the layout from before."""
        QTimer.singleShot(0, lambda: self._apply_presentation_layout(on))

    def _apply_presentation_layout(self, on: bool) -> None:
        d = self.docks
        if on:
            self._state_before_presentation = self.saveState(LAYOUT_VERSION)
            for dock in (d["controls"], d["explain"], d["kv"], d["stop"], d["timing"]):
                if dock.isFloating():
                    dock.setFloating(False)
            self.tabifyDockWidget(d["controls"], d["explain"])
            self.tabifyDockWidget(d["kv"], d["stop"])
            self.tabifyDockWidget(d["kv"], d["timing"])
            d["controls"].raise_()
            d["kv"].raise_()
            self.proportion_docks()
            return
        state, self._state_before_presentation = self._state_before_presentation, None
        if state is None or not self.restoreState(state, LAYOUT_VERSION):
            self.restoreState(self.default_state, LAYOUT_VERSION)
            self.proportion_docks()

    def _make_toolbar(self) -> None:
        bar = QToolBar("Generation")
        bar.setObjectName("toolbar_generation")
        bar.setMovable(False)
        # No Pause button: during a run the Step button becomes Pause (Space), as in the Controls dock; the
        # Generation menu keeps Pause with its own key.
        for key in ("prefill", "step", "run", "stop", "reset"):
            bar.addAction(self.actions[key])
        bar.addSeparator()
        bar.addWidget(QLabel(" History "))
        bar.addAction(self.actions["prev"])
        self.history = QSlider(Qt.Horizontal)
        self.history.setMinimumWidth(260)
        self.history.setRange(1, 1)
        self.history.setToolTip("Scrub to any step: its distribution, draw, settings and timing "
                                "(the last position is the next, not yet drawn step)")
        self.history.valueChanged.connect(self._on_history)
        bar.addWidget(self.history)
        bar.addAction(self.actions["next"])
        self.history_label = QLabel()
        self.history_label.setMinimumWidth(170)
        bar.addWidget(self.history_label)
        self.addToolBar(Qt.TopToolBarArea, bar)

    def _make_menus(self) -> None:
        m = self.menuBar()
        file = m.addMenu("&File")
        for key in ("open_folder", "open_gguf", "default_model"):
            file.addAction(self.actions[key])
        file.addSeparator()
        file.addAction(self.actions["export_trace"])
        png = file.addMenu("Export view as PNG")
        png.addAction(self.actions["export_png"])
        for key, dock in self.docks.items():
            png.addAction(f"{dock.windowTitle()} view…", lambda k=key: self.export_png(k))
        file.addSeparator()
        file.addAction(self.actions["quit"])
        gen = m.addMenu("&Generation")
        for key in ("prefill", "step", "run", "pause", "stop", "reset"):
            gen.addAction(self.actions[key])
        gen.addSeparator()
        for key in ("prev", "next", "dice"):
            gen.addAction(self.actions[key])
        model = m.addMenu("&Model")
        devices = model.addMenu("Device")
        self.device_actions = self._choice_menu(devices, DEVICE_CHOICES, self.device, self._set_device)
        dtypes = model.addMenu("Data type")
        self._choice_menu(dtypes, DTYPE_CHOICES, self.dtype, self._set_dtype)
        model.aboutToShow.connect(self._probe_cuda)
        view = m.addMenu("&View")
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())
        view.addSeparator()
        view.addAction(self.actions["presentation"])
        view.addAction(self.actions["dark"])
        language = view.addMenu("Explanations language")
        group = QActionGroup(self)
        for code, name in LANGUAGES.items():
            act = language.addAction(name, lambda c=code: self.set_language(c))
            act.setCheckable(True)
            act.setChecked(code == self.views["explain"].language)
            group.addAction(act)
        view.addSeparator()
        view.addAction(self.actions["reset_layout"])
        help_menu = m.addMenu("&Help")
        help_menu.addAction(self.actions["shortcuts"])
        help_menu.addAction(self.actions["about"])

    def _choice_menu(self, menu, choices, current, slot) -> dict[str, QAction]:
        group = QActionGroup(self)
        actions = {}
        for choice in choices:
            act = menu.addAction(choice, lambda c=choice: slot(c))
            act.setCheckable(True)
            act.setChecked(choice == current)
            group.addAction(act)
            actions[choice] = act
        return actions

    def _make_status_bar(self) -> None:
        bar = self.statusBar()
        self.status_model = QLabel("no model")
        self.status_state = QLabel()
        bar.addPermanentWidget(self.status_model)
        bar.addWidget(self.status_state, 1)

    # --- model ----------------------------------------------------------------------------------------
    def load_model(self, spec: str) -> None:
        self._requested_spec = spec
        self.status_state.setText(f"Loading {Path(spec).name if spec != 'default' else 'the default model'}…")
        self.progress = QProgressDialog("Loading the model…", "Cancel", 0, 0, self)
        self.progress.setWindowTitle("TokenStep")
        self.progress.setMinimumDuration(400)  # quick loads from the cache never flash a dialog
        self.progress.setWindowModality(Qt.WindowModal)
        self.progress.setAutoClose(False)
        self.progress.setAutoReset(False)
        self.progress.canceled.connect(self.controller.cancel_load)
        self.controller.load(spec, self.device, self.dtype)

    def _set_device(self, device: str) -> None:
        self.device = device
        if self.controller.info is not None:
            self.load_model(self.model_spec)

    def _set_dtype(self, dtype: str) -> None:
        self.dtype = dtype
        if self.controller.info is not None:
            self.load_model(self.model_spec)

    def _probe_cuda(self) -> None:
        if self.controller.cuda_available is not None:  # the engine says so once it is up
            self.device_actions["cuda"].setEnabled(self.controller.cuda_available)

    @Slot(str, int, int)
    def _on_progress(self, stage: str, done: int, total: int) -> None:
        text = PROGRESS_STAGES.get(stage, stage)
        if stage == "download" and total:
            text += f" ({done / 1e6:.0f} of {total / 1e6:.0f} MB)"
        self.status_state.setText(text + "…")
        if self.progress is not None:
            self.progress.setLabelText(text + "…")
            self.progress.setMaximum(total if total > 1 else 0)
            self.progress.setValue(done if total > 1 else 0)

    def _close_progress(self) -> None:
        if self.progress is not None:
            self.progress.canceled.disconnect()
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None

    @Slot(bool, str)
    def _on_load_finished(self, ok: bool, message: str) -> None:
        self._close_progress()
        if ok:
            self.model_spec = self._requested_spec
            self.status_state.setText("Model ready: write a prompt and press Prefill (Ctrl+P), then Step (Space).")
            return
        previous = self.controller.info
        if not message:
            self.status_state.setText("Loading cancelled" + (f"; still using {previous.name}." if previous else "."))
            return
        self.status_state.setText("Could not load the model" + (f"; still using {previous.name}." if previous else "."))
        QMessageBox.critical(self, "Could not load the model", message + (
            f"\n\nThe previous model ({previous.name}) is still loaded." if previous else ""))

    @Slot()
    def _on_model_changed(self) -> None:
        info = self.controller.info
        if info is None:
            self.status_model.setText("no model")
            return
        self.status_model.setText(
            f"<b>{info.name}</b> · {fmt_count(info.n_params)} parameters · {info.dtype} · {info.device} · "
            f"context window {info.context_length:,} tokens · weights {fmt_bytes(info.weights_bytes)}")
        self.controls.apply_sampler(info.sampler_defaults)
        self.controls.max_new.setMaximum(info.context_length)
        self.setWindowTitle(f"TokenStep — {info.name}")

    # --- generation -----------------------------------------------------------------------------------
    def prefill(self) -> None:
        prompt, chat, system = self.controls.prompt_request()
        if not prompt.strip():
            self.status_state.setText("The prompt is empty: type something to read first.")
            return
        self.controller.set_settings(self.controls.settings())
        self.controller.prefill(prompt, chat, system)
        self.views["context"].canvas.setFocus()  # so that Space steps instead of typing into the prompt

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
        if c.busy and not c.prefilled:
            QTimer.singleShot(20, self._run_when_prefilled)
        elif c.prefilled:
            c.run()

    def reset(self) -> None:
        self.controller.set_settings(self.controls.settings())
        self.controller.reset()

    @Slot(object)
    def _on_settings(self, settings) -> None:
        self.controller.set_settings(settings)

    @Slot(str, str, bool)
    def _on_error(self, message: str, details: str, expected: bool) -> None:
        self.status_state.setText(message)
        if not expected:
            box = QMessageBox(QMessageBox.Critical, "Something went wrong", message, parent=self)
            box.setDetailedText(details)
            box.open()

    # --- history --------------------------------------------------------------------------------------
    def _on_history(self, value: int) -> None:
        if not self._updating_history:
            self.controller.select(value)

    def _scrub(self, delta: int) -> None:
        self.history.setValue(self.history.value() + delta)

    @Slot()
    def _update_history(self) -> None:
        c = self.controller
        n = len(c.steps)
        shown = c.shown()
        has_next = c.pending is not None and c.pending.index == n + 1
        self._updating_history = True
        self.history.setRange(1, max(n + (1 if has_next else 0), 1))
        if shown is not None:
            self.history.setValue(shown.index)
        self._updating_history = False
        self.history.setEnabled(n > 0)
        if shown is None:
            self.history_label.setText(" no steps yet")
        elif shown.pending:
            self.history_label.setText(f" step {shown.index}: next (not drawn)")
        else:
            self.history_label.setText(f" step {shown.index} of {n}")

    @Slot()
    def _update_state(self) -> None:
        c = self.controller
        has_model = c.info is not None and not c.loading
        a = self.actions
        enabled = {"prefill": has_model and not c.running,
                   "step": has_model and (c.running or not c.prefilled or c.can_step),
                   "run": has_model and not c.running and (not c.prefilled or c.can_step),
                   "pause": c.running, "stop": c.prefilled and (c.running or c.stopped is None),
                   "reset": has_model and c.prefilled and not c.running}
        for key, on in enabled.items():
            if a[key].isEnabled() != on:  # unchanged states would still relayout the toolbar
                a[key].setEnabled(on)
        step_text = "Pause" if c.running else "Step"
        if a["step"].text() != step_text:
            a["step"].setText(step_text)
        changed = c.prefilled_prompt is not None and c.prefilled_prompt != self.controls.prompt_request()
        _set_text(self.controls.prompt_state,
                  "The prompt changed since it was read: Prefill (Ctrl+P) to read the new one." if changed else
                  "" if c.prefilled_prompt is None else "This prompt is in the context.")
        seed_ran = c.steps[-1].seed if c.steps else None
        next_seed = self.controls.seed.value()
        if seed_ran is not None and seed_ran != next_seed:
            seed_text = f"Seed {seed_ran} ran; the next Reset or Prefill uses {next_seed}."
        elif seed_ran is not None:
            seed_text = f"Seed {seed_ran} ran: Reset repeats these tokens."
        else:
            seed_text = ""
        _set_text(self.controls.seed_state, seed_text)
        if c.running:
            _set_text(self.status_state, "Running… (Space or Pause to pause, Esc to stop)")
        elif c.prefill_event is not None and not c.busy and self.progress is None:
            p = c.prefill_event
            _set_text(self.status_state, f"Prefilled {p.n_tokens} tokens in {p.ms:.0f} ms · {len(c.steps)} "
                      "generated" + (f" · ended: {c.stopped.reason}" if c.stopped else ""))

    def set_language(self, code: str) -> None:
        self.views["explain"].set_language(code)
        self.qsettings.setValue("explain/language", code)

    def _attention_visible(self, visible: bool) -> None:
        self.controller.set_capture_attention(visible)

    # --- export ---------------------------------------------------------------------------------------
    def export_trace(self, path: str | None = None) -> str | None:
        lines = self.controller.trace_lines()
        if not lines:
            self.status_state.setText("Nothing to export yet.")
            return None
        if not path:
            path, _ = QFileDialog.getSaveFileName(self, "Export trace", "trace.jsonl", "JSON Lines (*.jsonl)")
        if not path:
            return None
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.status_state.setText(f"Trace written to {path} ({len(lines)} events)")
        return path

    def export_png(self, dock_key: str | None, path: str | None = None) -> str | None:
        widget = self if dock_key is None else self.docks[dock_key]
        if not path:
            name = "tokenstep.png" if dock_key is None else f"tokenstep-{dock_key}.png"
            path, _ = QFileDialog.getSaveFileName(self, "Export as PNG", name, "PNG image (*.png)")
        if not path:
            return None
        if not widget.grab().save(path, "PNG"):
            QMessageBox.warning(self, "Export failed", f"Could not write {path}")
            return None
        self.status_state.setText(f"Saved {path}")
        return path

    # --- files ----------------------------------------------------------------------------------------
    def open_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a Hugging Face model folder")
        if folder:
            self.load_model(folder)

    def open_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.load_model(path)

    # --- layout ---------------------------------------------------------------------------------------
    def restore_layout(self) -> bool:
        """Restore the saved layout when its version matches; otherwise keep the default one."""
        if int(self.qsettings.value("layout/version", 0) or 0) != LAYOUT_VERSION:
            return False
        geometry = self.qsettings.value("layout/geometry")
        state = self.qsettings.value("layout/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if not isinstance(state, QByteArray) or not self.restoreState(state, LAYOUT_VERSION):
            self.restoreState(self.default_state, LAYOUT_VERSION)
            return False
        return True

    def save_layout(self) -> None:
        self.qsettings.setValue("layout/version", LAYOUT_VERSION)
        self.qsettings.setValue("layout/geometry", self.saveGeometry())
        # Presentation mode's tabbed layout is temporary: keep the one it will return to.
        state = self._state_before_presentation or self.saveState(LAYOUT_VERSION)
        self.qsettings.setValue("layout/state", state)
        self.qsettings.sync()

    def reset_layout(self) -> None:
        self.restoreState(self.default_state, LAYOUT_VERSION)
        for key, dock in self.docks.items():
            dock.setVisible(key != "attention")
        if self._state_before_presentation is not None:
            self._apply_presentation_layout(True)  # the default layout, as presentation mode shows it
        else:
            self.proportion_docks()

    # --- help -----------------------------------------------------------------------------------------
    def show_shortcuts(self) -> None:
        rows = []
        for key in ("prefill", "step", "run", "pause", "stop", "reset", "prev", "next", "dice", "open_folder",
                    "open_gguf", "export_trace", "export_png", "presentation", "dark", "shortcuts", "quit"):
            action = self.actions[key]
            keys = ", ".join(s.toString(QKeySequence.NativeText) for s in action.shortcuts())
            rows.append(f"<tr><td><b>{keys}</b></td><td>{action.text()}</td></tr>")
        QMessageBox.information(self, "Keyboard shortcuts", "<table cellpadding=4>" + "".join(rows) + "</table>")

    def show_about(self) -> None:
        QMessageBox.about(self, "About TokenStep",
                          "<b>TokenStep</b><p>See how a language model writes an answer one token at a time: "
                          "prefill, decode, sampling, the KV cache and the stop rules, live.</p>")

    def closeEvent(self, event) -> None:
        self.save_layout()
        self._close_progress()
        self.controller.shutdown()
        super().closeEvent(event)


def _set_text(label: QLabel, text: str) -> None:
    if label.text() != text:
        label.setText(text)
