"""Timing, issue 15 parts 3-5: the KV cache toggle and both modes' series, the timeline to scale, the prefill's
progress bar and its measured estimate. One window on the real default model serves the module."""


import numpy as np
import pytest

from gui.state.timing_data import CACHED, NO_CACHE, PREFILL, RECOMPUTE, REREAD, SAMPLE, VERIFY, timeline
from inference.events import PrefillDone, Rewound, StepDone, Switched, Token, Verified
from app_driver import idle, prefill, settle, wait_until, window_fixture

window = window_fixture("timeline")


STEPS = 8
LONG = 40  # steps without the cache: enough growth of the context to stand above the timing noise


def run(win, n):
    c = win.controller
    c.run(n)
    wait_until(lambda: len(c.steps) >= n and idle(c))
    settle(win)


def test_the_toggle_runs_without_the_cache_and_timing_shows_both_series(window):
    c, timing = window.controller, window.views["timing"]
    prefill(window, "Count with me: one, two, three, four, five, six, seven, eight, nine, ten,", greedy=True,
            speculate=0)
    run(window, STEPS)
    assert all(s.kv_used_bytes > 0 for s in c.steps)
    assert not timing.series.shown  # one mode only: no comparison yet
    window.generation.reset()
    wait_until(lambda: not c.steps and idle(c))
    window.actions["kv_cache"].trigger()  # off, between steps
    try:
        wait_until(lambda: not c.kv_cache)
        assert not timing.kv_cache.isChecked()
        run(window, LONG)
        assert all(s.kv_used_bytes == 0 for s in c.steps)  # the engine decoded without its cache
        assert timing.series.shown
        (x_on, y_on), (x_off, y_off) = ((line.x, line.y) for line in (timing.step_chart.series[key]
                                                                       for key in ("cache on", "cache off")))
        assert len(x_on) == STEPS - 1 and len(x_off) == LONG - 1  # step 1 draws from the prefill's logits
        # Which series is which, by position (no timing assertion: the machines are shared and noisy; the
        # cost of each mode is measured by benchmarks/bench_cache.py)
        assert list(x_off) == sorted(x_off) and min(x_off) <= min(x_on)
        assert "cache off" in timing.summary.text() and "mult-adds" in timing.summary.text()
        assert "re-read all" in window.views["explain"]._html or \
            "re-read all" in window.views["explain"].browser.toPlainText()
        kinds = [b.kind for b in timing.timeline.blocks]  # since the Reset: the prefill, then this run's passes
        assert kinds == [PREFILL, SAMPLE] + [NO_CACHE] * (LONG - 1)
        settle(window)
        assert "KV cache off" in window.views["kv"].formula.text()  # the KV view no longer claims what it saves
    finally:
        window.actions["kv_cache"].trigger()  # back on for the other tests, whatever happened
        wait_until(lambda: c.kv_cache)


def test_the_timeline_has_one_prefill_block_and_one_block_per_step_at_least_a_pixel_wide(window):
    c, timing = window.controller, window.views["timing"]
    prefill(window, greedy=True, speculate=0)
    run(window, STEPS)
    blocks = timing.timeline.blocks
    assert [b.kind for b in blocks] == [PREFILL, SAMPLE] + [CACHED] * (STEPS - 1)
    assert [b.step for b in blocks[1:]] == list(c.steps)
    assert blocks[0].ms == pytest.approx(c.prefill_event.ms)
    total = blocks[-1].start_ms + blocks[-1].ms
    px = timing.timeline.ms_per_px(total)
    widths = np.concatenate([bars.width for key, bars in timing.timeline.chart.bars.items() if key != "shown"])
    assert len(widths) == len(blocks) and np.all(widths >= px * 0.999)
    # the per-step bars: none thinner than 2 px (they touch instead)
    chart = timing.step_chart
    bar = chart.bars["cached"].width
    (x_low, x_high), (_, top) = chart.x_range, chart.y_range
    assert len(bar) == STEPS - 1 and np.all(bar * chart.data_size().width() / (x_high - x_low) >= 1.0)
    decode = [s.forward_ms + s.sample_ms for s in c.steps[1:]]
    assert max(decode) <= top <= max(decode) * 1.6  # the y axis just above the data


def test_the_prefill_progress_bar_shows_for_a_long_prefill_and_hides_after(window):
    timing = window.views["timing"]
    assert not timing.progress.isVisible()
    window.controller.progress.emit("prefill", 512, 1500)
    assert timing.progress.isVisible() and timing.progress.value() == 512 and timing.progress.maximum() == 1500
    window.controller.progress.emit("prefill", 1500, 1500)
    assert not timing.progress.isVisible()


def test_the_estimate_says_n_decode_steps_from_the_measured_median(window):
    c, timing = window.controller, window.views["timing"]
    if len(c.steps) < 2 or not c.kv_cache:
        prefill(window, greedy=True, speculate=0)
        run(window, STEPS)
    text = timing.summary.text()
    n = c.prefill_event.n_tokens
    assert f"{n} positions in one pass" in text
    assert f"{n} × one decode step would have taken ≈" in text and "estimate" in text
    assert f"{n * timing.decode_ms:,.0f} ms" in text


