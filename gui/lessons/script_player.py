"""Play a lesson script in the app: one action at a time through the controller, as a person would click.

The script is checked when it is opened (inference/lessons/script.py) and each action again when its turn comes,
with the same rules as `main.py trace --script` (script.refusal), so both refuse the same actions with
the same one line. The player waits until the controller has nothing on its way (no prefill, step, run,
rewind or reset in flight, no model loading) before the next action; `wait` pauses that many ms;
`caption` shows its text large over the window (`CaptionBanner`), for a class or a screen recording; the
last one stays CAPTION_HOLD_S after it was shown (however the script ended), then goes.
Waits count on the controller's clock (a recorder's virtual one advances frame by frame); with a pace
set (playback.py) the steps of a `step N` come one period apart, and a `run` is played back at the pace.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QWidget

from inference.errors import one_line
from inference.events import Caption
from inference.engine.protocol import ServeRequest
from inference.lessons.script import Action, RequestSpec, Script, ScriptError, apply_settings, refusal
from inference.lessons.trace import load_script
from inference.messages import said
from inference.settings import GenerationSettings

from gui.link.controller import Controller
from gui.state.engine_words import word
from gui.state.i18n import translate

POLL_MS = 20  # how often the player looks whether the controller is free again
CAPTION_HOLD_S = 4.0  # a script's last caption is read this long (on the controller's clock), then hidden


class ScriptPlayer(QObject):
    caption = Signal(str)  # a caption to show ("" hides it)
    failed = Signal(str)  # one line: the script cannot be (or go on being) played
    finished = Signal()

    def __init__(self, controller: Controller, controls=None, parent: QObject | None = None):
        super().__init__(parent)
        self.controller = controller
        self.controls = controls  # the Controls dock, to show the script's prompt and settings; may be None
        self.script: Script | None = None
        self._next = 0  # the next action's index
        self._steps_left = 0  # of a `step N` under way
        self._done: Callable[[], bool] | None = None  # what the action in flight waits for, besides idle
        self._after: Callable[[], None] | None = None  # a check once it is done
        self._wait_until: float | None = None  # a `wait` (or the gap in a paced `step N`) ends then
        self._gap = False  # the next step of a `step N` comes after a pace period
        self._caption_at: float | None = None  # when the caption on show was shown (clock time); None: none
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self._tick)
        controller.error.connect(self._on_error)

    @property
    def playing(self) -> bool:
        return self.script is not None

    # --- starting and stopping ------------------------------------------------------------------------
    def play_file(self, path: str) -> bool:
        """Open and check `path` (a script, or a trace to replay), then play it once a model is loaded."""
        try:
            script = load_script(path)
        except (ValueError, OSError) as e:
            self.failed.emit(word(said(e), one_line(e)))
            return False
        return self.play(script)

    def play(self, script: Script) -> bool:
        self.stop()
        try:
            apply_settings(self.controller.settings, script.overrides)  # checked now, applied when a model is in
        except ValueError as e:
            self.failed.emit(translate("Lesson", "script settings: {error}").format(error=word(said(e), one_line(e))))
            return False
        self.script, self._next, self._steps_left, self._done = script, 0, 0, None
        self._wait_until, self._gap, self._caption_at = None, False, None
        # In force once a model is loaded (a new model shows its own defaults in the Controls first).
        self._after = lambda: self._apply(apply_settings(self.controller.settings, script.overrides))
        self._timer.start(0)
        return True

    def stop(self) -> None:
        self.script = None
        self._timer.stop()

    def _fail(self, error: ScriptError) -> None:
        self.stop()
        self.failed.emit(word(said(error), str(error)))

    def _on_error(self, message: str, details: str, expected: bool) -> None:
        """The engine refused or failed a request of the script's: the script stops there."""
        if self.script is not None and self._next > 0:
            self._fail(self.script.actions[self._next - 1].error(message.splitlines()[0] if message else
                                                                 translate("Lesson", "the engine failed")))

    # --- the loop -------------------------------------------------------------------------------------
    def _idle(self) -> bool:
        c = self.controller
        return c.info is not None and not c.loading and not c.busy and not c.running

    def waiting_on_clock(self) -> bool:
        """Only time passing moves the script on now (a `wait`, a paced gap), or it is over."""
        return self.script is None or (self._wait_until is not None
                                       and self.controller.clock.now() < self._wait_until)

    def _tick(self) -> None:
        if self.script is None:
            return
        if self._wait_until is not None:
            left = self._wait_until - self.controller.clock.now()
            if left > 0:
                self._timer.start(max(1, min(POLL_MS, int(left * 1000))))
                return
            self._wait_until = None
        if not self._idle() or (self._done is not None and not self._done()):
            self._timer.start(POLL_MS)
            return
        self._done = None
        try:
            delay = self._advance()
        except ScriptError as e:
            self._fail(e)
            return
        if delay is None:
            self.stop()
            self.finished.emit()
            return
        if delay > 0:
            self._wait_until = self.controller.clock.now() + delay / 1000
        self._timer.start(0)

    def _advance(self) -> int | None:
        """Check what the last request left, then start the next step or action: the ms to wait before
        the next tick, None when the script is over."""
        if self._after is not None:
            after, self._after = self._after, None
            after()
        if self._steps_left:
            if self._gap:  # paced: one period between two steps, as a Run shows them
                self._gap = False
                return round(self.controller.pacer.period * 1000)
            self._step_again()
            return 0
        if self._next >= len(self.script.actions):
            return self._last_caption_read()
        action = self.script.actions[self._next]
        self._next += 1
        return self._play(action)

    def _play(self, action: Action) -> int:
        """Start `action`; returns the ms to wait before the next tick."""
        c = self.controller
        status = c.history.status
        serving = c.serving
        served = len(serving.tracks) if serving.active and serving.tag == c.history.tag else 0
        why = refusal(action, c.prefilled and c.showing_request is None, len(c.steps),
                      status.blocked if status is not None else None, served)
        if why is not None:
            raise why
        kind = action.kind
        if kind == "prefill":
            self._prefill(action)
        elif kind == "step":
            self._steps_left = action.value
            self._step_again()
        elif kind == "run":
            c.select(None)
            self._request(action, c.run)
        elif kind in ("set", "seed"):
            try:
                self._apply(apply_settings(c.settings, action.overrides))
            except ValueError as e:
                raise action.error(said(e) or one_line(e)) from None
        elif kind == "reset":
            self._request(action, c.reset)
            self._done = lambda: not c.steps
        elif kind == "rewind":
            self._request(action, lambda: c.rewind(action.value))
            self._done = lambda: len(c.steps) == action.value - 1
        elif kind == "force":
            self._force(action)
        elif kind == "caption":
            c.history.captioned(Caption(action.value))  # an exported trace keeps the lesson's captions
            self._caption_at = c.clock.now() if action.value else None
            self.caption.emit(action.value)
        elif kind == "wait":
            return action.value
        elif kind == "serve":
            spec = action.value
            self._request(action, lambda: c.serve(self._serve_requests(action, spec.requests), spec.block_tokens,
                                                   spec.n_blocks, spec.token_budget, spec.steps))
            self._done = lambda: c.serving.active
        elif kind == "add_request":
            n = len(c.serving.tracks)
            self._request(action, lambda: c.add_requests(self._serve_requests(action, (action.value,))))
            self._done = lambda: len(c.serving.tracks) > n
        elif kind in ("serve_steps", "finish") and not serving.done:  # all finished: nothing left to run
            self._request(action, lambda: c.serve_more(action.value or 0))
        elif kind == "show_request":
            c.show_request(action.value)
        return 0

    def _serve_requests(self, action: Action, specs: tuple[RequestSpec, ...]) -> tuple[ServeRequest, ...]:
        """A script's requests as the engine takes them, each with its settings over the player's."""
        out = []
        for spec in specs:
            try:
                settings = apply_settings(self.controller.settings, dict(spec.settings))
            except ValueError as e:
                raise action.error(said(e) or one_line(e)) from None
            out.append(ServeRequest(spec.prompt or "", spec.chat, spec.system or "", settings, spec.arrive_at_step,
                                    tuple(spec.prompt_ids or ())))
        return tuple(out)

    def _last_caption_read(self) -> int | None:
        """At the script's end: the ms its last caption still stays up, then (at the next tick) hide it; None
        once it is gone (or there was none): the script is over."""
        if self._caption_at is None:
            return None
        left = self._caption_at + CAPTION_HOLD_S - self.controller.clock.now()
        if left > 0:
            return max(1, round(left * 1000))
        self._caption_at = None
        self.caption.emit("")
        return None

    def _request(self, action: Action, send: Callable[[], None]) -> None:
        """Send a gated request; the controller drops one it cannot serve now: then say so, not wait forever."""
        send()
        if not self.controller.busy:
            status = self.controller.history.status
            raise action.error(status.blocked if status is not None and status.blocked else
                               translate("Lesson", "the app could not do this now (is a run or a load under way?)"))

    def _step_again(self) -> None:
        """The next step of a `step N`, unless a stop rule ended the generation inside it."""
        c = self.controller
        status = c.history.status
        if status is not None and status.blocked:
            self._steps_left = 0
            return
        before = len(c.steps)
        self._steps_left -= 1
        self._gap = True
        c.select(None)
        self._request(self.script.actions[self._next - 1], c.step)
        self._done = lambda: len(c.steps) > before

    def _prefill(self, action: Action) -> None:
        script, c = self.script, self.controller
        if self.controls is not None and script.prompt is not None:
            _show_prompt(self.controls, script)
        ids = tuple(script.prompt_ids or ())  # exact ids (a replayed trace): read as they are
        self._request(action, lambda: c.prefill(script.prompt or "", script.chat, script.system or "", ids))
        self._done = lambda: c.prefilled

    def _force(self, action: Action) -> None:
        c = self.controller
        before = len(c.steps)
        c.select(None)  # show the pending step, where the token is taken
        self._request(action, lambda: c.force(action.value))
        self._done = lambda: len(c.steps) > before or c.stopped is not None

    def _apply(self, settings: GenerationSettings) -> None:
        if self.controls is not None:
            _show_settings(self.controls, settings)
        self.controller.set_settings(settings)  # last: the exact values, even where the Controls round them


