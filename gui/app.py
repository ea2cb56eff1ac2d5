"""Application start-up: arguments, QApplication, theme, the main window, and `--screenshot`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from PySide6.QtCore import QSettings, QThreadPool, QTimer
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication

from inference.arguments import add_model_arguments, add_prompt_arguments, model_spec
from inference.errors import one_line
from inference.lessons.trace import load_script

from gui import language
from gui.lessons.recorder import ScriptRecording
from gui.link.playback import DEFAULT_PACE
from gui.main_window import MainWindow
from gui.theme import Appearance

SCREENSHOT_SIZE = (1600, 1000)
ICON = Path(__file__).resolve().parent.parent / "resources" / "icons" / "tokenstep.svg"
# A waiting thread gets the GIL after this long (Python's default is 5 ms): the worker thread relaying the
# engine's replies need not wait for a whole redraw.
GIL_SWITCH_S = 0.001


def tune_process() -> None:
    """The process-wide settings the app runs with, set once before the window (and the engine) start."""
    sys.setswitchinterval(GIL_SWITCH_S)
    # Qt converts large images (the window's backing store) on its global thread pool, one thread per
    # core: bursts that take both cores from decode. One thread keeps painting off the engine's core.
    QThreadPool.globalInstance().setMaxThreadCount(1)
    # The engine's OpenMP threads share two cores with this process: let them spin only briefly at a
    # barrier before sleeping, so a redraw does not find both cores taken by spinning (measured: worst
    # event-loop lateness 63-82 ms at the default spin count, 45-47 ms at 1000; decode speed unchanged).
    # The spawned engine process inherits it.
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="main.py", description="TokenStep: watch a language model write "
                                     "one token at a time. Subcommands: trace, download (see `main.py trace -h`).")
    add_model_arguments(parser)
    parser.add_argument("--dark", action="store_true", help="start with the dark theme")
    parser.add_argument("--presentation", action="store_true", help="start in presentation mode")
    add_prompt_arguments(parser, None)
    parser.add_argument("--lang", type=_language, default=None, metavar="zh_CN|en",
                        help="the app's language (menus, views, explanations): zh_CN (简体中文) or en; default: the "
                        "one chosen last time in View → Language, else the system's")
    parser.add_argument("--screenshot", metavar="OUT.png", help="load, prefill, take --steps steps, save the "
                        "window as a PNG and exit")
    parser.add_argument("--steps", type=int, default=3, help="steps to take before --screenshot (default 3)")
    parser.add_argument("--seed", type=int, default=None, help="the seed of the draws (as `trace --seed`)")
    parser.add_argument("--greedy", action="store_true", help="start with greedy decoding (the most likely token "
                        "at every step) instead of the model's sampling defaults")
    parser.add_argument("--script", metavar="FILE", help="play a lesson script (or replay a trace) once the model "
                        "is loaded")
    parser.add_argument("--record", metavar="OUT.mp4|OUT.gif", help="with --script: play the lesson on a virtual "
                        "clock, write what the window shows as a video (MP4: H.264; GIF) and exit")
    parser.add_argument("--fps", type=int, default=10, help="frames per second of --record (default 10)")
    parser.add_argument("--size", default="1280x720", help="window size of --record, WxH (default 1280x720)")
    parser.add_argument("--pace", type=float, default=DEFAULT_PACE, help="tokens per second a Run shows in "
                        f"--record (default {DEFAULT_PACE:g}; 0: as fast as possible)")
    return parser.parse_args(argv)


def _language(code: str) -> str:
    """--lang's value: a language the app has ("zh", "zh-CN" and "zh_CN" are the same), else a usage error."""
    chosen = language.normalise(code)
    if chosen is None:
        raise argparse.ArgumentTypeError(f"{code!r}: choose one of {', '.join(language.LANGUAGES)}")
    return chosen


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


LARGEST_WINDOW = (1920, 1200)  # beyond it (a 4K screen) the window does not grow: the type does not either


