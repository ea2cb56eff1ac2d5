"""The app in 简体中文 and English through Qt's translation system (issue 41).

- The catalogue: pyside6-lupdate run on gui/ finds no string the committed .ts lacks, the .ts has no unfinished
  entry, and the committed .qm is what pyside6-lrelease makes of it; every translate() / QT_TRANSLATE_NOOP() in
  gui/ is one lupdate can extract (a literal text; a count that is a plain name: lupdate 6.11 drops a call whose n
  is an expression).
- A running window in zh_CN: no menu, action, dock title, label, button, group box, tooltip, placeholder or
  status-bar text is left in English, apart from an allow-list (units, symbols, top-k…, token and model names).
- Switching the language live words the whole window again, with the same engine and the same steps.
- `main.py --lang`.
"""

from __future__ import annotations

import ast
import html
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractButton, QAbstractSpinBox, QApplication, QComboBox, QDockWidget, QGroupBox,
                               QLabel, QLineEdit, QMenu, QPlainTextEdit, QSpinBox, QWidget)

from app_driver import prefill, settle, step, window_fixture
from gui import language
from gui.app import parse_args
from gui.state.i18n import translate

ROOT = Path(__file__).resolve().parents[2]
TRANSLATIONS = ROOT / "resources" / "translations"
TS = TRANSLATIONS / "tokenstep_zh_CN.ts"
QM = TRANSLATIONS / "tokenstep_zh_CN.qm"
BIN = Path(sys.executable).parent
CJK = re.compile(r"[\u4e00-\u9fff]")

window = window_fixture("translation")


def gui_sources() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "gui").rglob("*.py"))


def messages(ts: Path) -> dict[tuple[str, str, str | None], ET.Element]:
    found = {}
    for context in ET.parse(ts).getroot().iter("context"):
        name = context.findtext("name")
        for m in context.iter("message"):
            comment = m.find("comment")
            found[(name, m.findtext("source"), None if comment is None else comment.text)] = m
    return found


def tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} comes with PySide6-Essentials (a declared dependency)"
    return str(path)


# --- the catalogue ----------------------------------------------------------------------------------------
def test_lupdate_finds_no_string_the_committed_ts_lacks(tmp_path):
    fresh = tmp_path / "fresh.ts"
    subprocess.run([tool("pyside6-lupdate"), *gui_sources(), "-no-obsolete", "-locations", "none",
                    "-source-language", "en", "-target-language", "zh_CN", "-ts", str(fresh)],
                   cwd=ROOT, check=True, capture_output=True)
    extracted, committed = set(messages(fresh)), set(messages(TS))
    assert len(extracted) > 200
    assert extracted - committed == set(), "strings not in the .ts: run the lupdate line of glossary.md"
    assert committed - extracted == set(), "the .ts has strings gui/ no longer has (lupdate -no-obsolete)"


def test_every_entry_is_translated_and_keeps_its_placeholders():
    for (context, source, _), m in messages(TS).items():
        t = m.find("translation")
        assert t.get("type") is None, f"unfinished: {context}: {source[:80]}"
        text = "".join(t.itertext())
        assert text.strip(), f"empty: {context}: {source[:80]}"
        words = re.sub(r"\{\w+\}|<[^>]+>", "", source)
        assert CJK.search(text) or not re.search(r"[A-Za-z]{2,}", words), f"not in Chinese: {context}: {source[:80]}"
        english_plurals = {"{ngram_s}", "{emitted_s}", "{chunks_s}", "{blocks_s}"}  # the English source's own plural endings
        assert set(re.findall(r"\{\w+\}", source)) - english_plurals == set(re.findall(r"\{\w+\}", text)), \
            f"placeholders differ: {context}: {source[:80]}"
        assert ("%n" in source) == ("%n" in text), f"%n: {context}: {source[:80]}"


def test_the_committed_qm_is_what_lrelease_makes_of_the_ts(tmp_path):
    built = tmp_path / "built.qm"
    subprocess.run([tool("pyside6-lrelease"), str(TS), "-qm", str(built)], check=True, capture_output=True)
    assert built.read_bytes() == QM.read_bytes(), "run pyside6-lrelease (glossary.md) and commit the .qm"


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in ("translate", "QT_TRANSLATE_NOOP", "tr"):
                yield name, node