def _show_prompt(controls, script: Script) -> None:
    controls.prompt.setPlainText(script.prompt)
    controls.chat.setChecked(script.chat)
    controls.system.setText(script.system or "")


def _show_settings(controls, settings: GenerationSettings) -> None:
    """The Controls show what the script set (each edit there sends settings; the player's own come last)."""
    s = settings.sampler
    controls.greedy.setChecked(s.greedy)
    controls.temperature.setValue(s.temperature)
    controls.top_k.setValue(s.top_k)
    controls.top_p.setValue(s.top_p)
    controls.min_p.setValue(s.min_p)
    controls.seed.setValue(min(settings.seed, controls.seed.maximum()))
    controls.max_new.setValue(settings.max_new_tokens)
    controls.speculate.setValue(min(settings.speculate, controls.speculate.maximum()))
    controls.context_limit.setValue(settings.context_limit)
    controls.when_full.setCurrentIndex(controls.when_full.findData(settings.when_full))
    controls.stops.setText(" | ".join(t.replace("\n", "\\n").replace("\t", "\\t") for t in settings.stop_strings))


class CaptionBanner(QLabel):
    """A script's caption, large, over the bottom of the window; a click hides it. Its type scales with the
    window's height (a 720 px frame: 2 lines of ~20 px type, not a third of the frame) and it takes 80% of
    the width, so that a long caption wraps into few lines."""

    WIDTH = 0.8  # of the window
    TYPE = 0.029  # px of type per px of window height
    TYPE_PX = (15, 34)  # the least and most
    MARGIN = 0.025  # of the window's height, under the banner

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.setObjectName("caption_banner")
        self.setTextFormat(Qt.PlainText)  # a script's text is shown as written, never as markup
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignCenter)
        self.setAttribute(Qt.WA_TransparentForMouseEvents, False)
        self.setStyleSheet("QLabel#caption_banner { background: rgba(20, 24, 32, 215); color: white; "
                           "border-radius: 8px; padding: 8px 18px; }")
        self.hide()
        window.installEventFilter(self)

    def show_text(self, text: str) -> None:
        if not text:
            self.hide()
            return
        self.setText(text)
        self._place()
        self.show()
        self.raise_()

    def mousePressEvent(self, event) -> None:
        self.hide()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Resize and self.isVisible():
            self._place()
        return False

    def _place(self) -> None:
        window = self.parentWidget()
        font = self.font()
        low, high = self.TYPE_PX
        font.setPixelSize(min(high, max(low, round(window.height() * self.TYPE))))
        self.setFont(font)
        width = int(window.width() * self.WIDTH)
        self.setFixedWidth(width)
        height = self.heightForWidth(width)
        self.setFixedHeight(max(height, self.sizeHint().height()))
        self.move((window.width() - width) // 2, window.height() - self.height() - round(window.height() * self.MARGIN))


def open_and_play(parent: QWidget, player: ScriptPlayer) -> None:
    """File → Play script…: ask for a script (or a trace to replay) and play it."""
    path, _ = QFileDialog.getOpenFileName(parent, translate("Lesson", "Play script"), "",
                                          translate("Lesson", "Lesson scripts and traces (*.json *.jsonl)"))
    if path:
        player.play_file(path)


def show_failure(parent: QWidget, message: str) -> None:
    QMessageBox.warning(parent, translate("Lesson", "Lesson script"), message)
