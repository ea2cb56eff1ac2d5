"""Every view shows the same step in every frame: during Run (fast or paced) and when the history slider
moves (issue 18 items 3 and 4, and paced playback), on the real default model.

One window serves the module; each test starts from its own Prefill.
"""

from PySide6.QtWidgets import QApplication

from gui.state.history import History
from gui.views.base import View
from gui.views.branches_view import assign_rows
from inference.engine import protocol as p
from inference.events import PrefillDone, StepDone, Stopped, Token
from app_driver import FrameLog, idle, prefill, run_reading, settle, wait_until, window_fixture

window = window_fixture("in_step")


def _step(index):
    return StepDone(index=index, position=4 + index, token=Token(index, f" t{index}", f" t{index}"), forward_ms=1.0,
                    sample_ms=0.1, kv_used_bytes=0, kv_allocated_bytes=0, context_tokens=5 + index, chosen_rank=0,
                    random_u=None, dist=None, seed=0, node=index, parent=index - 1)


def test_the_history_holds_back_what_a_paced_playback_has_not_shown():
    h = History()
    h.prefilled(PrefillDone(tokens=(), n_tokens=5, ms=1.0, kv_used_bytes=0, kv_allocated_bytes=0, prompt_text=""))
    h.stepped([_step(1)])
    h.hold()  # a paced Run starts after step 1
    steps = [_step(i) for i in range(2, 6)]
    h.stepped(steps[:2])
    h.stepped(steps[2:])
    h.ended(Stopped("max_new_tokens", 5, "", 1.0, 1.0))
    assert h.behind and [s.index for s in h.steps] == [1] and h.stopped is None and h.shown_index() == 1
    assert h.log[-1].index == 1  # the prefill and step 1: nothing the playback has not reached
    assert h.unrevealed() == {2, 3, 4, 5} and h.shown_current.id == 1 and [n.id for n in h.path_nodes()] == [1]
    assert [node.id for node, _ in assign_rows(h.root, h.unrevealed())] == [0, 1]  # the Branches tree
    h.reveal(3)
    assert [s.index for s in h.steps] == [1, 2, 3] and h.log[-1] is steps[1] and h.shown_index() == 3
    assert h.stopped is None and h.reported == 5 and h.shown_current.id == 3 and h.unrevealed() == {4, 5}
    h.select(2)  # the history slider, during the playback
    assert h.shown_index() == 2
    h.follow_latest()
    h.reveal(5)
    assert not h.behind and h.stopped.reason == "max_new_tokens" and h.log[-1] is h.stopped
    h.reveal(2)
    h.release()  # paused or stopped: everything reported is shown
    assert len(h.steps) == 5 and h.horizon is None and h.shown_index() == 5
    assert h.unrevealed() == set() and h.shown_current is h.current and len(assign_rows(h.root)) == 6


def drawn_views(win) -> list[View]:
    """The views on screen (a dock tabbed behind another is drawn when raised)."""
    return [v for v in win.findChildren(View) if v.isVisible() and not v.visibleRegion().isEmpty()]


def shown_steps(win) -> tuple:
    """The shown step, whether a run is on, and the step each visible view reports."""
    c = win.controller
    return c.history.shown_index(), c.running, {type(v).__name__: v.shown_step for v in drawn_views(win)}


def run_and_record(win, pace: float) -> list:
    return run_reading(win, pace, shown_steps)


def assert_in_step(frames, n_views_at_least=5):
    assert frames
    for shown, _running, steps in frames:
        assert len(steps) >= n_views_at_least, steps
        assert set(steps.values()) == {shown}, (shown, steps)


def test_paced_run_shows_every_step_in_every_view_at_once(window, monkeypatch):
    c = window.controller
    prefill(window, greedy=True, max_new=6)
    sent = []
    emit = c._emit
    monkeypatch.setattr(c, "_emit", lambda command: (sent.append(command), emit(command)))
    frames = run_and_record(window, 8.0)
    # its steps come no further apart than half its period: a step due on screen is not held in a batch
    runs = [command for command in sent if isinstance(command, p.Run)]
    assert len(runs) == 1 and 0 < runs[0].batch_s <= 0.5 / 8.0
    assert_in_step(frames)
    views = frames[0][2]
    assert {"ContextView", "CandidatesView", "KvView", "StopView", "TimingView", "ExplainView"} <= set(views)
    # one step at a time: every step of the run was a frame of its own, in order (the engine may have
    # finished before the pacer showed the last steps: those frames come after `running` ends)
    during = [shown for shown, _running, _ in frames if shown]
    assert sorted(set(during)) == list(range(1, len(c.steps) + 1))
    assert during == sorted(during)
    assert len(c.steps) == 6 and c.stopped.reason == "max_new_tokens"
    assert c.history.horizon is None and not c.running  # caught up: everything shown


