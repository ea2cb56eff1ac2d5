"""The app plays a lesson script through its controller, as a person would click (offscreen, tiny model)."""

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from gui.main_window import MainWindow
from gui.theme import Appearance
from inference.events import StepDone
from inference.lessons.lesson import play
from inference.store.loading import load_model
from inference.lessons.script import parse_script
from inference.session.session import Session
from inference.lessons.trace import script_from_trace
from tiny import make_hf_model, save_hf_model

WAIT = 120_000  # ms: generous, the machines are shared
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = {"prompt": "the cat", "settings": {"seed": 7, "temperature": 1.5, "top_k": 0, "max_new_tokens": 20},
          "actions": [{"caption": "Hello class"}, {"prefill": True}, {"step": 2}, {"set": {"temperature": 0.3}},
                      {"rewind": 2}, {"step": 1}, {"wait": 50}, {"force": " the"}, {"caption": "A fork"}]}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=11), tmp_path_factory.mktemp("gui_script"))


@pytest.fixture()
def window(qtbot, folder, tmp_path):
    win = MainWindow(settings=QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat),
                     appearance=Appearance(), model=str(folder))
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    qtbot.waitUntil(lambda: win.controller.info is not None, timeout=WAIT)
    yield win
    win.close()


@pytest.fixture()
def dialogs(monkeypatch):
    shown = []
    monkeypatch.setattr("gui.lessons.script_player.QMessageBox.warning", lambda parent, title, text: shown.append(text))
    return shown


def _write(tmp_path, data, name="lesson.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_a_script_plays_in_the_app_with_its_captions_and_the_same_tokens_as_headless(qtbot, window, folder,
                                                                                     tmp_path, dialogs):
    captions = []
    player = window.script_player
    player.caption.connect(captions.append)
    with qtbot.waitSignal(player.finished, timeout=WAIT):
        assert window.play_script(_write(tmp_path, SCRIPT))
    c = window.controller
    assert captions == ["Hello class", "A fork", ""] and not dialogs  # the last one read, then hidden
    assert not window.caption.isVisible()
    model = load_model(folder, device="cpu")
    session = Session(model)
    list(play(session, model, parse_script(SCRIPT)))
    assert [s.token.id for s in c.steps] == session.generated and len(c.steps) == 3
    assert [s.forced for s in c.steps] == [False, False, True] and c.steps[1].settings.sampler.temperature == 0.3
    assert window.controls.temperature.value() == 0.3  # the Controls show what the script set
    assert window.controls.prompt.toPlainText() == "the cat"
    # The exported trace keeps the captions and replays to the same tokens.
    lines = c.trace_lines()
    replay = parse_script(script_from_trace(lines))
    assert [a.value for a in replay.actions if a.kind == "caption"] == ["A fork"]  # the first came before prefill
    again = Session(model)
    events = list(play(again, model, replay))
    assert again.generated == session.generated and any(isinstance(e, StepDone) and e.forced for e in events)
    # The app replays its own exported trace too (its prompt as text, checked against the prompt ids).
    path = tmp_path / "exported.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with qtbot.waitSignal(player.finished, timeout=WAIT):
        assert window.play_script(str(path))
    assert [s.token.id for s in c.steps] == session.generated and not dialogs


def test_a_bad_script_gets_one_line_in_a_dialog_and_the_app_goes_on(qtbot, window, tmp_path, dialogs):
    bad = dict(SCRIPT, actions=[{"prefill": True}, {"stepp": 2}])
    assert not window.play_script(_write(tmp_path, bad))
    path = _write(tmp_path, bad)
    assert dialogs == [f'{Path(path).name}: action 1: unknown action "stepp" (known: prefill, run, reset, step, '
                       'set, seed, rewind, force, caption, wait, serve, add_request, serve_steps, finish, show_request)']
    late = dict(SCRIPT, actions=[{"prefill": True}, {"step": 1}, {"rewind": 4}, {"caption": "never"}])
    captions = []
    window.script_player.caption.connect(captions.append)
    assert window.play_script(_write(tmp_path, late, "late.json"))
    qtbot.waitUntil(lambda: len(dialogs) == 2, timeout=WAIT)
    assert dialogs[1] == 'action 2 ("rewind"): rewind 4 is past the 1 steps taken so far'
    assert not window.script_player.playing and captions == []
    c = window.controller
    qtbot.waitUntil(lambda: not c.busy, timeout=WAIT)
    window.actions["step"].trigger()  # the app still steps by hand
    qtbot.waitUntil(lambda: len(c.steps) == 2 and not c.busy, timeout=WAIT)