def fit_to_screen(window) -> None:
    """The screen's free area (frame included), up to LARGEST_WINDOW: at 1280x720 or 1920x1080 the window
    fills the screen, and the dock layout picks the arrangement for that size (dock_layout)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    free = screen.availableGeometry() if screen is not None else None
    if free is None:
        window.resize_to(*SCREENSHOT_SIZE)
        return
    width, height = min(LARGEST_WINDOW[0], free.width() - 16), min(LARGEST_WINDOW[1], free.height() - 48)
    window.resize_to(width, height)  # room for the frame
    window.move(free.x() + (free.width() - width - 16) // 2, free.y() + (free.height() - height - 48) // 2)


def start_greedy(window) -> None:
    """Greedy from the first step: set once the model is loaded, as its defaults are applied then."""
    def greedy_once():
        window.controls.greedy.setChecked(True)
        window.controller.model_changed.disconnect(greedy_once)

    window.controller.model_changed.connect(greedy_once)


def _size(text: str) -> tuple[int, int] | None:
    width, _, height = text.lower().partition("x")
    if width.isdigit() and height.isdigit() and int(width) >= 64 and int(height) >= 64:
        return int(width), int(height)
    return None


def _refuse_record(args: argparse.Namespace) -> int:
    """2 (after one line on stderr) when --record cannot be done as asked, before anything loads; else 0."""
    if not args.record:
        return 0
    if not args.script:
        print("error: --record needs --script LESSON.json", file=sys.stderr)
        return 2
    if not (Path(args.record).suffix.lower() in (".mp4", ".gif") and args.fps > 0 and _size(args.size)):
        print("error: --record writes OUT.mp4 or OUT.gif, at --fps > 0 and --size WxH", file=sys.stderr)
        return 2
    try:
        load_script(args.script)  # a bad lesson is refused before the model loads
    except (ValueError, OSError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    return 0


def lesson_language(args: argparse.Namespace) -> int:
    """A recording without --lang is filmed in the language its lesson declares ("language": "zh_CN"), so the
    Chinese lesson's video shows the Chinese window. 2 (after one line on stderr) for a language the app lacks."""
    if not (args.record and args.script) or args.lang is not None:
        return 0
    declared = load_script(args.script).language
    if declared is None:
        return 0
    chosen = language.normalise(declared)
    if chosen is None:
        print(f"error: the lesson's language {declared!r} is not one of {', '.join(language.LANGUAGES)}",
              file=sys.stderr)
        return 2
    args.lang = chosen
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    refused = _refuse_record(args) or lesson_language(args)
    if refused:
        return refused
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("TokenStep")
    app.setOrganizationName("TokenStep")
    app.setStyle("Fusion")
    app.setWindowIcon(QIcon(str(ICON)))
    tune_process()
    appearance = Appearance(dark=args.dark, presentation=args.presentation)
    appearance.apply()
    settings = QSettings("TokenStep", "TokenStep")
    if args.screenshot or args.record:
        settings = QSettings(QSettings.IniFormat, QSettings.UserScope, "TokenStep",
                             "record" if args.record else "screenshot")
        settings.clear()  # a screenshot or a recording always shows the default layout
    window = MainWindow(settings=settings, appearance=appearance, model=model_spec(args), device=args.device,
                        dtype=args.dtype, language=args.lang)
    window.actions["dark"].setChecked(args.dark)
    window.actions["presentation"].setChecked(args.presentation)
    if args.prompt is not None:
        window.controls.prompt.setPlainText(args.prompt)
    window.controls.chat.setChecked(args.chat)
    window.controls.system.setText(args.system)
    if args.seed is not None:
        window.controls.seed.setValue(args.seed)
    if args.greedy:
        start_greedy(window)
    run = None
    if args.screenshot:
        window.resize_to(*SCREENSHOT_SIZE)
        run = ScreenshotRun(window, args.screenshot, max(args.steps, 0))
    elif args.record:
        window.resize_to(*_size(args.size))
        try:
            run = ScriptRecording(window, args.record, args.script, args.fps, args.pace)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            window.controller.shutdown()
            return 2
    elif not window.layout_restored:
        fit_to_screen(window)
    window.show()
    if args.script and not args.record:  # after show: a bad script's dialog opens over the window
        QTimer.singleShot(0, lambda: window.play_script(args.script))
    code = app.exec()
    window.controller.shutdown()
    return run.exit_code if run is not None and code == 0 else code
