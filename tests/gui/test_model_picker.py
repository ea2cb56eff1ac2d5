"""Model → Open… on the fake hub cache of test_catalog: the list, the greyed unsupported rows, the memory
check, and opening the tiny Llama through the app's loader, which then lists it as recent."""

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtGui import QKeySequence, QPalette

from app_driver import wait_until
from inference import cache_dir, host
from inference.store import memory
from inference.store.model_settings import ModelSettings
from fake_model_dirs import fake_models  # noqa: F401 - a module fixture, shared with test_catalog


SCREENSHOT = "/tmp/picker.png"


@pytest.fixture
def window(qapp, fake_models, monkeypatch, tmp_path):
    from gui.main_window import MainWindow
    from gui.theme import Appearance

    # The real user cache stays (it holds the compiled kernels); hub, home and config are the fakes.
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(cache_dir.cache_root()))
    monkeypatch.setenv("HF_HUB_CACHE", str(fake_models["hub"]))
    monkeypatch.setenv("HOME", str(fake_models["home"]))
    monkeypatch.setenv("TOKENSTEP_CONFIG_DIR", str(tmp_path / "config"))
    settings = QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings, appearance=Appearance(), device="cpu", autoload=False)
    win.resize(1200, 800)
    win.show()
    yield win
    win.close()
    assert win.controller.thread.isFinished()


def rows(picker):
    """Display name -> the row's items, in the table's order."""
    model = picker.model
    return {model.item(r, 0).text(): [model.item(r, c) for c in range(model.columnCount())]
            for r in range(model.rowCount())}


def test_the_picker_lists_greys_checks_memory_and_opens(qtbot, window, fake_models, monkeypatch):
    action = window.actions["open_model"]
    assert action.shortcut() == QKeySequence("Ctrl+O")
    assert action in window.menuBar().actions()[2].menu().actions()  # Model → Open…
    picker = window.open_model_picker()
    wait_until(lambda: not picker.scanning and picker.entries)
    found = rows(picker)
    assert {"tiny/llama", "acme/nope", "acme/broken", "acme/partial",
            "lmstudio-community/tiny/tiny-copy.gguf"} <= set(found)
    grey = picker.palette().color(QPalette.Disabled, QPalette.Text)
    nope = found["acme/nope"]
    assert [i.text() for i in nope[1:6]] == ["nope", "44", "2,048", nope[4].text(),
                                             "no: unsupported architecture 'NopeForCausalLM'"]
    assert all(i.foreground().color() == grey for i in nope)
    assert "unsupported architecture 'NopeForCausalLM'" in nope[0].toolTip()
    assert found["tiny/llama"][5].text() == "yes" and found["tiny/llama"][0].foreground().color() != grey

    picker.filter.setText("NOPE")
    assert picker.proxy.rowCount() == 1 and picker.selected().name == "acme/nope"
    assert not picker.open_button.isEnabled()
    assert "unsupported architecture" in picker.open_button.toolTip()
    assert "unsupported architecture" in picker.reason_label.text()
    picker.filter.clear()

    assert picker.select(str(fake_models["llama"]))
    assert picker.open_button.isEnabled(), (picker.open_button.toolTip(), picker.selected())
    assert "free RAM" in picker.memory_label.text()
    with monkeypatch.context() as patch:
        patch.setattr(memory, "mem_available", lambda path=host.MEMINFO: 1000)
        picker.select(str(fake_models["nope"]))
        picker.select(str(fake_models["llama"]))
        assert not picker.open_button.isEnabled()
        assert picker.open_button.toolTip().startswith("Not enough memory for tiny/llama")
        assert not picker.open_selected()
    picker.select(str(fake_models["nope"]))
    picker.select(str(fake_models["llama"]))
    assert picker.open_button.isEnabled()
    picker.grab().save(SCREENSHOT)

    picker.open_button.click()
    wait_until(lambda: window.controller.info is not None and not window.controller.loading)
    assert window.controller.info.name == "tiny/llama"
    assert window.windowTitle() == "TokenStep — tiny/llama"
    recent = ModelSettings.load().recent
    assert [r.spec for r in recent] == [str(fake_models["llama"])]


