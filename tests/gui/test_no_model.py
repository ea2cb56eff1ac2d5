"""The app after a failed start: Explain and Controls say what to do, the buttons are greyed, and an empty
plot draws no axes; the axes come with the data once a model is loaded and a prompt read (tiny model)."""

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QSettings

from app_driver import prefill, wait_until
from gui.widgets.bar_chart import BarChart
from tiny import make_hf_model, save_hf_model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=11), tmp_path_factory.mktemp("no_model"))


def plots(win) -> list:
    """The pyqtgraph plots and the painted bar charts."""
    return [p for view in win.views.values() for kind in (pg.PlotWidget, BarChart) for p in view.findChildren(kind)]


def axes_shown(plot) -> bool:
    if isinstance(plot, BarChart):
        return plot.axes_shown()
    item = plot.getPlotItem()
    return item.getAxis("bottom").isVisible()


def test_a_failed_start_says_what_to_do_and_draws_no_empty_axes(qtbot, qapp, tmp_path, folder):
    from gui.main_window import MainWindow
    from gui.theme import Appearance

    win = MainWindow(settings=QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat),
                     appearance=Appearance(), device="cpu", model=str(tmp_path / "no such model"))
    qtbot.addWidget(win)
    win.resize(1280, 720)
    win.show()
    c = win.controller
    wait_until(lambda: not c.loading and win.status.state.text().startswith("Could not load"))
    explain = win.views["explain"].browser.toPlainText()
    assert "No model is loaded" in explain and "Loading the model" not in explain
    assert "Model → Open…" in explain
    assert win.controls.prompt_state.text().startswith("No model is loaded: open one with Model → Open…")
    assert not any(win.actions[k].isEnabled() for k in ("prefill", "step", "run", "reset"))
    for view in win.views.values():  # hidden docks draw when shown: show each, as a person would look
        view.show()
    qapp.processEvents()
    empty = plots(win)
    assert len(empty) >= 5 and not any(axes_shown(p) for p in empty)
    if win.loader.error_box is not None:
        win.loader.error_box.close()

    win.loader.load(str(folder))
    wait_until(lambda: c.info is not None and not c.loading)
    assert "No model is loaded" not in win.views["explain"].browser.toPlainText()
    assert win.controls.prompt_state.text() == ""
    prefill(win, "the cat")
    kv = win.views["kv"]
    kv.show()
    win.controller.scheduler.redraw_now(force=True)
    qapp.processEvents()
    assert axes_shown(kv.growth) and axes_shown(kv.layers)  # data: the axes are back
    win.close()
