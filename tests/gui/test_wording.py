"""What the views say is true (issue 18): no plots of nothing and no last run's labels before or during a
prefill, the sampling order as it is computed, older positions counted as the cache holds them, a hint that
never moves the field under the mouse. One window on the real default model serves the module; the first
test runs before any prompt."""

import re
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from gui.views.explain_view import TEXTS
from gui.state.format import fmt_bytes
from gui.views.stop_view import EMPTY
from app_driver import idle, prefill, settle, step, wait_until, window_fixture

ROOT = Path(__file__).resolve().parents[2]
window = window_fixture("wording")


def explain_text(win) -> str:
    view = win.views["explain"]
    view.refresh()
    return view.browser.toPlainText()


def test_before_a_prompt_the_views_say_how_to_start(window):
    settle(window)
    stop = window.views["stop"]
    stop.refresh()
    assert stop.status.text() == EMPTY and "Prefill (Ctrl+P)" in EMPTY
    (x_low, x_high), _ = stop.eos_plot.getViewBox().viewRange()
    assert x_low >= 0.5 - 1e-9 and x_high > 10  # the axis of the steps to come, not -0.4 ... 0.5
    assert "Prefill (Ctrl+P)" in explain_text(window)
    # the plots with nothing to show show no axes (ranges like -0.4 ... 0.5 meant nothing)
    cands, timing = window.views["candidates"], window.views["timing"]
    for plot in (cands.bars, cands.waterfall, cands.draw, timing.plot, timing.timeline.plot):
        assert not plot.getPlotItem().getAxis("left").isVisible()
    assert window.views["kv"].compare_labels[1].toPlainText() == "0 B"  # not the log scale's floor of "1 B"


def test_a_new_prefill_clears_the_last_run_at_once(window):
    prefill(window, greedy=True)
    step(window)
    c = window.controller
    assert "Decode step 1" in explain_text(window)
    window.controls.prompt.setPlainText("The capital of Italy is")
    window.actions["prefill"].trigger()  # no event processed yet: the engine's answer cannot have come
    assert c.prefilling and c.prefill_event is None
    text = explain_text(window)
    assert "reading the prompt" in text and "Decode step" not in text
    stop = window.views["stop"]
    stop.refresh()
    assert stop.status.text() == "Reading the prompt…"
    assert "generated 0" in stop.gauge_text.text()
    assert window.status.state.text().startswith("Reading the prompt")
    assert window.controls.prompt_state.text() == "Reading this prompt…"
    wait_until(lambda: c.prefilled and idle(c))
    settle(window)
    assert "reading the prompt" not in explain_text(window)
    assert window.controls.prompt_state.text() == "This prompt is in the context."


def test_explain_counts_the_older_positions_the_cache_holds(window):
    prefill(window, greedy=True)
    c = window.controller
    n_prompt = c.prefill_event.n_tokens
    per_token = c.info.kv_bytes_per_token
    settle(window)
    kv = window.views["kv"].formula.text()  # right after the prefill: it projected every position itself
    assert f"projected all {n_prompt} positions" in kv and "older positions" not in kv
    for k in (1, 2):
        step(window)
        settle(window)
        kv = window.views["kv"].formula.text()
        assert f"re-projecting the {n_prompt + k - 1} older positions" in kv
        text = explain_text(window)
        old = int(re.search(r"the (\d+) older", text).group(1))
        assert old == n_prompt + k - 1 == c.steps[-1].context_tokens - 1
        # the cache after the step holds the older positions and the new one
        assert fmt_bytes((old + 1) * per_token) in text


def test_temperature_divides_the_logits_before_the_softmax():
    for language in ("en", "zh"):
        text = TEXTS["pending"][language]
        assert text.index("÷") < text.index("softmax") < text.index("Top-K" if language == "zh" else "top-k")
        assert "logits → softmax" not in text.lower()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "logits ÷ temperature → softmax → top-k" in readme
    assert "softmax → temperature" not in readme


def test_the_hint_under_the_system_prompt_never_moves_it(window):
    controls = window.controls
    controls.chat.setChecked(True)
    hint = controls.prompt_state
    geometry = []
    for text in ("", "This prompt is in the context.",
                 "The prompt changed since it was read: Prefill (Ctrl+P) to read the new one. " * 3):
        hint.setText(text)
        QApplication.processEvents()
        hint.parentWidget().layout().activate()
        geometry.append((controls.system.geometry(), controls.prompt.geometry(), hint.height()))
    assert geometry[0] == geometry[1] == geometry[2]
    assert hint.height() >= 2 * hint.fontMetrics().lineSpacing()
    assert hint.toolTip() == hint.text()


def test_readme_set_up_and_new_shortcuts_match_the_app():
    import tomllib

    from gui.actions import ACTIONS
    from gui.app import SCREENSHOT_SIZE, parse_args
    from PySide6.QtGui import QImage

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    python = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    assert python == ">=3.11" and "Python ≥ 3.11" in readme
    assert "libxcb-cursor0" in readme and "134" in readme and "compiles the decode kernels" in readme
    for name, keys in (("paced", "P"), ("record", "Ctrl+Shift+V"), ("open_model", "Ctrl+O")):
        assert keys in ACTIONS[name].shortcuts
        assert f"\n| {keys} " in readme or f"\n| {keys} /" in readme
    command = re.search(r"`QT_QPA_PLATFORM=offscreen python main.py (--record [^`]+)`", readme).group(1)
    args = parse_args(command.split())
    assert (ROOT / args.script).is_file() and args.record == "out.mp4"
    shot = QImage(str(ROOT / "resources" / "screenshot.png"))
    assert (shot.width(), shot.height()) == SCREENSHOT_SIZE


def test_a_load_names_each_stage_in_the_status_bar_and_on_stderr(window, capsys):
    """As the engine reports a first start (test_first_start.py checks the engine side): the status bar and
    the terminal say the stage that is under way, not the one before it."""
    from inference.progress import STAGES

    loader, c = window.loader, window.controller
    capsys.readouterr()
    for stage, done, total in (("download", 92_871_040, 92_871_040), ("verify", 0, 1), ("dequantise", 10, 272),
                               ("compile", 0, 1)):
        c.progress.emit(stage, done, total)
        assert window.status.state.text().lower().startswith(STAGES[stage])
    assert "(10 of 272)" not in window.status.state.text()  # the compile stage, not the conversion's count
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if line.startswith("[tokenstep]")] == [
        "[tokenstep] downloading the default model (93 MB)…", f"[tokenstep] {STAGES['verify']}…",
        f"[tokenstep] {STAGES['dequantise']} (272 tensors)…", f"[tokenstep] {STAGES['compile']}…"]
    assert loader.progress is None  # no dialog was open: the status bar alone said it
    c.state_changed.emit()


def test_stop_strings_and_captions_are_shown_as_written_never_as_markup(window):
    """A stop string or a caption that looks like HTML is text: '</code><h1>Big' shows those characters."""
    hostile = "</code><h1>Big</h1>"
    window.controls.stops.setText(hostile)
    c = window.controller
    wait_until(lambda: hostile in c.settings.stop_strings)
    stop = window.views["stop"]
    stop.refresh()
    assert hostile in stop.stop_strings.text().replace("&lt;", "<").replace("&gt;", ">")
    assert "<h1>" not in stop.stop_strings.text()
    window.controls.stops.setText("")
    window.caption.show_text(hostile)
    assert window.caption.textFormat() == Qt.PlainText and window.caption.text() == hostile
    window.caption.show_text("")
