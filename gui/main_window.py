"""The main window: composes the docks, the toolbar, the menus and the status bar, and connects the actions to
what they do. What each part does lives in its own module (actions, dock_layout, loading, export, views)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QMessageBox, QToolBar

from gui import export, language as app_language
from gui.actions import Generation, make_actions, retranslate_actions, show_about, show_shortcuts
from gui.dialogs.connect_dialog import connect_to_server
from gui.link.controller import Controller
from gui.dock_layout import DockLayout
from gui.dialogs.model_loader import ModelLoader
from gui.dialogs.model_picker import ModelPicker
from gui.dialogs.serve_dialog import ServeDialog
from gui.lessons.recorder import HandRecorder
from gui.lessons.script_player import CaptionBanner, ScriptPlayer, open_and_play, show_failure
from gui.state.i18n import translate
from gui.status_bar import StatusBar
from gui.theme import Appearance
from gui.views.attention_view import AttentionView
from gui.views.branches_view import BranchesView
from gui.views.candidates_view import CandidatesView
from gui.views.compare_view import CompareView
from gui.views.context_view import ContextView
from gui.views.controls import Controls
from gui.views.explain_view import ExplainView
from gui.widgets.history_slider import HistorySlider
from gui.views.kv_view import KvView
from gui.views.lens_view import LensView
from gui.views.serving_view import ServingView
from gui.views.stop_view import StopView
from gui.views.timing_view import TimingView


class MainWindow(QMainWindow):
    def __init__(self, settings: QSettings | None = None, appearance: Appearance | None = None,
                 model: str = "default", device: str = "auto", dtype: str = "auto", autoload: bool = True,
                 language: str | None = None):
        super().__init__()
        self.setObjectName("TokenStepMainWindow")
        self.qsettings = settings or QSettings("TokenStep", "TokenStep")
        # --lang, else the language chosen last time, else the system's: installed before any widget is worded
        self.language = app_language.set_language(
            app_language.normalise(language) or app_language.normalise(self.qsettings.value("language"))
            or app_language.system_language())
        self.appearance = appearance or Appearance()
        self.controller = c = Controller()
        self.actions: dict[str, QAction] = make_actions(self)
        self.controls = Controls(self.actions, c)
        c.set_settings(self.controls.settings())
        self.views = {
            "context": ContextView(c, self.appearance),
            "candidates": CandidatesView(c, self.appearance),
            "kv": KvView(c, self.appearance),
            "timing": TimingView(c, self.appearance),
            "stop": StopView(c, self.appearance),
            "explain": ExplainView(c, self.appearance),
            "attention": AttentionView(c, self.appearance),
            "lens": LensView(c, self.appearance),
            "branches": BranchesView(c, self.appearance),
            "compare": CompareView(c, self.appearance),
            "serving": ServingView(c, self.appearance),
        }
        self.dock_layout = DockLayout(self, {"controls": self.controls, **self.views}, self.appearance,
                                      self.qsettings)
        self.docks = self.dock_layout.docks
        self._pace_before_presentation = 0.0  # Run's pace before F5, given back when it ends
        self.status = StatusBar(c)
        self.setStatusBar(self.status)
        self.loader = ModelLoader(self, c, self.status, model, device, dtype)
        self.generation = Generation(c, self.controls, self.actions, self.status, self.views["context"])
        self.script_player = ScriptPlayer(c, self.controls, self)
        self.caption = CaptionBanner(self)
        self.recorder = HandRecorder(self)
        self._make_toolbar()
        self._make_menus()
        self.retranslate()
        self._connect()
        self.dock_layout.remember_default()
        self.layout_restored = self.restore_layout()
        self.generation.enable()
        self.views["context"].setFocus()
        if autoload:
            QTimer.singleShot(0, lambda: self.load_model(model))

    def _connect(self) -> None:
        a, c = self.actions, self.controller
        slots = {"prefill": self.prefill, "step": self.generation.step_or_pause, "run": self.run,
                 "pause": c.pause, "stop": c.stop, "reset": self.generation.reset,
                 "prev": lambda: self.history.scrub(-1), "next": lambda: self.history.scrub(+1),
                 "dice": self.controls.roll_seed, "open_model": self.open_model_picker,
                 "open_folder": self.loader.open_folder,
                 "open_gguf": self.loader.open_gguf, "default_model": lambda: self.load_model("default"),
                 "connect_server": lambda: connect_to_server(self),
                 "export_trace": self.export_trace, "export_png": lambda: self.export_png(None),
                 "play_script": lambda: open_and_play(self, self.script_player),
                 "serve": self.open_serve_dialog,
                 "quit": self.close, "presentation": self.appearance.set_presentation,
                 "dark": self.appearance.set_dark, "reset_layout": self.reset_layout,
                 "shortcuts": lambda: show_shortcuts(self, a), "about": lambda: show_about(self)}
        for key, slot in slots.items():
            a[key].triggered.connect(slot)
        a["presentation"].toggled.connect(self.dock_layout.set_presentation)
        # Paced playback: P toggles it; presentation mode (a class, a recording) turns it on
        a["paced"].triggered.connect(c.pacer.toggle)
        c.pacer.pace_changed.connect(lambda pace: a["paced"].setChecked(pace > 0))
        a["presentation"].toggled.connect(self._presentation_pace)
        a["record"].triggered.connect(lambda: self.toggle_recording())
        self.recorder.stopped.connect(self._recording_stopped)
        self.controls.settings_changed.connect(c.set_settings)
        self.script_player.caption.connect(self.caption.show_text)
        self.script_player.failed.connect(lambda message: show_failure(self, message))
        c.model_changed.connect(self._show_model_in_title)
        # Editing the request or the look brings the status line back from a one-off message (an export's).
        self.controls.request_edited.connect(self.status.show_generation)
        self.appearance.changed.connect(self.status.show_generation)
        # Attention is recorded (on a slower path) only while its dock is on screen.
        self.docks["attention"].visibilityChanged.connect(c.set_capture_attention)
        self.docks["lens"].visibilityChanged.connect(c.set_capture_lens)  # the logit lens, likewise
        self.docks["lens"].toggleViewAction().triggered.connect(lambda on: on and self.docks["lens"].raise_())
        self.views["attention"].cells_selected.connect(self.views["context"].canvas.highlight)
        self.views["serving"].serve_asked.connect(self.open_serve_dialog)
        c.serving_started.connect(self.show_serving)  # from the dialog or a lesson script

    def _presentation_pace(self, on: bool) -> None:
        """F5 paces a Run (a class follows it step by step); leaving F5 gives back the pace from before it."""
        pacer = self.controller.pacer
        if on:
            self._pace_before_presentation = pacer.tokens_per_s
            pacer.set_pace(pacer.last_pace)
        else:
            pacer.set_pace(self._pace_before_presentation)

    def _make_toolbar(self) -> None:
        self.toolbar = bar = QToolBar()
        bar.setObjectName("toolbar_generation")
        bar.setMovable(False)
        # No Pause button: during a run the Step button becomes Pause (Space), as in the Controls dock; the
        # Generation menu keeps Pause with its own key.
        for key in ("prefill", "step", "run", "stop", "reset"):
            bar.addAction(self.actions[key])
        bar.addSeparator()
        self.history_label = QLabel()
        bar.addWidget(self.history_label)
        bar.addAction(self.actions["prev"])
        self.history = HistorySlider(self.controller)
        bar.addWidget(self.history)
        bar.addAction(self.actions["next"])
        bar.addWidget(self.history.label)
        self.addToolBar(Qt.TopToolBarArea, bar)

    def _make_menus(self) -> None:
        a, m = self.actions, self.menuBar()
        self.menus = menus = {}  # worded by retranslate()
        menus["file"] = file = m.addMenu("")  # lessons and what the window exports; models are in the Model menu
        file.addAction(a["play_script"])
        file.addAction(a["record"])
        file.addAction(a["export_trace"])
        menus["png"] = png = file.addMenu("")
        png.addAction(a["export_png"])
        self.png_actions = {key: png.addAction("", lambda k=key: self.export_png(k)) for key in self.docks}
        file.addSeparator()
        file.addAction(a["quit"])
        menus["generation"] = generation = m.addMenu("")
        for key in ("prefill", "step", "run", "pause", "stop", "reset", "backspace"):
            generation.addAction(a[key])
        generation.addSeparator()
        generation.addAction(a["serve"])
        generation.addSeparator()
        generation.addAction(a["kv_cache"])
        generation.addSeparator()
        for key in ("prev", "next", "dice"):
            generation.addAction(a[key])
        generation.addSeparator()
        generation.addAction(a["paced"])
        menus["model"] = model = m.addMenu("")  # every way to load a model, and what it runs on
        for key in ("open_model", "open_folder", "open_gguf", "default_model"):
            model.addAction(a[key])
        model.addSeparator()
        model.addAction(a["connect_server"])
        model.addSeparator()
        self.loader.fill_menu(model)
        menus["view"] = view = m.addMenu("")
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())
        view.addSeparator()
        view.addAction(a["presentation"])
        view.addAction(a["dark"])
        menus["language"] = language = view.addMenu("")  # every language named in its own words
        group = QActionGroup(self)
        self.language_actions = {}
        for code, name in app_language.LANGUAGES.items():
            act = language.addAction(name, lambda c=code: self.set_language(c))
            act.setCheckable(True)
            act.setChecked(code == self.language)
            group.addAction(act)
            self.language_actions[code] = act
        view.addSeparator()
        view.addAction(a["reset_layout"])
        menus["help"] = help_menu = m.addMenu("")
        help_menu.addAction(a["shortcuts"])
        help_menu.addAction(a["about"])

    def _show_model_in_title(self) -> None:
        if self.controller.info is not None:
            self.setWindowTitle(f"TokenStep — {self.controller.info.name}")
        else:
            self.setWindowTitle(translate("MainWindow", "TokenStep — one token at a time"))

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.LanguageChange:  # sent by Qt to every widget when the translator changes
            self.retranslate()

    def retranslate(self) -> None:
        """The window's own words: menus, actions, toolbar, dock titles (each view words its own texts)."""
        menus = self.menus
        for key, title in (("file", translate("MainWindow", "&File")), ("generation", translate("MainWindow", "&Generation")),
                           ("model", translate("MainWindow", "&Model")), ("view", translate("MainWindow", "&View")),
                           ("help", translate("MainWindow", "&Help")),
                           ("png", translate("MainWindow", "Export view as PNG")),
                           ("language", translate("MainWindow", "Language"))):
            menus[key].setTitle(title)
        retranslate_actions(self.actions)
        self.loader.retranslate()
        self.dock_layout.retranslate()
        for key, action in self.png_actions.items():
            action.setText(translate("MainWindow", "{view} view…").format(view=self.docks[key].windowTitle()))
        self.toolbar.setWindowTitle(translate("MainWindow", "Generation"))
        self.history_label.setText(translate("MainWindow", " History "))
        self._show_model_in_title()
        self.actions["record"].setText(translate("MainWindow", "Stop recording") if self.recorder.recording
                                       else translate("Actions", "Record video…"))
        self.generation.enable()  # the Step button says Pause during a run
        missing_font = self.language == "zh_CN" and not app_language.has_chinese_font()
        self.status.set_hint(app_language.NO_CHINESE_FONT if missing_font else "")

    # --- what tests, benchmarks and app.py call -------------------------------------------------------
    def load_model(self, spec: str) -> None:
        self.loader.load(spec)

    def open_model_picker(self) -> ModelPicker:
        picker = ModelPicker(self, self.loader)
        picker.setAttribute(Qt.WA_DeleteOnClose)
        picker.open()
        return picker

    def prefill(self) -> None:
        self.generation.prefill()

    def open_serve_dialog(self) -> ServeDialog:
        """Generation → Serve several requests…: the requests edited, then served (the Serving dock shows them)."""
        dialog = ServeDialog(self, self.controls.settings())
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.accepted.connect(lambda: self.serve(*dialog.chosen))
        dialog.open()
        return dialog

    def serve(self, requests, block_tokens: int = 16, n_blocks: int = 0, token_budget: int = 48) -> bool:
        """Serve these requests together and bring the Serving dock forward."""
        if not self.controller.serve(tuple(requests), block_tokens, n_blocks, token_budget):
            self.status.say(translate("MainWindow", "Serving needs a loaded model and nothing else running."))
            return False
        return True

    def show_serving(self) -> None:
        self.dock_layout.bring_forward("serving")

    def run(self) -> None:
        self.generation.run()

    def set_language(self, code: str) -> None:
        """View → Language: the whole window in this language now (the engine and the steps untouched), and at
        the next start."""
        self.language = app_language.set_language(code)
        self.qsettings.setValue("language", self.language)
        self.language_actions[self.language].setChecked(True)

    def play_script(self, path: str) -> bool:
        """Play a lesson script (or replay a trace) once a model is loaded; a bad one gets an error dialog."""
        return self.script_player.play_file(path)

    def _recording_stopped(self, path: str, frames: int, why: str) -> None:
        self.status.say(translate("MainWindow", "Recorded %n frame(s) ({seconds} s) to {path}", None, frames)
                        .format(seconds=f"{frames / self.recorder.fps:.1f}", path=path) + (f" · {why}" if why else ""))
        self.actions["record"].setChecked(False)
        self.actions["record"].setText(translate("Actions", "Record video…"))

    def toggle_recording(self, path: str | None = None) -> None:
        """File → Record: start (asking where, unless `path`), or stop and write the file."""
        if self.recorder.recording:
            self.recorder.stop()
        else:
            if not path:
                path, _ = QFileDialog.getSaveFileName(self, translate("MainWindow", "Record video"), "tokenstep.mp4",
                                                      translate("MainWindow", "MP4 video (*.mp4);;Animated GIF (*.gif)"))
            try:
                if path:
                    self.recorder.start(path)
            except (ValueError, OSError) as e:
                QMessageBox.warning(self, translate("MainWindow", "Record video"), str(e))
        self.actions["record"].setChecked(self.recorder.recording)
        self.actions["record"].setText(translate("MainWindow", "Stop recording") if self.recorder.recording
                                       else translate("Actions", "Record video…"))

    def export_trace(self, path: str | None = None) -> str | None:
        return export.export_trace(self, self.controller.trace_lines(), self.status, path)

    def export_png(self, dock_key: str | None, path: str | None = None) -> str | None:
        widget = self if dock_key is None else self.docks[dock_key]
        name = "tokenstep.png" if dock_key is None else f"tokenstep-{dock_key}.png"
        return export.export_png(self, widget, name, self.status, path)

    def proportion_docks(self) -> None:
        self.dock_layout.proportion()

    def resize_to(self, width: int, height: int) -> None:
        """This size, in the dock arrangement for it (a resize alone keeps the arrangement's minimum size)."""
        self.dock_layout.resize_window(QSize(width, height))

    def restore_layout(self) -> bool:
        return self.dock_layout.restore()

    def save_layout(self) -> None:
        self.dock_layout.save()

    def reset_layout(self) -> None:
        self.dock_layout.reset()

    def closeEvent(self, event) -> None:
        self.recorder.stop()
        self.save_layout()
        self.loader.close_progress()
        self.controller.shutdown()
        super().closeEvent(event)
