"""The app connected to a (fake) inference server: the tail bar, the KV note, a server that dies and
comes back; and the Connect to server… dialog."""

from __future__ import annotations

import pytest

from fake_servers import V, Fake, llama_cpp_routes, tokenizer_folder


@pytest.fixture
def tokenizer_dir(tmp_path):
    return tokenizer_folder(tmp_path / "tokenizer")


def window_on(qtbot, fake, tokenizer_dir, tmp_path):
    """A window on the fake server `fake`, its tokenizer read from `tokenizer_dir`, shown (closed by the test)."""
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow
    from gui.theme import Appearance

    win = MainWindow(settings=QSettings(str(tmp_path / "t.ini"), QSettings.IniFormat), appearance=Appearance(),
                     model=f"{fake.url}#tokenizer={tokenizer_dir}")
    qtbot.addWidget(win)
    win.resize(1600, 1000)  # the model line is whole at the app's size (a narrow window shortens it)
    win.show()
    return win


def test_the_app_steps_a_server_shows_the_tail_and_survives_its_death(qtbot, tokenizer_dir, tmp_path):
    fake = Fake(llama_cpp_routes(tokenizer_dir))
    port, errors = fake.port, []
    win = window_on(qtbot, fake, tokenizer_dir, tmp_path)
    c = win.controller
    c.error.connect(lambda message, details, expected: errors.append((message, expected)))
    idle = lambda: not c.busy and not c.running  # noqa: E731
    try:
        qtbot.waitUntil(lambda: c.info is not None, timeout=60_000)
        assert c.info.dtype == "remote" and c.info.vocab_size == V
        win.controls.prompt.setPlainText("the tin")
        win.actions["prefill"].trigger()
        qtbot.waitUntil(lambda: c.prefilled and idle(), timeout=60_000)
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: len(c.steps) == 1 and idle(), timeout=60_000)
        qtbot.waitUntil(lambda: not c.scheduler.redraw_due, timeout=60_000)
        view, step = win.views["candidates"], c.steps[0]
        ticks = [label for _, label in view.bars.y_ticks]
        note = step.dist.server  # the app's sampler (top-k 50 > 20) had the server asked for 80
        assert note.n_top == 80 and ticks[-1] == f"other ({V - 80} tokens)" == f"other ({note.tail_count} tokens)"
        assert list(view.bars.bars["tail"].width) == [note.tail_p] and "server listed top 80" in view.header.text()
        kv = win.views["kv"]
        kv._force_refresh()
        assert "KV bytes not known" in kv.formula.text() and f"took {note.cached_tokens}" in kv.formula.text()
        fake.stop()
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: bool(errors) and idle(), timeout=60_000)
        assert errors[0][1] and "\n" not in errors[0][0] and "cannot reach the server" in errors[0][0]
        kept = [s.token.id for s in c.steps]
        assert len(kept) >= 1
        fake = Fake(llama_cpp_routes(tokenizer_dir), port=port)
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: len(c.steps) == len(kept) + 1 and idle(), timeout=60_000)
        assert [s.token.id for s in c.steps][:len(kept)] == kept
    finally:
        win.close()
        fake.stop()


def test_connect_dialog_builds_the_spec_the_engine_loads(qtbot, tokenizer_dir):
    from PySide6.QtWidgets import QDialogButtonBox

    from gui.dialogs.connect_dialog import ConnectDialog, server_spec
    from inference.store.remote_model import split_spec

    dialog = ConnectDialog(None, "http://10.0.0.5:8000", str(tokenizer_dir / "tokenizer.json"))
    qtbot.addWidget(dialog)
    assert split_spec(dialog.spec()) == ("http://10.0.0.5:8000", str(tokenizer_dir / "tokenizer.json"))
    assert server_spec(" https://h:1 ") == "https://h:1" and split_spec("https://h:1") == ("https://h:1", None)
    dialog.url.setText("ftp://nope")
    assert not dialog.buttons.button(QDialogButtonBox.Ok).isEnabled()


def _ok(dialog):
    from PySide6.QtWidgets import QDialogButtonBox

    return dialog.buttons.button(QDialogButtonBox.Ok)


