"""Every view follows the shown step, and a click on a candidate takes it (issue 14), on the real default model.

One window serves the whole module (loading the model is the slow part); each test starts from its own
Prefill, which forgets the steps before it.
"""


import numpy as np
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from gui.state.format import fmt_bytes
from app_driver import idle, prefill, settle, step, wait_until, window_fixture

window = window_fixture("views")


def click_bar(qtbot, view, row):
    """A real left click in the middle of a candidate's row of bars."""
    qtbot.mouseClick(view.bars, Qt.LeftButton, pos=view.bar_picker.widget_pos(QPointF(0.3, row)))


def test_clicking_a_candidate_bar_or_a_draw_segment_takes_it(qtbot, window):
    c = window.controller
    prefill(window, greedy=False, seed=7)
    view = window.views["candidates"]
    assert c.shown().pending and view._can_take()
    cands = c.pending.dist.candidates
    assert view.bar_picker.token_at_pos(view.bar_picker.widget_pos(QPointF(0.3, 2))) == int(cands.ids[2])
    view.bar_picker._on_move(view.bar_picker.widget_pos(QPointF(0.3, 2)))  # hovering says a click takes it
    assert view.bars.cursor().shape() == Qt.PointingHandCursor
    assert view._describe_take(int(cands.ids[2])).startswith("Click to take")
    click_bar(qtbot, view, 2)
    wait_until(lambda: len(c.steps) == 1 and idle(c))
    assert c.steps[0].token.id == int(cands.ids[2]) and c.steps[0].forced
    c.select(None)  # the pending step 2
    settle(window)
    kept = c.pending.dist.kept
    assert len(kept.ids) > 1
    middle = float(kept.cdf[0] + (kept.cdf[1] - kept.cdf[0]) / 2)  # the second segment of the draw strip
    at = view.draw_picker.widget_pos(QPointF(middle, 0.25))
    assert view.draw_picker.token_at_pos(at) == int(kept.ids[1])
    qtbot.mouseClick(view.draw, Qt.LeftButton, pos=at)
    wait_until(lambda: len(c.steps) == 2 and idle(c))
    assert c.steps[1].token.id == int(kept.ids[1]) and c.steps[1].forced
    settle(window)
    assert "You chose this token" in window.views["explain"]._html
    assert "you chose" in window.views["timing"].summary.text()


def test_clicking_a_candidate_on_a_past_step_forks_there(qtbot, window):
    c = window.controller
    prefill(window, greedy=True, seed=7)
    step(window, 3)
    first = [s.token.id for s in c.steps]
    window.history.setValue(2)
    settle(window)
    view = window.views["candidates"]
    assert view.header.text().startswith("Step 2 drew")
    other = int(c.steps[1].dist.candidates.ids[1])  # greedy drew rank 0: rank 1 is another token
    assert other != first[1] and "fork at step 2" in view._describe_take(other)
    click_bar(qtbot, view, 1)
    wait_until(lambda: len(c.steps) == 2 and c.steps[1].token.id == other and idle(c))
    assert c.steps[0].token.id == first[0] and c.steps[1].forced
    assert len(c.history.leaves()) == 2  # the first branch is kept beside the new one
    first_tip = c.history.leaves()[0]
    c.switch(first_tip.id)
    wait_until(lambda: [s.token.id for s in c.steps] == first and idle(c))
    settle(window)
    reread = c.history.reread
    assert reread is not None  # until the next step: Timing and Explain say what the switch cost
    said = (f"re-read {reread.reread_tokens} tokens in one parallel pass" if reread.reread_tokens
            else "still held")
    assert said in window.views["timing"].summary.text() and said in window.views["explain"]._html


def test_backspace_removes_the_last_token_but_not_a_character_of_the_prompt(qtbot, window):
    c = window.controller
    prefill(window, greedy=True, seed=7)
    assert not window.actions["backspace"].isEnabled()  # no steps yet
    step(window, 2)
    assert window.actions["backspace"].isEnabled()
    window.activateWindow()
    prompt = window.controls.prompt
    prompt.setFocus()
    wait_until(lambda: prompt.hasFocus(), 5000)
    prompt.moveCursor(prompt.textCursor().MoveOperation.End)
    text = prompt.toPlainText()
    qtbot.keyClick(prompt, Qt.Key_Backspace)
    assert prompt.toPlainText() == text[:-1]  # the editor kept its key...
    QApplication.processEvents()
    assert len(c.steps) == 2 and idle(c)  # ...and no token was removed
    canvas = window.views["context"].canvas
    canvas.setFocus()
    wait_until(lambda: canvas.hasFocus(), 5000)
    second = c.steps[1]
    qtbot.keyClick(canvas, Qt.Key_Backspace)
    wait_until(lambda: len(c.steps) == 1 and idle(c))
    assert c.pending is not None and c.pending.index == 2
    assert np.allclose(c.pending.dist.candidates.logits, second.dist.candidates.logits)
    settle(window)
    said = window.views["explain"]._html  # a rewind, not a preview of new settings
    assert "Rewound to step 2" in said and "no forward pass" in said
    assert f"cropped</b> to {c.prefill_event.n_tokens + 1} positions" in said


