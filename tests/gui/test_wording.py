"""What the views say is true (issue 18): no plots of nothing and no last run's labels before or during a
prefill, the sampling order as it is computed, older positions counted as the cache holds them, a hint that
never moves the field under the mouse. One window on the real default model serves the module; the first
test runs before any prompt."""

import re
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from gui.language import set_language
from gui.state.i18n import translate
from gui.views.explain_texts import TEXTS
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
    x_low, x_high = stop.eos_plot.x_range
    assert x_low >= 0.5 - 1e-9 and x_high > 10  # the axis of the steps to come, not -0.4 ... 0.5
    assert "Prefill (Ctrl+P)" in explain_text(window)
    # the plots with nothing to show show no axes (ranges like -0.4 ... 0.5 meant nothing)
    cands, timing = window.views["candidates"], window.views["timing"]
    assert not any(chart.axes_shown() for chart in (cands.bars, cands.waterfall, cands.draw, timing.step_chart,
                                                    timing.timeline.chart))
    assert window.views["kv"].compare.labels[1].text == "0 B"  # not the log scale's floor of "1 B"


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


def test_temperature_divides_the_logits_before_the_softmax(qapp):
    for language in ("en", "zh_CN"):
        set_language(language)
        text = translate("Explain", TEXTS["pending"])
        assert text.index("÷") < text.index("softmax") < text.index("Top-K" if language == "zh_CN" else "top-k")
        assert "logits → softmax" not in text.lower()
    set_language("en")
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


def test_counts_agree_with_their_nouns():
    from gui.state.format import agree, plural

    assert plural(1, "token") == "1 token" and plural(2, "token") == "2 tokens" and plural(0, "model") == "0 models"
    assert plural(1, "branch", "branches") == "1 branch" and plural(1_024, "token") == "1,024 tokens"
    assert agree("the 1 older positions were read; 11 tokens were; 0.1 tokens; kept 1 candidates") == \
        "the 1 older position was read; 11 tokens were; 0.1 tokens; kept 1 candidate"


def test_a_byte_token_reads_one_way_in_every_view_and_tooltip(window):
    """A token that is bytes of a character (Chinese): ‹E5 B7› on chips, tooltips, Candidates, Branches and
    Explain alike, never \\xE5\\xB7 or Python's '\\\\xE5'."""
    from gui.state.format import display, quoted
    from gui.views.branches_view import tooltip

    assert display("\\xE5\\xB7") == "‹E5 B7›" and quoted(" Paris") == "“·Paris”"
    assert quoted("\\xBB") == "“‹BB›”"
    prefill(window, "用中文介绍一下巴黎", chat=True, greedy=True)
    c = window.controller
    for _ in range(6):
        step(window)
        if any(not s.token.text for s in c.steps):
            break
    settle(window)
    canvas = window.views["context"].canvas
    shown = [chip.label for chip in canvas.chips] + list(canvas.tooltips.values())
    assert not any("\\x" in text for text in shown), [t for t in shown if "\\x" in t][:3]
    byte_only = [i for i, t in enumerate(c.prefill_event.tokens) if not t.text]
    assert byte_only and all(canvas.chips[i].label.startswith("‹") for i in byte_only)
    assert all(f"“{canvas.chips[i].label}”" in canvas.tooltips[i] for i in byte_only)
    branches = window.views["branches"].canvas
    tips = [tooltip(p) for p in branches.placed]
    assert not any("\\x" in tip or "'" in tip.split("\n")[0] for tip in tips)
    cands = window.views["candidates"]
    ticks = [label for _, label in cands.bars.y_ticks]
    assert not any("\\x" in tick for tick in ticks)
    assert "\\x" not in explain_text(window) and "\\x" not in cands.header.text()
    window.controls.chat.setChecked(False)


