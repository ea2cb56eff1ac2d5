"""Issue 20: the engine process killed mid-run. The GUI says so in one line and keeps every step; the next
action restarts the engine, loads the model again and restores the session (prompt, branch tree, current
path), so stepping goes on where it stopped, with the tokens an uninterrupted engine would have drawn.
Closing the window while a load or a long prefill is on its way ends both processes within 2 s."""

import os
import signal
import time

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QMessageBox

from app_driver import idle, settle, wait_until, window_fixture
from gui.main_window import MainWindow
from gui.theme import Appearance
from inference.session.session import Session, prompt_ids

PROMPT = "Write a short list of fruits:"


window = window_fixture("restart", scope="function")  # each test kills its engine


def _ids(c):
    return [s.token.id for s in c.steps]


def _close_error_boxes() -> list[str]:
    texts = []
    for widget in QApplication.topLevelWidgets():
        if isinstance(widget, QMessageBox) and widget.isVisible():
            texts.append(widget.text())
            widget.close()
    return texts


def _kill_engine_and_wait(win) -> str:
    c = win.controller
    process = c.worker.process
    os.kill(process.pid, signal.SIGKILL)
    wait_until(lambda: c.restore.lost)
    settle(win)
    return win.status.state.text()


def test_killed_mid_run_keeps_the_steps_and_the_next_step_restores_the_session(window, default_model):
    c = window.controller
    window.controls.greedy.setChecked(True)
    window.controls.max_new.setValue(200)
    window.controls.prompt.setPlainText(PROMPT)
    window.actions["prefill"].trigger()
    wait_until(lambda: c.prefilled and idle(c))
    for _ in range(3):
        window.actions["step"].trigger()
        wait_until(lambda: idle(c) and c.pending is not None and c.pending.index == len(c.steps) + 1)
    c.rewind(3)  # back before step 3, which takes the runner-up this time: a second branch
    wait_until(lambda: idle(c) and len(c.steps) == 2 and c.pending is not None and c.pending.index == 3)
    second_best = int(c.pending.dist.candidates.ids[1])
    c.force(second_best)
    wait_until(lambda: len(c.steps) == 3 and idle(c))
    branch_node = c.history.nodes[c.history.current.id]
    window.actions["run"].trigger()
    wait_until(lambda: len(c.steps) >= 10)
    dead_pid = c.worker.process.pid
    line = _kill_engine_and_wait(window)

    assert "the inference engine stopped (exit code -9)" in line and "steps so far are kept" in line
    assert "\n" not in line
    assert any("exit code -9" in text for text in _close_error_boxes())
    kept = _ids(c)
    assert len(kept) >= 10 and kept[2] == second_best and c.info is not None
    assert c.can_step and not c.running  # the buttons work: the next action brings the engine back

    window.actions["step"].trigger()
    wait_until(lambda: len(c.steps) == len(kept) + 1 and idle(c))
    assert c.worker.process.pid != dead_pid and c.worker.process.is_alive()
    assert _ids(c)[:len(kept)] == kept  # the history was kept, not re-read into new events

    # The step drawn by the restored engine is the one an engine that never died draws after that path.
    reference = Session(default_model)
    reference.update_settings(c.settings)
    ids, _ = prompt_ids(default_model, PROMPT)
    reference.prefill(ids)
    for token_id in kept:
        list(reference.force(token_id))
    expected = next(e for e in reference.step() if hasattr(e, "token")).token.id
    assert _ids(c)[-1] == expected

    # The branch tree came back too: the engine can switch to the first branch (greedy step 3).
    first_branch = next(n for n in c.history.nodes.values() if n.depth == 3 and n.id != branch_node.id)
    c.switch(first_branch.id)
    wait_until(lambda: idle(c) and c.history.current.id == first_branch.id)
    assert len(c.steps) == 3 and _ids(c)[:2] == kept[:2]
    assert not _close_error_boxes()


