"""What every view DRAWS is the shown step, at every frame of a paced and of a fast Run (issue 40, item 2), on
the real default model.

test_views_in_step.py checks the step each view says it drew (`shown_step`); here each frame reads the plot
items, labels and gauges themselves: the draw strip's u (its line and its words), the KV cache's bars and their
bytes, Timing's bars (the newest one's step and height, the shown one's band) and the last block of its timeline, the Stop gauges, the logit lens's marked column. A view
that drew one of them from another report than the shown step (the newest, or the one before) fails here.

One window serves the module; each test starts from its own Prefill.
"""

import numpy as np
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from gui.state.format import display, fmt_bytes
from app_driver import idle, prefill, run_reading, settle, wait_until, window_fixture

window = window_fixture("drawn")


def drawn(win) -> dict:
    """What the views draw now, read from their items (not from what they say they drew)."""
    cand, kv, timing, stop = (win.views[k] for k in ("candidates", "kv", "timing", "stop"))
    blocks = [b for b in timing.timeline.blocks if b.step is not None]
    draws, band = timing.step_chart.bars["sample"], timing.step_chart.bars["selected"]  # a draw's bar per step
    return {
        "header": cand.header.text(),
        "u_line": cand.draw.markers[0].x if cand.draw.markers else None,
        "u_label": cand.draw.labels[0].text if cand.draw.labels else "",  # the u label first
        "draw_caption": cand.draw_caption.text(),
        "kv_label": kv.compare.labels[1].text,
        "kv_bar_bytes": 2 * float(np.sum(kv.layers.bars["K"].height)) * 1e3,  # each layer's K + V, KB
        "kv_text": kv.formula.text(),
        "kv_curve_end": float(kv.growth.series["used"].x[-1]) if len(kv.growth.series["used"].x) else None,
        "timing_bars": len(draws.x0),
        # the last bar's step (its centre), its forward pass (where its draw starts) and its draw, in ms
        "timing_last_bar": tuple(float(v) for v in (draws.x0[-1] + draws.width[-1] / 2, draws.y0[-1],
                                                    draws.height[-1])) if len(draws.x0) else None,
        "timing_top": timing.step_chart.y_range[1],
        "timing_selected": list(band.x0 + band.width / 2),
        "timeline_last": blocks[-1].step.index if blocks else None,
        "timeline_outlined": outlined(timing.timeline),
        "stop_limit": stop.limit.caption,
        "stop_context": stop.gauge.parts,
        "stop_eos": len(stop.eos_plot.series["eos"].x) if "eos" in stop.eos_plot.series else 0,
    }


def outlined(timeline) -> int | None:
    """The step of the timeline block drawn outlined (the shown step's pass)."""
    shown = timeline.chart.bars["shown"]
    x0, width = shown.x0, shown.width
    if not len(x0):
        return None
    centre = float(x0[0]) + float(width[0]) / 2
    at = [b.step.index for b, w in zip(timeline.blocks, timeline.widths)
          if b.step is not None and np.isclose(b.start_ms + w / 2, centre)]
    return at[-1] if at else None


class Paints(QObject):
    """Which of a frame's labels and plots the window painted in which of its paints (UpdateRequest): what
    reaches the screen together. Frames are counted by the redraws (frame k: after the k-th redraw)."""

    def __init__(self, win):
        super().__init__()
        cand, kv, timing = (win.views[k] for k in ("candidates", "kv", "timing"))
        self.win, self.frame, self.paint = win, 0, 0
        self.watched = {cand.header: "header", cand.draw: "draw strip", kv.formula: "KV text",
                        kv.layers: "KV bars", timing.step_chart: "Timing bars"}
        self.painted: list[tuple[int, int, str]] = []  # (frame, paint, what)
        win.controller.redraw.connect(self._redrawn)
        QApplication.instance().installEventFilter(self)

    def _redrawn(self) -> None:
        self.frame += 1

    def close(self) -> None:
        self.win.controller.redraw.disconnect(self._redrawn)
        QApplication.instance().removeEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.UpdateRequest and obj is self.win:
            self.paint += 1
        elif event.type() == QEvent.Paint and obj in self.watched:
            self.painted.append((self.frame, self.paint, self.watched[obj]))
        return False

    def first_paints(self) -> dict[int, set[str]]:
        """For every frame, what its first paint drew."""
        first: dict[int, int] = {}
        out: dict[int, set[str]] = {}
        for frame, paint, what in self.painted:
            if first.setdefault(frame, paint) == paint:
                out.setdefault(frame, set()).add(what)
        return out