def _step(index, forward, *, verified_by=0, kv=10, node=0):
    return StepDone(index=index, position=4 + index, token=Token(index, f" t{index}", f" t{index}"),
                    forward_ms=forward, sample_ms=0.5, kv_used_bytes=kv, kv_allocated_bytes=kv,
                    context_tokens=5 + index, chosen_rank=0, random_u=None, dist=None, seed=0,
                    verified_by=verified_by, node=node)


def test_a_verify_pass_is_one_block_and_a_branch_reread_is_drawn_as_a_reread():
    prefill_event = PrefillDone(tokens=(), n_tokens=5, ms=100.0, kv_used_bytes=10, kv_allocated_bytes=10,
                                prompt_text="")
    verified = Verified(index=2, drafted=(Token(2, "a", "a"), Token(3, "b", "b")), ngram=(1,), accepted=2,
                        emitted=3, positions=3, forward_ms=40.0)
    switched = Switched(node=1, to_step=4, reread_tokens=3, ms=60.0, kv_used_bytes=10, kv_allocated_bytes=10,
                        tokens=(1, 2, 3, 4))
    log = [prefill_event, _step(1, 100.0), verified, _step(2, 40.0, verified_by=2), _step(3, 0.0, verified_by=2),
           _step(4, 0.0, verified_by=2), switched, _step(5, 60.0), _step(6, 20.0), _step(7, 90.0, kv=0)]
    blocks = timeline(log)
    kinds = [b.kind for b in blocks]
    assert kinds == [PREFILL, SAMPLE, VERIFY, SAMPLE, SAMPLE, SAMPLE, REREAD, SAMPLE, CACHED, NO_CACHE]
    assert blocks[2].ms == 40.0 and blocks[6].ms == 60.0 and blocks[6].label == "re-read 3"
    assert blocks[-1].positions == 11  # a step without the cache re-read every position before it
    assert all(b.start_ms == pytest.approx(a.start_ms + a.ms) for a, b in zip(blocks, blocks[1:]))


def test_after_a_reset_the_timeline_is_the_prefill_and_the_passes_since():
    """Issue 40 item 9: a Reset went back to the prompt, but the old branch's passes (seconds of them) stayed on
    the timeline before the new ones. The old steps stay in the log (the cache series still compare both runs)."""
    prefill_event = PrefillDone(tokens=(), n_tokens=5, ms=100.0, kv_used_bytes=10, kv_allocated_bytes=10,
                                prompt_text="")
    reset = Rewound(to_step=1, node=0, kv_used_bytes=10, kv_allocated_bytes=10, seed=7, reset=True)
    rewind = Rewound(to_step=2, node=1, kv_used_bytes=10, kv_allocated_bytes=10, seed=7, forward_ms=30.0)
    old = [_step(i, 500.0, node=i) for i in range(1, 5)]
    new = [_step(1, 100.0, node=1), _step(2, 20.0, node=5), _step(3, 25.0, node=6)]
    log = [prefill_event, *old, reset, *new]
    blocks = timeline(log)
    assert [b.kind for b in blocks] == [PREFILL, SAMPLE, CACHED, CACHED]
    assert [b.step for b in blocks[1:]] == new and blocks[1].start_ms == 100.0
    assert blocks[-1].start_ms + blocks[-1].ms == pytest.approx(100.0 + 0.5 + 20.5 + 25.5)
    assert [b.kind for b in timeline([*log, rewind, _step(2, 21.0, node=7)])][-2:] == [RECOMPUTE, SAMPLE]
    assert len(timeline(log[:5])) == 5  # before the reset: the old branch's passes


def test_the_timeline_read_as_the_log_grows_is_the_one_read_at_once():
    """Timing reads the log at every frame and only its new events are folded in (timing_data.Folded): at each
    length, as a paced playback's prefix, after a shorter prefix and for another log, the blocks and the fresh
    steps are what a fold of the whole log gives."""
    from gui.state.timing_data import Folded, _fresh_step, _Fresh, _timeline_step, _Timeline, fresh

    def at_once(log):
        state = _Timeline()
        for event in log:
            _timeline_step(state, event)
        return state.blocks

    prefill_event = PrefillDone(tokens=(), n_tokens=5, ms=100.0, kv_used_bytes=10, kv_allocated_bytes=10,
                                prompt_text="")
    verified = Verified(index=2, drafted=(Token(2, "a", "a"),), ngram=(1,), accepted=1, emitted=2, positions=2,
                        forward_ms=40.0)
    switched = Switched(node=1, to_step=2, reread_tokens=3, ms=60.0, kv_used_bytes=10, kv_allocated_bytes=10,
                        tokens=(1, 2, 3))
    log = [prefill_event, _step(1, 100.0), verified, _step(2, 40.0, verified_by=2), _step(3, 0.0, verified_by=2),
           switched, _step(4, 60.0), _step(5, 20.0), _step(6, 90.0, kv=0), _step(7, 30.0)]
    for n in [*range(len(log) + 1), 3, len(log), 5]:  # growing, then a shorter prefix, then all, then shorter
        assert timeline(log[:n]) == at_once(log[:n])
        steps = [e for e in log[:n] if isinstance(e, StepDone)]
        assert [s for s, _ in fresh(log[:n])] == steps
    other = [PrefillDone(tokens=(), n_tokens=3, ms=50.0, kv_used_bytes=10, kv_allocated_bytes=10, prompt_text=""),
             _step(1, 10.0), _step(2, 11.0)]  # a new prompt: a new log
    assert timeline(other) == at_once(other) and len(timeline(other)) == 3
    folds = []
    counting = Folded(_Fresh, lambda state, event: (folds.append(event), _fresh_step(state, event)))
    counting(log[:4])
    counting(log)
    assert folds == log  # each event folded once while the log grew