def test_the_history_slider_moves_every_view_to_the_step(qtbot, window):
    c = window.controller
    prefill(window, greedy=True, seed=7)
    step(window, 4)
    window.history.setValue(2)
    settle(window)
    k, step2 = 2, c.steps[1]
    context, kv, stop, timing = (window.views[key] for key in ("context", "kv", "stop", "timing"))
    assert context.canvas.selected_step == k and context.canvas.greyed == 2
    assert "Showing step 2" in context.summary.text()
    # after step k, as Context (k tokens, the later ones greyed) and Explain count: the prompt and k tokens
    assert kv.shown_used_bytes == step2.kv_used_bytes + c.info.kv_bytes_per_token
    assert kv.shown_positions == c.prefill_event.n_tokens + k == step2.context_tokens
    assert f"{fmt_bytes(kv.shown_used_bytes)}</b> used" in kv.formula.text()
    assert stop.shown_generated == k and stop.limit.caption.startswith("2 of ")
    assert "At step 2 of 4" in stop.status.text()
    band = timing.step_chart.bars["selected"]
    assert list(band.x0 + band.width / 2) == [k]
    assert f"Step 2</b>: forward {step2.forward_ms:.1f} ms" in timing.summary.text()
    assert "step 2 of 4" in window.views["explain"]._html
    window.history.setValue(window.history.maximum())  # the newest step again: nothing greyed
    settle(window)
    assert context.canvas.greyed == 0 and stop.shown_generated == 4
    assert kv.shown_positions == c.steps[-1].context_tokens


def test_context_keeps_what_its_chips_show_per_prompt_and_step_and_builds_the_same_chips(window):
    """A Run's frames take each chip's label from what was kept for its prompt and step: the chips and tooltips are
    those of a build from nothing, and a new prompt or language is worded again."""
    c = window.controller
    prefill(window, greedy=True, seed=7)
    step(window, 3)
    context = window.views["context"]
    kept_chips, kept_tips = context._chips(c.prefill_event, None)
    context._prompt_memo, context._step_memo = None, {}
    fresh_chips, fresh_tips = context._chips(c.prefill_event, None)
    assert [chip.looks() for chip in kept_chips] == [chip.looks() for chip in fresh_chips]
    assert [kept_tips[i] for i in kept_tips] == [fresh_tips[i] for i in fresh_tips]
    assert len(context._step_memo) == 3 and context._prompt_memo[0] is c.prefill_event
    prefill(window, greedy=True, seed=7)  # a new prompt's event: its chips are made again
    chips, _ = context._chips(c.prefill_event, None)
    assert context._prompt_memo[0] is c.prefill_event and len(chips) == c.prefill_event.n_tokens


def test_the_views_fill_their_background_in_the_colour_it_had(window):
    """Each view paints its own background (to Qt it is opaque: a frame's changes no longer repaint the docks' style
    sheet backgrounds under them), in the colour of what it sits in: the window looks the same, light and dark."""
    from PySide6.QtGui import QImage

    from gui.views.base import View

    prefill(window, greedy=True, seed=7)
    step(window, 2)
    views = [v for v in window.findChildren(View) if v.isVisible()]
    assert len(views) >= 5 and all(v.autoFillBackground() for v in views)
    try:
        for dark in (False, True):
            window.appearance.set_dark(dark)
            settle(window)
            filled = window.grab().toImage().convertToFormat(QImage.Format_RGB32)
            for v in views:
                v.setAutoFillBackground(False)
            try:
                QApplication.processEvents()
                assert window.grab().toImage().convertToFormat(QImage.Format_RGB32) == filled, dark
            finally:
                for v in views:
                    v.setAutoFillBackground(True)
    finally:
        window.appearance.set_dark(False)
        settle(window)
