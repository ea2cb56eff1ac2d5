"""Driving the app in GUI tests: waiting on the event loop, a module-wide window on the default model."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

WAIT = 120_000  # ms: generous, the machines are shared


def wait_until(condition, timeout_ms=WAIT):
    deadline = time.monotonic() + timeout_ms / 1000
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        QApplication.processEvents()
        time.sleep(0.005)


def idle(c) -> bool:
    return not c.busy and not c.running


def settle(win) -> None:
    """Until the views show the latest reports (a redraw that waited for its interval has run)."""
    wait_until(lambda: not win.controller.scheduler.redraw_due)
    QApplication.processEvents()


def window_fixture(name: str, scope: str = "module"):
    """A fixture (module-scoped unless asked): a 1600x1000 window that has loaded the default model; closed
    and joined after."""

    @pytest.fixture(scope=scope)
    def window(qapp, default_model, tmp_path_factory):
        from gui.app import tune_process
        from gui.main_window import MainWindow
        from gui.theme import Appearance

        tune_process()  # as the app runs
        settings = QSettings(str(tmp_path_factory.mktemp(name) / "tokenstep.ini"), QSettings.IniFormat)
        appearance = Appearance()
        appearance.apply()  # as the app does before it builds the window: the style sheet sizes the widgets
        win = MainWindow(settings=settings, appearance=appearance, language="en")  # the tests read English words
        win.resize(1600, 1000)
        win.show()
        wait_until(lambda: win.controller.info is not None)
        yield win
        win.close()
        assert win.controller.thread.isFinished()

    return window


DEFAULT_PROMPT = "The capital of France is"


def set_controls(win, **values) -> None:
    """Controls by name (greedy=True, seed=7, speculate=4, max_new=8): check boxes checked, spin boxes set."""
    for name, value in values.items():
        widget = getattr(win.controls, name)
        widget.setChecked(value) if isinstance(value, bool) else widget.setValue(value)


def prefill(win, prompt: str = DEFAULT_PROMPT, **controls) -> None:
    """The controls given set, the prompt read; returns once the views show it (no step taken yet)."""
    set_controls(win, **controls)
    win.controls.prompt.setPlainText(prompt)
    win.actions["prefill"].trigger()
    c = win.controller
    wait_until(lambda: c.prefilled and not c.steps and idle(c))
    settle(win)


def step(win, n: int = 1) -> int:
    """`n` presses of Step, each until what it decided arrived (with speculation a verify pass may decide several
    steps), then until the views show them; the steps taken."""
    c = win.controller
    start = len(c.steps)
    for _ in range(n):
        before = len(c.steps)
        win.actions["step"].trigger()
        wait_until(lambda: len(c.steps) > before and idle(c))
    settle(win)
    return len(c.steps) - start


class FrameLog:
    """`read(win)` at every redraw, after every view has drawn (connected after the views), until closed."""

    def __init__(self, win, read):
        self.win, self.read, self.frames = win, read, []
        win.controller.redraw.connect(self._record)

    def _record(self) -> None:
        self.frames.append(self.read(self.win))

    def close(self) -> None:
        self.win.controller.redraw.disconnect(self._record)


def run_reading(win, pace: float, read) -> list:
    """Run at `pace` tokens/s (0: as fast as possible) until the generation stops: `read(win)` of every frame."""
    c = win.controller
    win.controls.pace.setCurrentIndex(win.controls.pace.findData(pace))
    assert c.pacer.tokens_per_s == pace
    log = FrameLog(win, read)
    try:
        win.actions["run"].trigger()
        wait_until(lambda: c.stopped is not None and idle(c))
        settle(win)
    finally:
        log.close()
    return log.frames