def test_the_default_layout_has_no_stale_dock_tab_bars(window):
    """Qt made two tab bars for Stop | Compare and Context | Branches and left the first one visible."""
    from PySide6.QtWidgets import QApplication, QTabBar

    window.reset_layout()
    settle(window)
    # the window's layout pass that shows the tab bars in use comes after its docks' own (posted by them as they
    # are laid out): one more turn of the event loop (pyqtgraph plots used to post theirs earlier)
    QApplication.processEvents()
    shown = [tuple(bar.tabText(i) for i in range(bar.count())) for bar in window.findChildren(QTabBar)
             if bar.parent() is window and bar.isVisible() and bar.geometry().bottom() >= 0]
    assert sorted(shown) == [("Context", "Branches"), ("Stop", "Compare")]


def _verify_log(step_ms):
    """A prefill, two plain cached steps of 20 and 30 ms, then a pass over 4 positions of 50 ms."""
    prefill_event = PrefillDone(tokens=(), n_tokens=5, ms=100.0, kv_used_bytes=10, kv_allocated_bytes=10,
                                prompt_text="")
    verified = Verified(index=4, drafted=(Token(2, "a", "a"), Token(3, "b", "b"), Token(4, "c", "c")), ngram=(1,),
                        accepted=3, emitted=4, positions=4, forward_ms=50.0, draft_max=8,
                        acceptance=(0.31,) * 8, expected_tokens=2.4, expected_cost=1.6, step_ms=step_ms)
    return [prefill_event, _step(1, 100.0), _step(2, 20.0), _step(3, 30.0), verified,
            *[_step(i, 50.0 if i == 4 else 0.0, verified_by=4) for i in range(4, 8)]], verified


@pytest.mark.parametrize("step_ms, cost", [(None, 2.0), (12.5, 4.0)])
def test_a_verify_block_is_labelled_with_its_positions_and_its_cost_in_steps(qapp, step_ms, cost):
    """Issue 38 item 3: the pass's M and its ms over one plain step's, the engine's measured step when it sent one,
    else the median of the plain cached steps the log holds (25 ms here)."""
    from gui.theme import Appearance
    from gui.widgets.timeline import Timeline

    log, verified = _verify_log(step_ms)
    block = next(b for b in timeline(log) if b.kind == VERIFY)
    assert block.positions == 4 and block.cost_steps == pytest.approx(cost)
    strip = Timeline(Appearance())
    strip.chart.resize(3000, 80)  # room for the words whole
    strip.chart.show()
    qapp.processEvents()
    strip.update(log)
    words = [label.text for label in strip.chart.labels]
    assert f"verify M=4: {cost:.1f}× a step" in words
    no_step = [e for e in log if not (isinstance(e, StepDone) and e.index in (2, 3))]  # no plain step measured
    if step_ms is None:
        assert next(b for b in timeline(no_step) if b.kind == VERIFY).cost_steps is None
        strip.update(no_step)
        assert "verify M=4" in [label.text for label in strip.chart.labels]
    strip.chart.close()


@pytest.mark.parametrize("step_ms, cost", [(None, "2.0"), (12.5, "4.0")])
def test_explain_words_a_verify_pass_with_its_measured_cost_and_why_this_length(qapp, step_ms, cost):
    from types import SimpleNamespace

    from gui.state.speculation import choice_text
    from gui.views.explain_view import ExplainView

    log, verified = _verify_log(step_ms)
    view = SimpleNamespace(intents=SimpleNamespace(history=SimpleNamespace(log=log)))
    numbers = {"drafted": 3, "positions": 4, "ms": "50", "emitted": 4, "emitted_s": "s"}
    words = ExplainView._verify_cost(view, verified, numbers)
    assert f"checking 3 draft tokens cost {cost} steps (50 ms, where one plain step takes " \
           f"{50 / float(cost):.1f} ms here)" in words
    assert "3 of at most 8, because recent drafts had their first token kept 31% of the time and a 4-position " \
           "pass was expected to cost 1.6 steps for 2.4 tokens" in words
    assert choice_text(verified) == "drafted 3 of max 8: acceptance 0.31, a 4-position pass costs 1.6 steps"
    unmeasured = SimpleNamespace(intents=SimpleNamespace(history=SimpleNamespace(log=log[:2] + log[4:])))
    assert ExplainView._verify_cost(unmeasured, verified, numbers) == ("" if step_ms is None else words)