def test_connect_dialog_shows_the_tokenizer_the_servers_model_path_names_before_it_is_read(qtbot, tokenizer_dir):
    from PySide6.QtWidgets import QDialog

    from gui.dialogs.connect_dialog import ConnectDialog
    from inference.store.remote_model import split_spec

    routes = llama_cpp_routes(tokenizer_dir)
    routes[("GET", "/props")] = lambda _: (200, {"default_generation_settings": {"n_ctx": 96},
                                                 "model_path": str(tokenizer_dir), "eos_token": "</s>"})
    fake = Fake(routes)
    try:
        dialog = ConnectDialog(None, fake.url, "")
        qtbot.addWidget(dialog)
        _ok(dialog).click()  # nothing named: the server is asked first, and nothing is read yet
        qtbot.waitUntil(lambda: dialog.asking is None and dialog.offered.text().startswith("The llama.cpp"),
                        timeout=60_000)
        assert dialog.result() != QDialog.Accepted and _ok(dialog).isEnabled()
        assert dialog.tokenizer.text() == str(tokenizer_dir)
        assert f"reports its model at {tokenizer_dir}" in dialog.offered.text()
        assert f"will be read from {tokenizer_dir} on this machine" in dialog.offered.text()
        assert {method for method, _, _ in fake.requests} == {"GET"}  # the tokenizer probe comes at connect
        _ok(dialog).click()  # seen: now it is read, named explicitly
        assert dialog.result() == QDialog.Accepted
        assert split_spec(dialog.spec()) == (fake.url, str(tokenizer_dir)) and dialog.named() == ""
        dialog.url.setText("http://127.0.0.1:1")  # another server: the offer no longer holds
        assert dialog.tokenizer.text() == "" and dialog.offered.text() == ""
    finally:
        fake.stop()


def test_connect_dialog_says_when_the_servers_model_path_names_nothing_here(qtbot, tokenizer_dir):
    from PySide6.QtCore import QProcess
    from PySide6.QtWidgets import QDialog

    from gui.dialogs.connect_dialog import ConnectDialog

    fake = Fake(llama_cpp_routes(tokenizer_dir))  # it reports /nowhere/model.gguf
    try:
        dialog = ConnectDialog(None, fake.url, "")
        qtbot.addWidget(dialog)
        _ok(dialog).click()
        qtbot.waitUntil(lambda: dialog.asking is None and dialog.offered.text() != "", timeout=60_000)
        assert dialog.offered.text() == ("The llama.cpp server reports its model at /nowhere/model.gguf, which "
                                         "names no tokenizer on this machine: name the served model's tokenizer.")
        assert dialog.tokenizer.text() == "" and dialog.result() != QDialog.Accepted
        dialog.url.setText("http://127.0.0.1:9")  # nothing listens there
        _ok(dialog).click()
        qtbot.waitUntil(lambda: dialog.asking is None and "cannot reach" in dialog.offered.text(), timeout=60_000)
        assert dialog.offered.text().startswith("cannot reach the server at http://127.0.0.1:9")
        _ok(dialog).click()
        asked = dialog.asking
        dialog.reject()  # Cancel while asking: the asking process ends with the dialog
        assert dialog.asking is None and asked.state() == QProcess.NotRunning
    finally:
        fake.stop()


def test_a_top_p_into_a_capped_servers_tail_is_shown_cut_with_bounds(qtbot, tokenizer_dir, tmp_path):
    """vLLM lists at most its --max-logprobs (20 here): at T 1.3 and top-p 0.95 the nucleus reaches past them.
    The Candidates view says so (the header, a `server cap` stage, the tail bar's words), each bar's tooltip gives
    its p after T within bounds, and Explain says what was cut and why."""
    from fake_servers import vllm_routes

    fake = Fake(vllm_routes(tokenizer_dir, cap=20))
    win = window_on(qtbot, fake, tokenizer_dir, tmp_path)
    c = win.controller
    idle = lambda: not c.busy and not c.running  # noqa: E731
    try:
        qtbot.waitUntil(lambda: c.info is not None, timeout=60_000)
        controls = win.controls
        controls.greedy.setChecked(False)
        controls.temperature.setValue(1.3)
        controls.top_k.setValue(0)
        controls.top_p.setValue(0.95)
        win.controls.prompt.setPlainText("the tin")
        win.actions["prefill"].trigger()
        qtbot.waitUntil(lambda: c.prefilled and idle(), timeout=60_000)
        for n in range(1, 5):  # until a step whose nucleus reached the tail (the fake's steps mostly do)
            win.actions["step"].trigger()
            qtbot.waitUntil(lambda: len(c.steps) == n and idle(), timeout=60_000)
            if c.steps[-1].dist.tail_kept[0] > 0:
                break
        step = c.steps[-1]
        assert step.dist.settings.top_p == 0.95 and step.dist.server.n_top == 20
        removed, low, high = step.dist.tail_kept
        assert 0 < removed and low <= removed <= high
        qtbot.waitUntil(lambda: not c.scheduler.redraw_due, timeout=60_000)
        view = win.views["candidates"]
        view.refresh()
        assert "cut (server cap), drawn among the 20 listed" in view.header.text()
        stages = [label for _, label in view.waterfall.x_ticks]
        assert "server cap" in stages or "cap" in stages  # its symbol where the plot is narrow
        assert step.token.id in step.dist.candidates.ids[:20].tolist()
        tip = view._describe_take(int(step.dist.candidates.ids[0]))
        low_t, high_t = step.dist.candidates.p_temp_bounds[0]
        assert f"between {low_t:.6f} and {high_t:.6f}" in tip and low_t < high_t
        explain = win.views["explain"]
        explain.refresh()
        text = explain.browser.toPlainText()
        assert "Numbers from a server" in text and "server cap" in text and "drawn among the 20 listed" in text
        assert "Without the KV cache" not in text  # that is this process's cache switch, not a server's
        assert f"took {step.dist.server.cached_tokens:,} of them from its prefix cache" in text
        # vLLM reports no parameter count and no weights' bytes: not "0 parameters", "weights 0 B"
        assert c.info.n_params == 0
        for words in (win.status.model.text(), win.views["kv"].projection.text()):
            assert "parameters not reported by the server" in words and " 0 parameters" not in words, words
        assert "weights on the server" in win.status.model.text()
    finally:
        win.close()
        fake.stop()


