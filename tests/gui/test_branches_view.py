"""The Branches and Compare docks, driven as a person would: step, fork at a past step, click back.

On a tiny random Llama written here (a folder the app loads like any other): a fork needs only a
session, not a good model, and the tiny one loads and steps in a blink on a shared machine."""

import math

import pytest
from PySide6.QtCore import QSettings, Qt

from gui.state.compare import chosen_p
from gui.main_window import MainWindow
from gui.theme import Appearance
from gui.views.branches_view import assign_rows, branch_tip, format_p
from app_driver import idle, prefill, settle, step
from tiny import make_hf_model, save_hf_model

WAIT = 60_000  # ms: generous, the machines are shared


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("tiny") / "llama")


@pytest.fixture()
def window(qtbot, tiny_folder, tmp_path):
    settings = QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings, appearance=Appearance(), model=str(tiny_folder), device="cpu",
                     dtype="float32")
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitUntil(lambda: win.controller.info is not None, timeout=WAIT)
    # Only the docks under test are shown: the others are other tests' subjects, and hidden they cost
    # nothing on a shared machine (the toolbar's history slider and the Controls still work).
    for key, dock in win.docks.items():
        dock.setVisible(key in ("branches", "compare"))
    yield win
    win.close()
    assert win.controller.thread.isFinished()


def ids(win):
    return [s.token.id for s in win.controller.steps]


def fork_at(qtbot, win, index):
    """Scrub to step `index` and take its best candidate other than the one taken there."""
    c = win.controller
    settle(win)  # the slider has followed the last step: moving it is a change it reports
    win.history.setValue(index)
    qtbot.waitUntil(lambda: c.shown() is not None and c.shown().index == index and not c.shown().pending,
                    timeout=WAIT)
    step = c.steps[index - 1]
    other = next(int(i) for i in step.dist.candidates.ids if int(i) != step.token.id)
    c.take(other)
    qtbot.waitUntil(lambda: len(c.steps) == index and c.steps[-1].token.id == other and idle(c), timeout=WAIT)
    return other


def show_dock(qtbot, win, key):
    win.docks[key].raise_()
    view = win.views[key]
    qtbot.waitUntil(lambda: not view.visibleRegion().isEmpty(), timeout=WAIT)
    settle(win)
    return view


def test_a_fork_shows_as_a_second_row_and_a_click_switches_back(qtbot, window):
    c = window.controller
    prefill(window)
    step(window, 3)
    first = ids(window)
    other = fork_at(qtbot, window, 2)
    assert ids(window) == [first[0], other]
    view = show_dock(qtbot, window, "branches")
    canvas = view.canvas
    qtbot.waitUntil(lambda: len(canvas.placed) == 1 + 3 + 1, timeout=WAIT)  # the prompt, 3 steps, the fork
    rows = {}
    for placed in canvas.placed[1:]:
        rows.setdefault(placed.row, []).append(placed)
    assert sorted(rows) == [0, 1]
    assert [p.node.token_id for p in rows[0]] == first and [p.node.depth for p in rows[0]] == [1, 2, 3]
    fork = rows[1][0]
    assert fork.node.token_id == other and fork.node.depth == 2 and fork.forced
    assert fork.p_text == format_p(chosen_p(fork.node.step))  # forced: the model's p raw on its edge
    assert rows[0][1].p_text == format_p(chosen_p(rows[0][1].node.step, "p_final"))  # drawn: p final
    # the fork's node is one column right of its parent, in the same column as the step it replaces
    assert fork.rect.left() == rows[0][1].rect.left() and fork.rect.top() > rows[0][1].rect.bottom()
    assert canvas.current == fork.node.id and fork.node.id in canvas.path and rows[0][1].node.id not in canvas.path

    old_second = rows[0][1]  # step 2 of the first branch: a click goes to that branch, at that step
    qtbot.mouseClick(canvas, Qt.LeftButton, pos=old_second.rect.center().toPoint())
    qtbot.waitUntil(lambda: ids(window) == first and idle(c), timeout=WAIT)
    qtbot.waitUntil(lambda: not c.shown().pending and c.shown().index == 2, timeout=WAIT)
    settle(window)
    assert canvas.current == rows[0][2].node.id and canvas.shown == old_second.node.id
    # a token on the current path only shows its step: no switch, the branch stays whole
    qtbot.mouseClick(canvas, Qt.LeftButton, pos=rows[0][0].rect.center().toPoint())
    qtbot.waitUntil(lambda: c.shown().index == 1 and canvas.shown == rows[0][0].node.id, timeout=WAIT)
    assert ids(window) == first and canvas.current == rows[0][2].node.id


def test_compare_shows_both_texts_and_log_probs(qtbot, window):
    c = window.controller
    prefill(window)
    step(window, 3)
    first_steps = list(c.steps)
    view = show_dock(qtbot, window, "compare")
    qtbot.waitUntil(lambda: view.results["A"] is not None and view.results["A"].n_steps == 3, timeout=WAIT)
    assert view.results["B"] is None and "Only one branch" in view.parting.text()
    fork_at(qtbot, window, 2)
    second_steps = list(c.steps)
    qtbot.waitUntil(lambda: view.results["B"] is not None, timeout=WAIT)
    # A: the current branch (the fork), B: the other tip
    a, b = view.results["A"], view.results["B"]
    expected_a = sum(math.log(chosen_p(s)) for s in second_steps)
    expected_b = sum(math.log(chosen_p(s)) for s in first_steps)
    assert a.log_prob == pytest.approx(expected_a) and b.log_prob == pytest.approx(expected_b)
    assert b.perplexity == pytest.approx(math.exp(-expected_b / 3))
    assert view.texts["A"].toPlainText() == "".join(s.token.text for s in second_steps)
    assert view.texts["B"].toPlainText() == "".join(s.token.text for s in first_steps)
    assert f"{expected_b:.2f}".replace("-", "−") in view.stats["B"].text()
    assert "step 2" in view.parting.text()
    assert list(view.curves["B"].getData()[1]) == pytest.approx([s.dist.entropy for s in first_steps])
    # A follows the current branch as it grows; B stays on the other tip
    step(window)
    qtbot.waitUntil(lambda: view.results["A"].n_steps == 3, timeout=WAIT)
    assert view.results["B"].text == "".join(s.token.text for s in first_steps)
    # choosing the same branch on both sides says so
    view.combos["B"].setCurrentIndex(view.combos["A"].currentIndex())
    view.combos["B"].activated.emit(view.combos["A"].currentIndex())
    assert "same branch" in view.parting.text()