def test_every_translate_call_in_gui_is_one_lupdate_extracts():
    """A literal text (an f-string or a variable is a key lupdate never sees), and a count that is a plain name
    or a number; each literal one is in the .ts."""
    committed = messages(TS)
    keys = {(c, s) for c, s, _ in committed}
    checked = 0
    for path in gui_sources():
        for name, call in _calls(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
            where = f"{path}:{call.lineno}"
            if name == "tr":
                raise AssertionError(f"{where}: use translate(context, …): a tr() context is the subclass's")
            args = call.args
            if len(args) < 2 or not isinstance(args[0], ast.Constant):
                continue  # the definitions in gui/state/i18n.py
            text = args[1]
            assert not isinstance(text, ast.JoinedStr), f"{where}: an f-string is never in the .ts: use .format"
            if isinstance(text, ast.Constant):
                assert (args[0].value, text.value) in keys, f"{where}: {text.value[:60]!r} is not in the .ts"
                checked += 1
            if len(args) > 3:
                assert isinstance(args[3], (ast.Name, ast.Constant)), \
                    f"{where}: lupdate drops a translate() whose count is an expression: give it a name"
    assert checked > 200


def test_plurals_through_percent_n(qapp):
    assert translate("StatusBar", "context window %n token(s)", None, 1) == "context window 1 token"
    assert translate("StatusBar", "context window %n token(s)", None, 8192) == "context window 8,192 tokens"
    language.set_language("zh_CN")
    try:
        assert translate("StatusBar", "context window %n token(s)", None, 1) == "上下文窗口 1 个 Token"
        assert translate("StatusBar", "context window %n token(s)", None, 8192) == "上下文窗口 8,192 个 Token"
    finally:
        language.set_language("en")


def test_lang_argument():
    assert parse_args(["--lang", "zh_CN"]).lang == "zh_CN"
    assert parse_args(["--lang", "zh"]).lang == "zh_CN"
    assert parse_args(["--lang", "en"]).lang == "en"
    assert parse_args([]).lang is None
    with pytest.raises(SystemExit):
        parse_args(["--lang", "fr"])


# --- a running window ---------------------------------------------------------------------------------------
# What may stay in Latin letters in Chinese: the field's symbols and names, units, keys, file types.
ALLOWED = {"top-k", "top-p", "min-p", "min_p", "Top-k", "Top-p", "Min-p", "Top-K", "Top-P", "Min-P", "KV", "Token",
           "Tokens", "Logits", "Logit", "logits", "logit", "softmax", "argmax", "Key", "Value", "Query", "Q", "K", "V",
           "T", "u", "p", "k", "ms", "MB", "KB", "GB", "B", "M", "s", "id", "nats", "TokenStep", "PNG", "MP4", "GIF",
           "GGUF", "gguf", "JSON", "Lines", "Hugging", "Face", "llama", "cpp", "vLLM", "SGLang", "Ctrl", "Shift",
           "Alt", "Esc", "Space", "Enter", "Return", "Backspace", "Left", "Right", "Pause", "F1", "F5", "P", "CDF",
           "sha256", "context_full", "eos", "max_new_tokens", "stop_string", "aborted", "mp4", "gif", "cpu", "cuda",
           "float32", "bfloat16", "float16", "int8", "Σ", "max", "min",
           "Language", "English"}  # View → 语言 (Language) names each language in its own words


def texts_of(win, within: QWidget | None = None) -> list[tuple[str, str]]:
    """(where, text) for every text a learner reads on the window's widgets, menus and actions (`within`: on
    that widget and its children only)."""
    found = []
    def menu_texts(menu: QMenu, where: str):
        found.append((where, menu.title()))
        for action in menu.actions():
            if action.menu() is not None:
                menu_texts(action.menu(), where + "/" + action.menu().title())
            elif not action.isSeparator():
                found.append((where + "/action", action.text()))
    for action in win.menuBar().actions() if within is None else ():
        menu_texts(action.menu(), "menu")
    for key, action in win.actions.items() if within is None else ():
        found += [(f"action {key}", action.text()), (f"action {key} tip", action.toolTip())]
    for key, dock in win.docks.items() if within is None else ():
        found.append((f"dock {key}", dock.windowTitle()))
    found.append(("window title", win.windowTitle() if within is None else within.windowTitle()))
    for w in win.findChildren(QWidget):
        if not w.isVisibleTo(win) or isinstance(w, QDockWidget) or within is not None and not within.isAncestorOf(w):
            continue
        name = f"{type(w).__name__} {w.objectName()}"
        found.append((name + " tip", w.toolTip()))
        if isinstance(w, QLabel):
            found.append((name, w.text()))
        elif isinstance(w, QAbstractButton):
            found.append((name, w.text()))
        elif isinstance(w, QGroupBox):
            found.append((name, w.title()))
        elif isinstance(w, (QLineEdit, QPlainTextEdit)):
            found.append((name + " placeholder", w.placeholderText()))
        elif isinstance(w, QComboBox):
            found += [(name + " item", w.itemText(i)) for i in range(w.count())]
        if isinstance(w, QAbstractSpinBox) and isinstance(w, QSpinBox):
            found.append((name + " special", w.specialValueText()))
    return [(where, text) for where, text in found if text]


WORD = r"[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*"  # top-k, float32, SmolLM2-135M-Instruct: one word each


def english_left(text: str, allowed: set[str]) -> list[str]:
    """The Latin words of a text that are neither allowed nor a token, model or path quoted in it."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"“[^”]*”|‘[^’]*’|\"[^\"]*\"|‹[^›]*›|\{[^}]*\}", " ", text)  # quoted tokens and strings
    text = re.sub(r"\b[0-9a-f]{8,}\b|[\w./-]*/[\w./-]+|\w+\.(?:mp4|gif|png|ts|json|gguf)\b", " ", text)  # hashes, paths
    words = re.findall(WORD, text)
    # a lone letter: a symbol, a key, a mnemonic; q0, q1…: query heads
    return [w for w in words if w not in allowed and len(w) > 1 and not re.fullmatch(r"q\d+", w)]


def untranslated(win, within: QWidget | None = None) -> list[str]:
    info = win.controller.info
    allowed = ALLOWED | set(re.findall(WORD, info.name if info else ""))  # the model's name
    # the engine's full description of its decode path ("fused kernels, 2 rows/pass far apart, prefetch 4 KB") is
    # technical detail kept as the engine writes it, in the status bar's tooltip only (its line words the path)
    engine = set(re.findall(WORD, info.decode_path if info else ""))
    tokens = {w for s in win.controller.steps for w in re.findall(r"[A-Za-z]+", s.token.piece)}
    tokens |= {w for t in (win.controller.prefill_event.tokens if win.controller.prefill_event else ())
               for w in re.findall(r"[A-Za-z]+", t.piece)}
    bad = []
    for where, text in texts_of(win, within):
        left = english_left(text, allowed | tokens | (engine if where.endswith(" tip") else set()))
        if left:
            bad.append(f"{where}: {left[:6]} in {text[:90]!r}")
    return bad


@pytest.fixture
def in_english(window):
    window.set_language("en")
    QApplication.processEvents()
    yield window
    window.set_language("en")
    QApplication.processEvents()


def test_a_window_in_chinese_leaves_no_english(in_english):
    win = in_english
    hidden = [key for key in ("attention", "lens") if win.docks[key].isHidden()]
    for key in hidden:  # the docks hidden at first too (each records its data only while shown)
        win.docks[key].show()
    try:
        prefill(win, greedy=False, seed=7)
        step(win, 2)
        win.set_language("zh_CN")
        QApplication.processEvents()
        settle(win)
        for key in ("attention", "lens"):  # raised: a tabbed-away view draws when its tab is raised
            win.docks[key].raise_()
        settle(win)
        QApplication.processEvents()
        bad = untranslated(win)
        assert not bad, "left in English:\n" + "\n".join(bad)
    finally:
        for key in hidden:
            win.docks[key].hide()
        for key in ("timing", "stop", "context", "kv"):
            win.docks[key].raise_()


def test_switching_language_live_words_the_whole_window_again(in_english):
    win = in_english
    c = win.controller
    prefill(win, greedy=False, seed=7)
    step(win, 3)
    engine, thread, pid = c.worker, c.thread, c.worker.process.pid
    tokens = [(s.index, s.token.id, s.random_u) for s in c.steps]

    def read():
        explain = win.views["explain"]
        return {"menu": win.menus["file"].title(), "view menu": win.menus["view"].title(),
                "dock": win.docks["candidates"].windowTitle(), "step": win.actions["step"].text(),
                "controls": win.controls.sampling_box.title(), "prompt state": win.controls.prompt_state.text(),
                "controls label": win.controls.form_labels["temperature"].text(),
                "header": win.views["candidates"].header.text(), "legend": win.views["candidates"].legend.text(),
                "kv": win.views["kv"].formula.text(), "stop": win.views["stop"].status.text(),
                "timing": win.views["timing"].summary.text(), "explain": explain._html,
                "status": win.status.state.text(), "model": win.status.model.text()}

    english = read()
    win.set_language("zh_CN")
    QApplication.processEvents()
    settle(win)
    chinese = read()
    for key, text in chinese.items():
        assert text != english[key] and CJK.search(text), f"{key} not worded again: {text[:100]!r}"
    assert c.worker is engine and c.thread is thread and thread.isRunning()  # the same engine, never restarted
    assert c.worker.process.pid == pid and c.worker.process.is_alive()
    assert [(s.index, s.token.id, s.random_u) for s in c.steps] == tokens  # the steps kept
    assert win.qsettings.value("language") == "zh_CN"
    win.set_language("en")
    QApplication.processEvents()
    settle(win)
    assert read() == english  # and back, word for word


def test_a_hint_in_the_status_bar_when_no_font_draws_chinese(in_english, monkeypatch):
    win = in_english
    win.set_language("zh_CN")
    QApplication.processEvents()
    assert language.has_chinese_font() and win.status.hint.isHidden()  # fonts-noto-cjk here: no hint
    monkeypatch.setattr(language, "has_chinese_font", lambda: False)
    win.retranslate()
    assert win.status.hint.isVisibleTo(win) and "fonts-noto-cjk" in win.status.hint.text()
    assert not CJK.search(win.status.hint.text())  # readable without a Chinese font
    monkeypatch.undo()
    win.set_language("en")
    QApplication.processEvents()
    assert win.status.hint.isHidden()


def test_an_open_dialog_follows_the_language(in_english):
    win = in_english
    picker = win.open_model_picker()
    try:
        QApplication.processEvents()
        english = (picker.windowTitle(), picker.add_folder_button.text(), picker.model.headerData(0, Qt.Horizontal))
        assert english == ("Open a model", "Add folder…", "Name")
        win.set_language("zh_CN")
        QApplication.processEvents()
        chinese = (picker.windowTitle(), picker.add_folder_button.text(), picker.model.headerData(0, Qt.Horizontal))
        assert all(CJK.search(text) for text in chinese), chinese
        win.set_language("en")
        QApplication.processEvents()
        assert (picker.windowTitle(), picker.add_folder_button.text(),
                picker.model.headerData(0, Qt.Horizontal)) == english
    finally:
        picker.reject()


def test_chinese_lines_are_given_their_height_and_wrap_without_spaces(qapp, qtbot):
    """Chinese glyphs come from a fallback font with taller lines: a caption keeping room for 2 lines of the
    Latin font cut its second Chinese line; and a Chinese sentence has no spaces to wrap at."""
    from gui.widgets.wrap_label import CaptionLabel, line_spacing

    caption = CaptionLabel(lines=2)
    qtbot.addWidget(caption)
    latin = caption.fontMetrics().lineSpacing()
    assert line_spacing(caption) == latin
    language.set_language("zh_CN")
    try:
        assert line_spacing(caption) > latin  # 18 against 14 px at 9 pt with Noto Sans CJK
        assert caption.sizeHint().height() == 2 * line_spacing(caption)
        text = "保留了 50 个 Token；u = 0.9949 落在·Europe的区段（按Logit排名第48）。这个句子在中文里没有可以断开的空格"
        caption.setText(text)
        metrics = caption.fontMetrics()
        narrow = metrics.horizontalAdvance(text) // 3
        lines = caption.shown_lines(narrow)
        assert len(lines) == 2 and lines[-1].endswith("…") and len(lines[0]) > 5
        assert all(metrics.horizontalAdvance(line) <= narrow for line in lines)
        assert caption.shown_lines(metrics.horizontalAdvance(text) + 10) == [text]
    finally:
        language.set_language("en")


# --- the Serving dock and its dialog (issue 39's words, through the same catalogue) --------------------------
def two_requests():
    from inference.engine import protocol as p
    from inference.settings import GenerationSettings, SamplerSettings

    greedy = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=4)
    system = "You are a friendly teacher. Answer in one short sentence."
    return (p.ServeRequest("What is the capital of France?", True, system, greedy, 0),
            p.ServeRequest("What do bees make?", True, system, greedy, 1))


def serve_two(win):
    from app_driver import idle, wait_until

    c = win.controller
    assert win.serve(two_requests(), block_tokens=16, n_blocks=0, token_budget=24)
    wait_until(lambda: c.serving.active and not c.serving.running and idle(c))
    settle(win)
    QApplication.processEvents()


def serving_words(win) -> dict[str, str]:
    view = win.views["serving"]
    header = view.table.horizontalHeader()
    return {"dock": win.docks["serving"].windowTitle(), "serve": view.serve_button.text(),
            "measure": view.measure_button.text(), "continue": view.continue_button.text(),
            "curve title": view.curve_title.text(), "numbers": view.numbers.text(),
            "timeline legend": view.timeline_legend.text(), "grid legend": view.grid_legend.text(),
            "curve note": view.curve_note.text(),
            **{f"column {i}": view.table.horizontalHeaderItem(i).text() for i in range(header.count())},
            **{f"column {i} tip": view.table.horizontalHeaderItem(i).toolTip() for i in range(header.count())},
            **{f"state of {r}": view.table.item(r, 1).text() for r in range(view.table.rowCount())}}


def test_a_served_run_in_chinese_leaves_no_english_in_the_serving_dock_and_its_dialog(in_english):
    win = in_english
    win.set_language("zh_CN")
    QApplication.processEvents()
    try:
        serve_two(win)
        s, view = win.controller.serving, win.views["serving"]
        assert len(s.tracks) == 2 and all(t.finished for t in s.tracks) and view.isVisible()
        # every label, button and tooltip of the dock (the other docks: test_a_window_in_chinese_leaves_no_english)
        bad = untranslated(win, win.docks["serving"])
        words = serving_words(win)
        bad += [f"{key}: {english_left(text, ALLOWED)[:6]} in {text[:90]!r}" for key, text in words.items()
                if english_left(text, ALLOWED)]
        assert not bad, "left in English:\n" + "\n".join(bad)
        assert all(CJK.search(text) for text in words.values()), words
        assert words["state of 0"].startswith("已结束（")  # finished (its stop reason, worded)
        assert "同时服务 2 个请求" in win.views["explain"].browser.toPlainText()
        # the status line says the serve ended (it kept "Running…" from while it ran)
        assert win.status.state.text().startswith("一起服务了 2 个请求"), win.status.state.text()
        dialog = win.open_serve_dialog()
        try:
            QApplication.processEvents()
            assert dialog.isVisible() and CJK.search(dialog.windowTitle())
            bad = untranslated(win, dialog)  # its labels, buttons, check boxes, special value…
            assert not bad, "left in English in the Serve dialog:\n" + "\n".join(bad)
        finally:
            dialog.reject()
    finally:
        win.set_language("en")
        QApplication.processEvents()


def test_switching_language_live_rewords_the_serving_dock_and_an_open_serve_dialog(in_english):
    win = in_english
    c = win.controller
    if not (c.serving.active and c.serving.done):
        serve_two(win)
    dialog = win.open_serve_dialog()
    try:
        QApplication.processEvents()
        english = serving_words(win)
        english_dialog = (dialog.windowTitle(), dialog.form_labels["budget"].text(), dialog.chat.text(),
                          dialog.n_blocks.specialValueText())
        assert english["column 6"] == "TTFT ms" and english["measure"] == "Measure"
        assert english_dialog == ("Serve several requests", "Token budget", "Chat template",
                                  "enough for every request at once")
        win.set_language("zh_CN")
        QApplication.processEvents()
        settle(win)
        chinese = serving_words(win)
        for key, text in chinese.items():
            assert text != english[key] and CJK.search(text), f"{key} not worded again: {text[:100]!r}"
        assert chinese["column 6"] == "首 Token ms" and chinese["measure"] == "测量"
        chinese_dialog = (dialog.windowTitle(), dialog.form_labels["budget"].text(), dialog.chat.text(),
                          dialog.n_blocks.specialValueText())
        assert all(CJK.search(text) for text in chinese_dialog), chinese_dialog
        win.set_language("en")
        QApplication.processEvents()
        settle(win)
        assert serving_words(win) == english  # and back, word for word
        assert win.status.state.text().startswith("Served 2 requests together · "), win.status.state.text()
        assert (dialog.windowTitle(), dialog.form_labels["budget"].text(), dialog.chat.text(),
                dialog.n_blocks.specialValueText()) == english_dialog
    finally:
        dialog.reject()


def test_the_schedulers_waiting_reasons_are_worded_in_chinese(qapp):
    """The engine says why a request waits in its own words (inference/session/batch.py, kept in the trace);
    the dock words each of them."""
    from gui.state.serving import waiting_reason

    reasons = ("not arrived yet", "arrives at step 5", "behind request 2, which waits first",
               "the batch is full (8 requests running)",
               "the pool is full: 3 blocks free and not promised to running requests, 5 needed")
    assert [waiting_reason(r) for r in reasons] == list(reasons)
    language.set_language("zh_CN")
    try:
        for reason in reasons:
            worded = waiting_reason(reason)
            assert CJK.search(worded) and not english_left(worded, ALLOWED), worded
            assert set(re.findall(r"\d+", worded)) == set(re.findall(r"\d+", reason))  # its numbers kept
        assert waiting_reason("something new") == "something new"  # one it does not know: as the engine said it
    finally:
        language.set_language("en")


def test_the_batch_curves_words_in_chinese_while_measuring_and_measured(in_english):
    """Measure's progress line, its result and its tooltip (the engine's MeasureBatch replies, as the state keeps
    them) in 简体中文, with their numbers."""
    from inference.engine import protocol as p
    from gui.state.serving import Curve

    win = in_english
    s, view = win.controller.serving, win.views["serving"]
    kept = s.curve
    floor = p.BatchFloor(read_bytes=538_000_000, gb_per_s=12.5, ms=43.0)
    points = (p.BatchPoint(1, 50.0, 20.0), p.BatchPoint(2, 52.0, 38.5), p.BatchPoint(4, 60.0, 66.7))
    win.set_language("zh_CN")
    QApplication.processEvents()
    try:
        shown = []
        for curve in (Curve(None, (), (1, 2, 4), True), Curve(floor, points[:1], (1, 2, 4), True),
                      Curve(floor, points, (1, 2, 4), False)):
            s.curve = curve
            view._curve(s)
            shown.append((view.curve_note.text(), view.curve_note.toolTip()))
        for text in [shown[0][0], shown[1][0], shown[2][0], shown[2][1]]:
            assert CJK.search(text) and not english_left(text, ALLOWED), text
        assert "2 个请求" in shown[1][0] and "1" in shown[1][0]  # the next size, and how many are done
        assert "4 个请求" in shown[2][0] and "66.7" not in shown[2][0] and "67 Token/秒" in shown[2][0]
        assert "538.00 MB" in shown[2][1] or "538 MB" in shown[2][1]
    finally:
        s.curve = kept
        view._curve_key = None
        win.set_language("en")
        QApplication.processEvents()