def test_ranks_read_from_1_and_bars_and_segments_have_tooltips(window):
    """The top token is rank 1 wherever a learner reads it (the trace keeps chosen_rank 0); hovering a bar or
    a draw segment names its token, with what a click does only where one may take it."""
    from PySide6.QtCore import QPointF
    from PySide6.QtWidgets import QToolTip

    from PySide6.QtCore import QRectF

    from gui.views.branches_view import Placed, tooltip
    from gui.views.context_view import step_tip

    prefill(window, chat=False, greedy=False, seed=7, max_new=2)
    step(window)
    c = window.controller
    s = c.steps[0]
    rank = s.chosen_rank + 1
    assert f'"chosen_rank": {s.chosen_rank},' in next(line for line in c.trace_lines() if '"step"' in line)
    view = window.views["candidates"]
    assert f"(rank {rank}, u = " in view.header.text()
    assert f"rank {rank} " in step_tip(s, "") and f"(rank {rank}, probability" in explain_text(window)
    assert f"(rank {rank} by logit)" in view.draw_caption.text()
    node = next(n for n in c.history.nodes.values() if n.step is s)
    assert f"rank {rank}\n" in tooltip(Placed(node, 0, QRectF(), "", 0.0))
    window.controls.max_new.setValue(400)
    wait_until(lambda: c.settings.max_new_tokens == 400)
    c.run()  # during a run no click may take a token: the tooltips still name them
    wait_until(lambda: c.running and len(c.steps) > 2)
    settle(window)
    assert not view._can_take()
    shown = view._drawn
    top = int(shown.dist.candidates.ids[0])
    tip = view._describe_take(top)
    assert tip.startswith(f"“{view._text_of(top)}” · id {top} · rank 1 by logit") and "Click" not in tip
    assert "model (softmax of the logits): p = " in tip
    view.bar_picker._on_move(view.bar_picker.widget_pos(QPointF(0.3, 0)))  # hover the top bar
    assert QToolTip.isVisible() and QToolTip.text() == tip
    assert view.bars.cursor().shape() != Qt.PointingHandCursor  # nothing to click
    kept = shown.dist.kept
    middle = float(kept.cdf[0] / 2)  # the first segment of the draw strip
    view.draw_picker._on_move(view.draw_picker.widget_pos(QPointF(middle, 0.25)))
    assert QToolTip.text() == view._describe_take(int(kept.ids[0]))
    view.bar_picker._on_move(view.bar_picker.widget_pos(QPointF(0.3, -5)))  # off the bars
    window.controls.max_new.setValue(64)
    c.pause()
    wait_until(lambda: idle(c))


def test_one_token_is_one_token(window):
    """A 1-token prompt and a 1-token generation: the Stop view, the status bar and Explain count in the
    singular."""
    prefill(window, "Hello", chat=False, greedy=True, max_new=1)
    c = window.controller
    assert c.prefill_event.n_tokens == 1
    assert window.status.state.text().startswith("Prefilled 1 token in ")
    step(window)
    wait_until(lambda: c.stopped is not None and idle(c))
    settle(window)
    stop = window.views["stop"]
    stop.refresh()
    assert stop.status.text().startswith("Ended after 1 token: ")
    assert "1 new token was generated" in explain_text(window)
    window.controls.max_new.setValue(64)


def test_emoji_draw_in_colour_not_as_boxes(qapp):
    """An emoji in a token's text is drawn from an emoji font (on Linux Noto Color Emoji, Debian's
    fonts-noto-color-emoji, which .ci/run installs), not as a box: its pixels are in colour."""
    from PySide6.QtGui import QColor, QImage, QPainter

    from gui.theme import Appearance

    for mono in (False, True):  # the chips' font and the labels'
        image = QImage(80, 60, QImage.Format_RGB32)
        image.fill(QColor("white"))
        painter = QPainter(image)
        painter.setFont(Appearance().font(2.0, mono=mono))
        painter.setPen(QColor("black"))
        painter.drawText(8, 45, "🙂")
        painter.end()
        colours = {(image.pixelColor(x, y).red(), image.pixelColor(x, y).green(), image.pixelColor(x, y).blue())
                   for x in range(80) for y in range(60)}
        coloured = [rgb for rgb in colours if max(rgb) - min(rgb) > 60]  # a tofu box or a mono glyph is grey
        assert len(coloured) > 20, f"no colour emoji font (mono={mono}): install fonts-noto-color-emoji"
