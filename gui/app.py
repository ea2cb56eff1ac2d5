"""Application start-up: arguments, QApplication, theme, the main window, and `--screenshot`."""

from __future__ import annotations

import argparse
import sys

from pathlib import Path

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication

from inference.cli import add_model_arguments, add_prompt_arguments, model_spec

SCREENSHOT_SIZE = (1600, 1000)
ICON = Path(__file__).resolve().parent.parent / "resources" / "icons" / "tokenstep.svg"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="main.py", description="TokenStep: watch a language model write "
                                     "one token at a time. Subcommands: trace, download (see `main.py trace -h`).")
    add_model_arguments(parser)
    parser.add_argument("--dark", action="store_true", help="start with the dark theme")
    parser.add_argument("--presentation", action="store_true", help="start in presentation mode")
    add_prompt_arguments(parser, None)
    parser.add_argument("--language", choices=("en", "zh"), default=None, help="language of the explanations")
    parser.add_argument("--screenshot", metavar="OUT.png", help="load, prefill, take --steps steps, save the "
                        "window as a PNG and exit")
    parser.add_argument("--steps", type=int, default=3, help="steps to take before --screenshot (default 3)")
    parser.add_argument("--script", metavar="FILE", help="play a lesson script (or replay a trace) once the model "
                        "is loaded")
    return parser.parse_args(argv)


class ScreenshotRun:
    """Drive the window through load -> prefill -> N steps, let the views settle, save, quit."""

    def __init__(self, window, path: str, steps: int):
        self.window, self.path, self.steps = window, path, steps
        self.exit_code = 1
        c = window.controller
        c.load_finished.connect(self._loaded)
        c.error.connect(self._failed)
        c.state_changed.connect(self._advance)
        self._stepping = False

    def _loaded(self, ok: bool, message: str) -> None:
        if not ok:
            print(f"error: {message or 'loading cancelled'}", file=sys.stderr)
            QApplication.exit(1)
            return
        self.window.prefill()
        self._stepping = True

    def _failed(self, message: str, details: str, expected: bool) -> None:
        print(f"error: {message}", file=sys.stderr)
        QApplication.exit(1)

    def _advance(self) -> None:
        c = self.window.controller
        if not self._stepping or not c.prefilled or c.busy or c.running:
            return
        if len(c.steps) < self.steps and c.can_step:
            c.step()
            return
        self._stepping = False
        QTimer.singleShot(400, self._save)  # a few redraw periods, so every view shows the last state

    def _save(self) -> None:
        QApplication.processEvents()
        image = self.window.grab()
        if image.save(self.path, "PNG"):
            print(self.path)
            self.exit_code = 0
        else:
            print(f"error: could not write {self.path}", file=sys.stderr)
        QApplication.exit(self.exit_code)


def fit_to_screen(window) -> None:
    """1600 x 1000 where the screen has room (frame included), else the screen's free area."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    free = screen.availableGeometry() if screen is not None else None
    if free is None:
        window.resize(1600, 1000)
        return
    width, height = min(1600, free.width() - 16), min(1000, free.height() - 48)  # room for the frame
    window.resize(width, height)  # where it goes is the window manager's choice


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("TokenStep")
    app.setOrganizationName("TokenStep")
    app.setStyle("Fusion")
    app.setWindowIcon(QIcon(str(ICON)))
    from .main_window import MainWindow
    from .theme import Appearance

    appearance = Appearance(dark=args.dark, presentation=args.presentation)
    appearance.apply()
    settings = QSettings("TokenStep", "TokenStep")
    if args.screenshot:
        settings = QSettings(QSettings.IniFormat, QSettings.UserScope, "TokenStep", "screenshot")
        settings.clear()  # a screenshot always shows the default layout
    window = MainWindow(settings=settings, appearance=appearance, model=model_spec(args), device=args.device,
                        dtype=args.dtype)
    window.actions["dark"].setChecked(args.dark)
    window.actions["presentation"].setChecked(args.presentation)
    if args.prompt is not None:
        window.controls.prompt.setPlainText(args.prompt)
    window.controls.chat.setChecked(args.chat)
    window.controls.system.setText(args.system)
    if args.language:
        window.set_language(args.language)
    run = None
    if args.screenshot:
        window.resize(*SCREENSHOT_SIZE)
        window.proportion_docks()
        run = ScreenshotRun(window, args.screenshot, max(args.steps, 0))
    elif not window.layout_restored:
        fit_to_screen(window)
        window.proportion_docks()
    window.show()
    if args.script:  # after show: a bad script's dialog opens over the window
        QTimer.singleShot(0, lambda: window.play_script(args.script))
    code = app.exec()
    window.controller.shutdown()
    return run.exit_code if run is not None and code == 0 else code
