"""The Serving dock (issue 39) on the real default model: a scripted 4-request serve shows a row per request, the
block pool with its shared prefix blocks, the numbers; clicking a request moves Candidates and Context to it.

What is checked is what is drawn: the timeline's pixels in each request's colour where it decoded, the grid's
cells in their owners' colours with the shared ones' reference counts, the table's numbers against the state.
"""

import math
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from gui.state.serving import DECODE, PREFILL
from gui.theme import request_colour
from inference.engine import protocol as p
from inference.settings import GenerationSettings, SamplerSettings
from app_driver import FrameLog, idle, settle, wait_until, window_fixture

window = window_fixture("serving")
LESSONS = Path(__file__).resolve().parents[2] / "resources" / "lessons"
SYSTEM = ("You are a friendly teacher. Answer in one or two short sentences, in plain words, without lists, "
          "and stop once the question is answered.")


def requests(max_new=6):
    greedy = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=max_new)
    sampled = GenerationSettings(SamplerSettings(temperature=0.9), seed=11, max_new_tokens=max_new)
    return (p.ServeRequest("What is the capital of France?", True, SYSTEM, greedy, 0),
            p.ServeRequest("Why is the sky blue?", True, SYSTEM, sampled, 0),
            p.ServeRequest("Name three colours.", True, SYSTEM, replace(sampled, seed=12), 2),
            p.ServeRequest("What do bees make?", True, SYSTEM, greedy, 4))


def grid_frame(win):
    """At a redraw: the grid's cells with more than one owner, and the grid's picture then."""
    grid = win.views["serving"].grid
    shared = [c for c in grid.cells if c.refcount > 1]
    return (shared, grid.grab().toImage()) if shared else None


def serve(win, **kw):
    c = win.controller
    log = FrameLog(win, grid_frame)
    try:
        assert win.serve(requests(), **kw)
        wait_until(lambda: c.serving.active and not c.serving.running and idle(c))
        settle(win)
    finally:
        log.close()
    return [f for f in log.frames if f is not None]


def pixel(image, point) -> str:
    return QColor(image.pixel(point)).name()


def check_shared_cells(grid, shared, image) -> None:
    """Each shared block drawn in its first owner's colour (inside its outline, below-left of its count), full."""
    assert shared
    for cell in shared:
        rect = grid.cell_rect(cell.block)
        inside = QPoint(int(rect.left() + max(6, rect.width() * 0.2)), int(rect.bottom() - max(6, rect.height() * 0.2)))
        assert pixel(image, inside) == request_colour(min(cell.owners)), rect
        assert cell.filled == 16  # a shared block is a full prompt block


def test_a_four_request_serve_draws_rows_blocks_and_numbers(window):
    c, view = window.controller, window.views["serving"]
    shared_frames = serve(window, block_tokens=16, token_budget=48)
    s = c.serving
    assert window.docks["serving"].isVisible() and not view.visibleRegion().isEmpty()
    assert len(s.tracks) == 4 and all(t.finished for t in s.tracks)
    # the timeline: each request's row has its decode cells in its colour, prompt chunks before them
    image = view.timeline.grab().toImage()
    for track in s.tracks:
        assert PREFILL in track.phases and DECODE in track.phases
        row = view.timeline.row_rect(track.index)
        widest = max((st for st, ph in enumerate(track.phases) if ph == DECODE), key=lambda st: s.span(st)[1] - s.span(st)[0])
        a, b = s.span(widest)
        x = (view.timeline.x_of(a) + view.timeline.x_of(b)) / 2
        assert pixel(image, QPoint(int(x), int(row.center().y()))) == request_colour(track.index)
    assert s.tracks[3].phases[:4] == ["absent"] * 4  # it arrives at step 4: a tick there, nothing before it
    row = view.timeline.row_rect(3)
    tick = view.timeline.x_of(s.starts_ms[4])
    assert pixel(image, QPoint(round(tick), int(row.top() + 2))) == request_colour(3)
    assert pixel(image, QPoint(int((view.timeline.x_of(0) + tick) / 2), int(row.center().y()))) != request_colour(3)
    # the system prompt's blocks were shared: a live redraw that caught them drew them in their first owner's colour
    # (whether one did depends on the machine's pace; test_clicking_a_step_shows_the_pool_then checks it always)
    for shared, image in shared_frames[:1]:
        check_shared_cells(view.grid, shared, image)
    # the end: every block back in the pool, drawn grey
    assert s.blocks_used == 0 and all(cell.free for cell in view.grid.cells)
    # the numbers: the summary and each request's line, from the state
    text = view.numbers.text()
    assert f"{s.tokens_per_s:,.1f} tokens/s" in text and f"0 of {s.n_blocks}</b> in use" in text
    for track in s.tracks:
        assert view.table.item(track.index, 4).text() == str(track.n_generated) == str(track.done.n_generated)
        assert view.table.item(track.index, 6).text() == f"{track.done.ttft_ms:.1f}" or \
            view.table.item(track.index, 6).text() == f"{track.done.ttft_ms:,.0f}"
        assert view.table.item(track.index, 1).text().startswith("finished")
    assert any(t.done.shared_tokens >= 32 for t in s.tracks)  # two full blocks of the system prompt at least
    # Explain says it with the live numbers, in English and in Chinese
    explain = window.views["explain"]
    text = explain.browser.toPlainText()
    assert "4 requests served at once" in text and f"{s.tokens_per_s:,.1f} tokens/s" in text
    assert f"{s.largest_batch()} requests at once" in text and f"blocks of {s.block_tokens} tokens" in text
    window.set_language("zh_CN")
    QApplication.processEvents()  # Qt posts LanguageChange to the widgets
    try:
        text = explain.browser.toPlainText()
        assert "同时服务 4 个请求" in text and f"每秒 {s.tokens_per_s:,.1f} 个 Token" in text
    finally:
        window.set_language("en")
        QApplication.processEvents()