class FakeNode:
    def __init__(self, node_id, children=()):
        self.id, self.children = node_id, list(children)


def test_rows_continue_first_children_and_forks_go_below_earlier_subtrees():
    # root - 1 - 2 - 3        row 0
    #          \    \ 5       row 1 (forked at 2, allocated first: it lies within 2's subtree)
    #           4 - 6         row 2 (forked at 1)
    n5, n3 = FakeNode(5), FakeNode(3)
    n2 = FakeNode(2, [n3, n5])
    n4 = FakeNode(4, [FakeNode(6)])
    root = FakeNode(0, [FakeNode(1, [n2, n4])])
    rows = {node.id: row for node, row in assign_rows(root)}
    assert rows == {0: 0, 1: 0, 2: 0, 3: 0, 5: 1, 4: 2, 6: 2}
    assert branch_tip(n4).id == 6 and branch_tip(root).id == 3


def test_format_p_keeps_four_characters():
    assert format_p(0.7725) == "0.77" and format_p(1.0) == "1.00" and format_p(0.003) == "3e-3"


def test_a_dock_tabbed_away_draws_only_when_raised(qtbot, window):
    """Qt keeps a dock tabbed behind another 'visible' (off-screen): the Branches view skips its redraws
    there and catches up when its tab is raised."""
    window.docks["context"].show()  # back to its tab, in front of Branches
    window.docks["context"].raise_()
    view = window.views["branches"]
    qtbot.waitUntil(lambda: view.visibleRegion().isEmpty(), timeout=WAIT)
    prefill(window)
    step(window, 2)
    settle(window)
    assert view.isVisible() and view.tabbed_away() and not view.canvas.placed
    window.docks["branches"].raise_()
    qtbot.waitUntil(lambda: len(view.canvas.placed) == 3, timeout=WAIT)
    assert "1 branch</b> · 2 tokens · current: row 1, 2 steps" in view.summary.text()


def test_after_a_rewind_compare_offers_the_current_path_beside_the_tips(qtbot, window):
    c = window.controller
    prefill(window)
    step(window, 3)
    view = show_dock(qtbot, window, "compare")
    c.backspace()  # the third token leaves the path, not the tree
    qtbot.waitUntil(lambda: len(c.steps) == 2 and idle(c), timeout=WAIT)
    qtbot.waitUntil(lambda: view.results["A"] is not None and view.results["A"].n_steps == 2, timeout=WAIT)
    assert view.results["B"].n_steps == 3
    assert [view.combos["A"].itemText(i).split(":")[0] for i in range(view.combos["A"].count())] == ["tip 1",
                                                                                                      "current"]
    assert "Branch B continues branch A after step 2" in view.parting.text()


def test_compare_after_a_reset_and_over_different_lengths(qtbot, window):
    """Issue 40 item 9: after Reset Compare said "Branch B continues branch A after step 0" beside the old
    branch's entropy line; its texts opened on the shared beginning; log p of branches of different lengths
    was compared without a word."""
    c = window.controller
    prefill(window, max_new=64)
    step(window, 12)
    first = list(c.steps)
    view = show_dock(qtbot, window, "compare")
    fork_at(qtbot, window, 11)
    step(window, 3)  # A: 11 + 3 = 14 steps, B: the first branch's 12
    settle(window)
    a, b = list(c.steps), first
    text_a, text_b = view.texts["A"].toPlainText(), view.texts["B"].toPlainText()
    # the texts open where they part: the shared 10 steps cut to their last 8, the rest whole
    tail = "".join(s.token.text for s in a[2:10])
    assert text_a.startswith("[2 shared steps] …" + tail) and text_a.endswith("".join(s.token.text for s in a[10:]))
    assert text_b == "[2 shared steps] …" + tail + "".join(s.token.text for s in b[10:])
    said = view.parting.text()
    assert "step 11" in said and "A has 14 steps, B 12" in said and "over their first 12 steps" in said
    lp_a = sum(math.log(chosen_p(s)) for s in a[:12])
    assert f"log p A {lp_a:.2f}".replace("-", "−") in said
    assert "over 14 steps" in view.stats["A"].text() and "over 12 steps" in view.stats["B"].text()
    window.generation.reset()
    qtbot.waitUntil(lambda: not c.steps and idle(c), timeout=WAIT)
    settle(window)
    assert "continues" not in view.parting.text() and "back at the prompt" in view.parting.text()
    assert view.combos["A"].currentText() == "current: the prompt only (0 steps)"
    assert all(len(view.curves[side].getData()[0] if view.curves[side].getData()[0] is not None else [])
               == 0 for side in ("A", "B")) and not view.part_line.isVisible()
    assert view.stats["A"].text().startswith("no steps yet")