def test_fast_run_redraws_every_view_at_the_same_step(window):
    prefill(window, greedy=True, max_new=12)
    frames = run_and_record(window, 0.0)
    assert_in_step(frames)
    c = window.controller
    assert frames[-1][0] == c.history.shown_index() == len(c.steps) == 12  # the last frame: the run's end, everywhere


def test_the_history_slider_sets_every_views_step(window):
    c = window.controller
    prefill(window, greedy=True, max_new=5)
    run_and_record(window, 0.0)
    for k in (2, 4, 1):
        window.history.setValue(k)
        settle(window)
        views = drawn_views(window)
        assert {v.shown_step for v in views} == {k}, {type(v).__name__: v.shown_step for v in views}
    assert "Showing step 1" in window.views["context"].summary.text()
    assert window.views["stop"].shown_generated == 1
    window.history.setValue(window.history.maximum())
    settle(window)
    assert {v.shown_step for v in drawn_views(window)} == {len(c.steps)}


def _interrupt_a_paced_run(win, action: str) -> tuple[int, list]:
    """A greedy Run at 2 tokens/s, interrupted by `action` once the engine is two steps ahead of the screen:
    the step on screen then, and every frame drawn after."""
    c = win.controller
    prefill(win, greedy=True, max_new=40)
    win.controls.pace.setCurrentIndex(win.controls.pace.findData(2.0))
    win.actions["run"].trigger()
    wait_until(lambda: c.history.horizon is not None and c.history.horizon >= 2
               and c.history.reported >= c.history.horizon + 2, 20000)  # the engine runs ahead of the pace
    assert c.running
    on_screen = c.history.horizon  # read and triggered in one turn of the event loop: what the class sees
    frames = FrameLog(win, shown_steps)
    try:
        win.actions[action].trigger()
        wait_until(lambda: idle(c))
        settle(win)
    finally:
        frames.close()
    return on_screen, frames.frames


def _frozen_at(win, on_screen: int, frames: list) -> None:
    c = win.controller
    assert not c.running and c.history.horizon is None
    assert len(c.steps) == c.history.shown_index() == on_screen  # what the engine ran ahead is not on the path
    assert max(node.depth for node in c.history.nodes.values()) == on_screen  # nor kept in the tree
    assert {v.shown_step for v in drawn_views(win)} == {on_screen}
    assert frames and all(shown <= on_screen for shown, _running, _steps in frames)  # never a glimpse past it


def test_pause_during_a_paced_run_stays_at_the_step_on_screen(window):
    """Issue 40 item 1: Space/Pause during a paced Run showed every step the engine had computed ahead (24 of
    24 at once). The view stays at the step on screen; the engine takes back what it ran ahead, and the next
    Step gives the same token it had computed (greedy: the run was not lost, only not yet shown)."""
    c = window.controller
    on_screen, frames = _interrupt_a_paced_run(window, "step")  # Space / the Step button is Pause during a run
    ahead = c.history.reported  # (after the take-back: what is reported is what is shown)
    _frozen_at(window, on_screen, frames)
    assert c.stopped is None and ahead == on_screen
    window.actions["step"].trigger()
    wait_until(lambda: idle(c) and len(c.steps) == on_screen + 1)
    assert c.steps[-1].index == on_screen + 1
    # the same greedy prompt run straight through gives the same token at that step
    tokens = [s.token.id for s in c.steps]
    prefill(window, greedy=True, max_new=on_screen + 1)
    window.controls.pace.setCurrentIndex(window.controls.pace.findData(0.0))
    window.actions["run"].trigger()
    wait_until(lambda: c.stopped is not None and idle(c))
    assert [s.token.id for s in c.steps] == tokens


def test_esc_during_a_paced_run_stops_at_the_step_on_screen(window):
    """Issue 40 item 1: Esc at displayed step 12 of a paced Run showed step 24 of 24, "end of sequence". It
    stops at the step on screen and says so: aborted after that many tokens."""
    c = window.controller
    on_screen, frames = _interrupt_a_paced_run(window, "stop")
    _frozen_at(window, on_screen, frames)
    assert c.stopped is not None and c.stopped.reason == "aborted" and c.stopped.n_generated == on_screen
    assert window.views["stop"].shown_generated == on_screen


def test_p_toggles_the_pace_and_presentation_mode_paces(window):
    c, a = window.controller, window.actions
    window.controls.pace.setCurrentIndex(window.controls.pace.findData(0.0))
    a["paced"].trigger()
    assert c.pacer.paced and a["paced"].isChecked() and window.controls.pace.currentData() == c.pacer.tokens_per_s
    a["paced"].trigger()
    assert not c.pacer.paced and not a["paced"].isChecked()
    a["presentation"].setChecked(True)
    QApplication.processEvents()
    assert c.pacer.paced
    a["presentation"].setChecked(False)
    QApplication.processEvents()
    assert not c.pacer.paced