def test_clicking_a_request_moves_candidates_and_context_to_it(window):
    c, view = window.controller, window.views["serving"]
    if not c.serving.active:
        serve(window)
    s = c.serving
    for index in (2, 0):
        track = s.tracks[index]
        row = view.timeline.row_rect(index)
        QTest.mouseClick(view.timeline, Qt.LeftButton, pos=QPoint(8, int(row.center().y())))
        settle(window)
        assert c.showing_request == index and s.selected == index
        assert [st.token.id for st in c.steps] == [st.token.id for st in track.steps]
        chips = window.views["context"].canvas.chips
        assert [ch.token_id for ch in chips] == [t.id for t in track.prefill.tokens] + [st.token.id for st in track.steps]
        candidates = window.views["candidates"]
        assert candidates._drawn.step is track.steps[-1] and candidates.shown_step == len(track.steps)
        assert not window.actions["reset"].isEnabled() and not window.actions["step"].isEnabled()
        assert f"Request {index} of 4 served together" in window.views["explain"].browser.toPlainText()
        assert window.views["context"].summary.text().startswith(f"Request {index} of 4 served together")
        assert not c.can_move  # no fork of a served request's steps: the engine's session never read its prompt
        assert f"Prefill</b> of request {index}" in window.views["timing"].summary.text()
    # a click at a scheduler step: the grid shows the pool then, the other views that request's step by then
    track = s.tracks[1]
    step = track.step_at[1]
    a, b = s.span(step)
    x = int((view.timeline.x_of(a) + view.timeline.x_of(b)) / 2)
    QTest.mouseClick(view.timeline, Qt.LeftButton, pos=QPoint(x, int(view.timeline.row_rect(1).center().y())))
    settle(window)
    assert s.grid_step == step and c.history.shown_index() == 2
    assert window.views["candidates"]._drawn.step is track.steps[1]
    assert view.grid.cells == s.cells() and any(1 in cell.owners for cell in view.grid.cells)
    # a new prompt leaves the served request: the generation actions are back
    window.controls.prompt.setPlainText("The capital of France is")
    window.actions["prefill"].trigger()
    wait_until(lambda: c.prefilled and idle(c) and c.showing_request is None)
    assert window.actions["step"].isEnabled()