def test_add_folder_and_open_file_that_cannot_be_opened(qtbot, window, fake_models):
    picker = window.open_model_picker()
    wait_until(lambda: not picker.scanning and picker.entries)
    assert "publisher/repo/tiny-llama.gguf" not in rows(picker)
    picker.add_folder(str(fake_models["ggufs"]))
    wait_until(lambda: not picker.scanning)
    found = rows(picker)
    assert found["publisher/repo/tiny-llama.gguf"][5].text() == "yes"
    assert found["publisher/repo/tiny-llama.gguf"][6].text() == "folder"
    assert ModelSettings.load().folders == [str(fake_models["ggufs"])]
    mamba = fake_models["ggufs"] / "mamba.gguf"
    assert not picker.open_file(str(mamba))
    assert picker.isVisible() and picker.selected().path == str(mamba)
    assert "GGUF architecture 'mamba' is not supported" in picker.reason_label.text()
    assert window.controller.info is None and not window.controller.loading
    picker.reject()


def test_the_buttons_ask_for_a_path_and_use_it(qtbot, window, fake_models, monkeypatch):
    """Open file… and Add folder… as clicked: clicked(bool) must not arrive as the path; the dialog's answer is used."""
    from gui.dialogs import model_picker

    picker = window.open_model_picker()
    wait_until(lambda: not picker.scanning and picker.entries)
    asked = []
    monkeypatch.setattr(model_picker.QFileDialog, "getExistingDirectory",
                        lambda *a, **k: asked.append("folder") or str(fake_models["ggufs"]))
    mamba = fake_models["ggufs"] / "mamba.gguf"
    monkeypatch.setattr(model_picker.QFileDialog, "getOpenFileName",
                        lambda *a, **k: asked.append("file") or (str(mamba), ""))
    picker.add_folder_button.click()
    wait_until(lambda: not picker.scanning)
    assert asked == ["folder"] and ModelSettings.load().folders == [str(fake_models["ggufs"])]
    assert "publisher/repo/tiny-llama.gguf" in rows(picker)
    assert picker.status.text().startswith(f"{len(picker.entries)} models found")
    picker.open_file_button.click()
    assert asked == ["folder", "file"] and picker.selected().path == str(mamba)
    assert "GGUF architecture 'mamba' is not supported" in picker.reason_label.text()
    picker.set_entries(picker.entries[:1])
    assert picker.status.text().startswith("1 model found,")
    picker.reject()


def test_the_pickers_reasons_and_memory_in_chinese(qtbot, window, fake_models, monkeypatch):
    """The catalog's reasons and the memory estimate come as codes (inference.messages) and read in Chinese."""
    window.set_language("zh_CN")
    try:
        picker = window.open_model_picker()
        wait_until(lambda: not picker.scanning and picker.entries)
        nope = rows(picker)["acme/nope"]
        assert nope[5].text() == "否：不支持的架构 'NopeForCausalLM'"  # the column: without the supported list
        assert "不支持的架构 'NopeForCausalLM'（支持：" in nope[0].toolTip()
        assert picker.select(str(fake_models["nope"]))
        assert "不支持的架构 'NopeForCausalLM'" in picker.reason_label.text()
        picker.resize(1100, 560)
        picker.grab().save("/tmp/picker_zh.png")
        with monkeypatch.context() as patch:
            patch.setattr(memory, "mem_available", lambda path=host.MEMINFO: 1000)
            picker.select(str(fake_models["llama"]))
            assert picker.open_button.toolTip().startswith("内存不足，无法以 float32 加载 tiny/llama")
            assert "可用内存 1 KB" in picker.memory_label.text()
            picker.grab().save("/tmp/picker_zh_memory.png")
        picker.reject()
    finally:
        window.set_language("en")