@pytest.mark.parametrize("when", ["load", "prefill"])
def test_closing_during_a_load_or_a_long_prefill_exits_within_two_seconds(qapp, default_model, tmp_path, when):
    win = MainWindow(settings=QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat),
                     appearance=Appearance())
    win.show()
    c = win.controller
    if when == "prefill":
        wait_until(lambda: c.info is not None)
        win.controls.prompt.setPlainText(" ".join(["tokens"] * 1800))  # a prefill of several chunks
        win.actions["prefill"].trigger()
        wait_until(lambda: c.prefilling)
        time.sleep(0.3)
    else:
        wait_until(lambda: c.loading)
        time.sleep(0.5)  # inside the load (a fresh engine imports torch, then reads the weights)
    started = time.perf_counter()
    win.close()
    closed_s = time.perf_counter() - started
    assert c.thread.isFinished() and not c.worker.process.is_alive(), f"still running after {closed_s:.2f} s"
    assert closed_s < 2.0, f"closing took {closed_s:.2f} s"


def test_a_load_that_kills_the_engine_keeps_the_steps(window):
    """The engine dies inside a load (out of memory, say): the loader says so, the steps stay, and the next
    Step brings back the model that was loaded before (the one that died loading is not retried)."""
    c = window.controller
    window.controls.greedy.setChecked(True)
    window.controls.prompt.setPlainText(PROMPT)
    window.actions["prefill"].trigger()
    wait_until(lambda: c.prefilled and idle(c))
    window.actions["step"].trigger()
    wait_until(lambda: len(c.steps) == 1 and idle(c))
    kept = _ids(c)
    window.load_model("default")  # a load that takes a few seconds: killed inside it
    wait_until(lambda: c.loading)
    time.sleep(0.3)
    os.kill(c.worker.process.pid, signal.SIGKILL)
    wait_until(lambda: window.loader.error_box is not None)
    text = window.loader.error_box.text()
    assert "stopped (exit code -9) while loading the default model" in text
    assert "the steps so far are kept, and the default model is loaded again at your next action" in text
    window.loader.error_box.close()
    assert _ids(c) == kept and not c.loading
    window.actions["step"].trigger()
    wait_until(lambda: len(c.steps) == 2 and idle(c))
    assert _ids(c)[:1] == kept


def test_bytes_that_are_no_message_stop_the_engine_with_one_line(qapp):
    """A reply pipe that carries garbage cannot be trusted: the engine is stopped and the GUI told once."""
    from gui.link.worker import InferenceWorker

    class Garbage:
        def poll(self):
            return True

        def recv_bytes(self):
            return b"\xff\x00 no pickle at all"

        def close(self):
            pass

    class Process:
        pid, exitcode, killed = 1, -9, False

        def is_alive(self):
            return not self.killed

        def kill(self):
            self.killed = True

        def join(self, timeout=None):
            pass

    worker = InferenceWorker()
    lost = []
    worker.engine_lost.connect(lost.append)
    worker.process, worker._replies, worker._commands = Process(), Garbage(), Garbage()
    from PySide6.QtCore import QTimer

    worker._watch = QTimer()
    worker._drain()
    assert worker.process.killed and worker._commands is None
    assert lost == ["the inference engine sent bytes this app cannot read (UnpicklingError) and was stopped"]


def test_a_pickle_that_would_run_code_is_refused_before_it_runs(tmp_path):
    """The pipe admits the protocol's classes and numpy arrays only: a pickle that would call a function (here
    one that writes a file) is refused while it is read, and nothing ran."""
    import multiprocessing
    import pickle

    import numpy as np

    from inference.engine import protocol as p

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.send_bytes(pickle.dumps(Payload()))
    with pytest.raises(pickle.UnpicklingError, match=r"io.open is not part of the protocol"):
        p.receive(reader, p.Reply)
    assert not marker.exists()
    sent = p.Failed("one line", "details", False)
    writer.send(p.wrap(sent))  # what the engine sends: read back whole
    assert p.receive(reader, p.Reply) == sent
    writer.send(p.wrap(p.Quit()))  # a command where a reply belongs: readable, and refused by its kind
    with pytest.raises(ValueError, match="unknown reply: Quit"):
        p.receive(reader, p.Reply)
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    writer.send(array)  # numpy arrays come through (inside events); a bare one is no message
    with pytest.raises(ValueError, match="not a protocol message: ndarray"):
        p.receive(reader, p.Reply)