def test_a_server_that_took_nothing_from_its_cache_is_the_cache_off_lesson(qtbot, tokenizer_dir, tmp_path):
    """A server that re-reads the whole context every step (cache_n 0: contexts below one cache block, or prefix
    caching off): the KV view and Explain say so, in the server's words, not as this process's cache switch."""
    routes = llama_cpp_routes(tokenizer_dir)
    completion = routes[("POST", "/completion")]

    def uncached(body):
        status, reply = completion(body)
        reply["timings"]["cache_n"] = 0
        return status, reply

    routes[("POST", "/completion")] = uncached
    fake = Fake(routes)
    win = window_on(qtbot, fake, tokenizer_dir, tmp_path)
    c = win.controller
    idle = lambda: not c.busy and not c.running  # noqa: E731
    try:
        qtbot.waitUntil(lambda: c.info is not None, timeout=60_000)
        win.controls.prompt.setPlainText("the tin")
        win.actions["prefill"].trigger()
        qtbot.waitUntil(lambda: c.prefilled and idle(), timeout=60_000)
        for n in (1, 2):
            win.actions["step"].trigger()
            qtbot.waitUntil(lambda: len(c.steps) == n and idle(), timeout=60_000)
        kv, explain = win.views["kv"], win.views["explain"]
        kv._force_refresh()
        explain.refresh()
        old = c.steps[-1].context_tokens - 1
        assert f"read all {old} again" in kv.formula.text() and "no cache at work" in kv.formula.text()
        text = explain.browser.toPlainText()
        assert f"took 0 of them from its prefix cache and projected the other {old} again" in text
        assert "Nothing came from its cache" in text and "Without the KV cache" not in text
    finally:
        win.close()
        fake.stop()


def test_a_servers_malformed_reply_is_worded_in_chinese(qtbot, tokenizer_dir, tmp_path):
    """Issue 41 item 4: a server's bad reply reaches the GUI as a code, so Chinese mode words it in Chinese (the
    server's name, the field and the reason are nested codes), English mode as `trace` says it."""
    routes = llama_cpp_routes(tokenizer_dir)
    good = routes[("POST", "/completion")]

    def twice(body):  # the most likely token listed twice: not one distribution's top-N
        status, reply = good(body)
        listed = reply["completion_probabilities"][0]["top_logprobs"]
        return status, {**reply, "completion_probabilities": [{"top_logprobs": [listed[0], *listed]}]}

    routes[("POST", "/completion")] = twice
    fake = Fake(routes)
    errors = []
    win = window_on(qtbot, fake, tokenizer_dir, tmp_path)
    c = win.controller
    c.error.connect(lambda message, details, expected: errors.append((message, expected)))
    try:
        qtbot.waitUntil(lambda: c.info is not None, timeout=60_000)
        win.controls.prompt.setPlainText("the tin")
        for code in ("zh_CN", "en"):
            win.set_language(code)
            win.actions["prefill"].trigger()
            qtbot.waitUntil(lambda: bool(errors) and not c.busy, timeout=60_000)
            message, expected = errors.pop()
            assert expected and not c.prefilled and win.status.state.text() == message
            if code == "zh_CN":
                assert message.startswith(f"{fake.url} 上的 llama-server 在 top_logprobs 中把 Token id ")
                assert message.endswith("列了两次：这不是同一个分布的前 N 个")
            else:
                assert message.startswith(f"llama-server at {fake.url} listed token id ")
                assert message.endswith(" twice in top_logprobs: not one distribution's top-N")
    finally:
        win.set_language("en")
        win.close()
        fake.stop()