def test_measure_draws_the_throughput_curve_next_to_the_floor(window):
    c, view = window.controller, window.views["serving"]
    wait_until(lambda: idle(c))
    window.show_serving()  # where its Measure button is
    assert c.measure_batch((1, 2), steps=2)
    assert not view.serve_button.isEnabled() or c.busy
    wait_until(lambda: not c.serving.curve.measuring and idle(c))
    settle(window)
    curve = c.serving.curve
    assert [pt.requests for pt in curve.points] == [1, 2] and curve.floor.ms > 0
    x, y = view.measured.xData, view.measured.yData  # as given (the plot draws log10 of y)
    assert list(x) == [0.0, 1.0] and list(y) == [pt.tokens_per_s for pt in curve.points]
    x, y = view.ceiling.xData, view.ceiling.yData  # N tokens per floor step
    assert list(x) == [math.log2(n) for n in (1, 2)] and y[1] == 2 * 1000 / curve.floor.ms
    assert f"{curve.points[-1].tokens_per_s:,.0f} tokens/s" in view.curve_note.text()


def test_the_batching_lesson_plays_its_serving_actions_in_the_app(window):
    """resources/lessons/batching.json: four requests (two arrive later), one added mid-way, a pool of 10 blocks
    too small for all: the dock shows the waits, the shared prefix blocks, and request 1 in the other views."""
    c, view = window.controller, window.views["serving"]
    wait_until(lambda: idle(c))
    log = FrameLog(window, grid_frame)
    try:
        assert window.play_script(str(LESSONS / "batching.json"))
        wait_until(lambda: not window.script_player.playing and idle(c), timeout_ms=300_000)
        settle(window)
    finally:
        log.close()
    s = c.serving
    assert len(s.tracks) == 5 and s.done and s.n_blocks == 10
    assert s.tracks[4].arrive_at_step == 6  # added after 2 + 2 + 2 scheduler steps
    waited = [t for t in s.tracks if "waiting" in t.phases]
    assert waited and all(t.done.admitted_at_step > t.done.arrived_at_step for t in waited)  # the pool was full
    assert any(f is not None and max(cell.refcount for cell in f[0]) >= 2 for f in log.frames)
    assert c.showing_request == 1 and [st.token.id for st in c.steps] == [st.token.id for st in s.tracks[1].steps]
    assert [ch.token_id for ch in window.views["context"].canvas.chips][-1] == s.tracks[1].steps[-1].token.id
    assert view.table.rowCount() == 5 and all(view.table.item(r, 1).text().startswith("finished") for r in range(5))


def test_escape_ends_a_serve_between_steps_and_continue_goes_on_to_the_end(window):
    c, view = window.controller, window.views["serving"]
    wait_until(lambda: idle(c))
    assert window.serve(requests(max_new=40), token_budget=16)
    wait_until(lambda: c.serving.n_steps >= 3)
    assert window.actions["stop"].isEnabled()
    window.actions["stop"].trigger()
    wait_until(lambda: idle(c) and not c.serving.running)
    settle(window)
    s = c.serving
    assert not s.done and view.continue_button.isEnabled() and "paused" in view.numbers.text()
    stopped_at = s.n_steps
    QTest.mouseClick(view.continue_button, Qt.LeftButton)
    wait_until(lambda: s.done and idle(c))
    settle(window)
    assert s.n_steps > stopped_at and not view.continue_button.isEnabled()
    assert [sch.step for sch in s.schedules] == list(range(s.n_steps))  # one serve, no step lost or doubled
    assert all(t.n_generated == t.done.n_generated for t in s.tracks)



def test_clicking_a_step_shows_the_pool_then_with_its_shared_blocks(window):
    """A click on a request's row at a scheduler step shows the block pool as it was at that step: at the first step
    with shared prefix blocks, the grid draws them (their owners' colour, their count) whatever the live redraws caught."""
    c, view = window.controller, window.views["serving"]
    if not c.serving.active:
        serve(window, block_tokens=16, token_budget=48)
    s = c.serving
    step = next(i for i, report in enumerate(s.block_reports) if report.shared)
    row = next(i for i, blocks in s.block_reports[step].per_request.items() if blocks)
    a, b = s.span(step)
    at = QPoint(int((view.timeline.x_of(a) + view.timeline.x_of(b)) / 2), int(view.timeline.row_rect(row).center().y()))
    assert view.timeline.step_at(at.x()) == step
    QTest.mouseClick(view.timeline, Qt.LeftButton, Qt.NoModifier, at)
    wait_until(lambda: s.grid_step == step and idle(c))
    settle(window)
    assert s.shown_blocks is s.block_reports[step]
    shared = [cell for cell in view.grid.cells if cell.refcount > 1]
    assert len(shared) == s.block_reports[step].shared
    check_shared_cells(view.grid, shared, view.grid.grab().toImage())