def shown_and_drawn(win) -> tuple:
    return win.controller.history.shown(), drawn(win)


def run_and_read(win, pace: float, paints: list | None = None) -> list:
    """Every frame's shown step and what is drawn; and (into `paints`) what each frame's first paint put on screen."""
    watch = Paints(win)
    try:
        frames = run_reading(win, pace, shown_and_drawn)
    finally:
        watch.close()
    if paints is not None:
        paints.append(watch)
    return frames


def assert_drawn_is_shown(win, shown, d, newest: bool = True) -> None:
    """Every item drawn is of the shown step `shown` (a drawn step); `newest`: no step after it is shown (a
    Run's frames), else the later ones are drawn too, the shown one marked."""
    c = win.controller
    k, s = shown.index, shown.step
    info, n_prompt = c.info, c.prefill_event.n_tokens
    where = (k, d)
    assert d["header"].startswith(f"Step {k} drew"), where
    u = f"u = {s.random_u:.4f}"
    assert d["u_line"] == s.random_u and d["u_label"] == f"{u} → {display(s.token.piece)}", where
    assert u in d["draw_caption"], where
    # the cache as it stands after step k: the prompt and k tokens (one convention in every view)
    held = (n_prompt + k) * info.kv_bytes_per_token
    assert d["kv_label"] == fmt_bytes(held) and np.isclose(d["kv_bar_bytes"], held), where
    assert f"{n_prompt + k:,} tokens → <b>{fmt_bytes(held)}</b>" in d["kv_text"], where
    assert d["kv_curve_end"] == n_prompt + k, where
    assert d["timing_selected"] == [k] and d["timeline_outlined"] == k, where
    if newest:
        assert d["timing_bars"] == k and d["timeline_last"] == k, where
        forward = 0.0 if s.verified_by else min(s.forward_ms, 0.97 * d["timing_top"])  # a verify pass: its block
        assert np.allclose(d["timing_last_bar"], (k, forward, s.sample_ms)), where
    assert d["stop_limit"].startswith(f"{k} of ") and d["stop_context"] == ((n_prompt, "raw"), (k, "kept")), where
    assert d["stop_eos"] == k, where


def assert_one_paint_per_frame(frames, paints: Paints, at_least: int) -> None:
    """A frame that changed the step's words (Candidates' heading) put its plots on screen in the same paint:
    no moment shows the heading at step k above a draw strip, KV bars or Timing bars still at step k - 1."""
    checked = 0
    for frame, what in paints.first_paints().items():
        shown = frames[frame - 1][0] if frame else None
        if "header" not in what or shown is None or shown.step is None:
            continue
        assert {"draw strip", "KV text", "KV bars", "Timing bars"} <= what, (shown.index, what)
        checked += 1
    assert checked >= at_least


def check_frames(win, frames, n_steps: int) -> list[int]:
    assert frames
    drawn_steps = []
    for shown, d in frames:
        if shown is None or shown.step is None:  # the prompt read, before step 1 came
            continue
        assert_drawn_is_shown(win, shown, d)
        drawn_steps.append(shown.index)
    assert drawn_steps and drawn_steps[-1] == n_steps
    return drawn_steps


def test_a_paced_run_draws_the_shown_step_in_every_item_of_every_frame(window):
    c = window.controller
    prefill(window, greedy=False, seed=7, max_new=10)
    paints = []
    frames = run_and_read(window, 16.0, paints)
    steps = check_frames(window, frames, len(c.steps))
    assert_one_paint_per_frame(frames, paints[0], at_least=len(c.steps) - 1)
    assert sorted(set(steps)) == list(range(1, len(c.steps) + 1))  # one frame (at least) per step, in order
    assert steps == sorted(steps) and len(c.steps) == 10