def test_the_app_takes_a_script_to_play_on_its_command_line():
    from gui.app import parse_args

    assert parse_args(["--script", "lesson.json"]).script == "lesson.json" and parse_args([]).script is None


def test_the_last_caption_is_read_then_goes(qtbot, window, tmp_path, dialogs):
    """On the controller's clock (a recording's is virtual): the last caption stays CAPTION_HOLD_S, then hides
    itself and the script is over; nobody has to click it away."""
    from gui.link.playback import VirtualClock
    from gui.lessons.script_player import CAPTION_HOLD_S

    c, player = window.controller, window.script_player
    clock = c.clock = VirtualClock()
    script = dict(SCRIPT, actions=[{"prefill": True}, {"caption": "Read me"}, {"step": 1}])
    assert window.play_script(_write(tmp_path, script))
    qtbot.waitUntil(lambda: len(c.steps) == 1 and player.waiting_on_clock(), timeout=WAIT)
    assert window.caption.isVisible() and window.caption.text() == "Read me" and player.playing
    clock.advance(CAPTION_HOLD_S - 0.5)
    qtbot.wait(100)
    assert window.caption.isVisible() and player.playing  # still being read
    with qtbot.waitSignal(player.finished, timeout=WAIT):
        clock.advance(0.5)
    assert not window.caption.isVisible() and not dialogs


def test_captions_keep_to_the_bottom_of_a_1280x720_frame(qtbot, window):
    """The example lessons' longest caption at 1280x720 (a recording's size): a band at the bottom, a fifth of
    the frame at most (it took a third), inside the window."""
    from inference.lessons.trace import load_script

    lessons = ROOT / "resources" / "lessons"
    longest = max((a.value for name in ("capital_of_france.json", "capital_of_france.zh-CN.json")
                   for a in load_script(lessons / name).actions if a.kind == "caption"), key=len)
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: window.height() <= 760, timeout=WAIT)
    window.caption.show_text(longest)
    box = window.caption.geometry()
    assert box.height() <= 0.2 * window.height() and box.bottom() < window.height() and box.top() > window.height() / 2
    assert window.caption.heightForWidth(box.width()) <= box.height()  # every line of it shows
    window.resize(1600, 1000)
    qtbot.waitUntil(lambda: window.caption.width() > box.width(), timeout=WAIT)  # it follows the window
    assert window.caption.font().pixelSize() > 20
    window.caption.show_text("")


@pytest.mark.parametrize("name", ["capital_of_france.json", "capital_of_france.zh-CN.json"])
def test_the_example_lesson_ends_with_a_run_to_film(default_model, name):
    """Its last Run (after the fork on " London") goes on for several tokens, so its video shows a run; it
    stopped after one token at its stop string "."."""
    from inference.lessons.trace import load_script

    script = load_script(ROOT / "resources" / "lessons" / name)
    assert script.actions[-1].kind == "caption" and "run" in [a.kind for a in script.actions]
    session = Session(default_model)
    events = list(play(session, default_model, script))
    after_run = events[max(i for i, e in enumerate(events) if isinstance(e, StepDone) and e.forced) + 1:]
    ran = [e for e in after_run if isinstance(e, StepDone)]
    assert len(ran) >= 6, [e.token.text for e in ran]
    assert session.generated[0] == default_model.tokenizer.encode(" London", add_special_tokens=False)[0]