def test_a_fast_run_draws_the_shown_step_in_every_item_of_every_frame(window):
    c = window.controller
    prefill(window, greedy=False, seed=7, max_new=24)
    paints = []
    frames = run_and_read(window, 0.0, paints)
    check_frames(window, frames, len(c.steps))
    assert_one_paint_per_frame(frames, paints[0], at_least=1)  # a fast run's frames come about once a second
    assert len(c.steps) == 24


def test_a_past_step_is_drawn_as_it_was_when_it_was_the_newest(window):
    """The history slider at step k draws what the run's frame at step k drew: one convention for what 'at
    step k' means (the prompt and k tokens; the later ones greyed), said by every view."""
    c = window.controller
    prefill(window, greedy=False, seed=7, max_new=8)
    frames = run_and_read(window, 16.0)
    at = {shown.index: d for shown, d in frames if shown is not None and shown.step is not None}
    for k in (3, 6):
        window.history.setValue(k)
        settle(window)
        d = drawn(window)
        shown = c.history.shown()
        assert shown.index == k
        assert_drawn_is_shown(window, shown, d, newest=False)
        for item in ("u_line", "u_label", "kv_label", "kv_bar_bytes", "stop_context", "timeline_outlined"):
            assert d[item] == at[k][item], (k, item)
        later = len(c.steps) - k
        assert f"the {later} later position{'s' if later != 1 else ''}" in d["kv_text"]
        assert f"generated {k:,}" in window.views["stop"].gauge_text.text()
        held = fmt_bytes((c.prefill_event.n_tokens + k) * c.info.kv_bytes_per_token)
        assert held in window.views["explain"]._html  # the same bytes, said the same way


def test_the_logit_lens_draws_the_shown_steps_column_and_gets_it_back_after_a_reset(window):
    """The lens column at every frame of a paced Run; a step gone back to that was taken before the view
    opened (step 1 after a Reset) gets its lens (issue 40, item 7); at its default size the heatmap holds every
    layer, with its colour scale."""
    c, view, dock = window.controller, window.views["lens"], window.docks["lens"]
    n_layers = c.info.n_layers
    prefill(window, greedy=False, seed=7, max_new=6)
    for _ in range(2):  # steps 1 and 2 taken without the lens
        window.actions["step"].trigger()
        wait_until(lambda: idle(c) and c.steps)
    settle(window)
    dock.toggleViewAction().trigger()  # opened: the pending step 3 is read again for its lens
    try:
        wait_until(lambda: not view.visibleRegion().isEmpty() and idle(c))
        settle(window)
        area = view.parentWidget()  # the scroll area's viewport: the view fits it, nothing scrolled away
        assert view.height() <= area.height() and view.plot.getPlotItem().getViewBox().viewRange()[1] == \
            [0.5, n_layers + 0.5]
        assert view.scale.isVisible() and view.scale.values == (0.0, 1.0)  # the colour scale beside it
        window.generation.reset()
        wait_until(lambda: not c.steps and idle(c))
        settle(window)
        assert c.pending.dist.lens is not None and view.table.rowCount() == n_layers  # step 1, pending
        assert "no logit lens" not in view.caption.text()
        columns = []

        def read() -> None:
            shown = c.history.shown()
            if shown is not None and shown.step is not None:
                alpha = view.image.image[:, :, 3].any(axis=1)  # the columns drawn (a step without a lens: none)
                columns.append((shown.index, view.marker.rect().center().x(), list(np.flatnonzero(alpha) + 1),
                                view.table.item(0, 3).text(), shown.step.dist.lens))

        c.redraw.connect(read)
        try:
            window.controls.pace.setCurrentIndex(window.controls.pace.findData(16.0))
            window.actions["run"].trigger()
            wait_until(lambda: c.stopped is not None and idle(c))
            settle(window)
        finally:
            c.redraw.disconnect(read)
        assert [k for k, *_ in columns][-1] == len(c.steps) == 6
        for k, marked, drawn_columns, top_p_chosen, lens in columns:
            assert marked == k and drawn_columns == list(range(1, k + 1)), (k, marked, drawn_columns)
            assert top_p_chosen == f"{lens.p_chosen[-1]:.3f}"
    finally:
        dock.hide()
        window.docks["kv"].raise_()
        settle(window)
