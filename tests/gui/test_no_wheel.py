"""The wheel over Controls scrolls the panel: a slider or spin box it passes changes only once focused."""

from PySide6.QtCore import QPoint, QPointF, QSettings, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea

from app_driver import wait_until


def wheel(widget, notches: int) -> None:
    """`notches` wheel clicks down over the middle of `widget`, as the mouse would send them."""
    at = QPointF(widget.width() / 2, widget.height() / 2)
    event = QWheelEvent(at, widget.mapToGlobal(at), QPoint(), QPoint(0, -120 * notches), Qt.NoButton,
                        Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_controls_past_sliders_until_one_is_focused(qtbot, qapp, tmp_path):
    from gui.main_window import MainWindow
    from gui.theme import Appearance

    win = MainWindow(settings=QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat),
                     appearance=Appearance(), device="cpu", autoload=False)
    qtbot.addWidget(win)
    win.resize(1024, 700)
    win.show()
    wait_until(lambda: win.controls.isVisible())
    controls = win.controls
    area = next(w for w in (controls.parentWidget(), controls.parentWidget().parentWidget())
                if isinstance(w, QScrollArea))
    bar = area.verticalScrollBar()
    area.setFixedHeight(240)  # so that the panel has to scroll whatever the layout
    wait_until(lambda: bar.maximum() > 0)
    bar.setValue(0)
    top_k, temperature = controls.top_k, controls.temperature
    before = (top_k.value(), temperature.value(), controls.seed.value())
    for widget in (top_k.slider, top_k.spin, temperature.slider, controls.seed, controls.when_full):
        assert widget.focusPolicy() == Qt.StrongFocus  # the wheel does not give them focus either
        wheel(widget, 2)
        assert not widget.hasFocus()
    assert (top_k.value(), temperature.value(), controls.seed.value()) == before
    assert bar.value() > 0  # the wheel went to the panel, which scrolled
    win.activateWindow()
    wait_until(win.isActiveWindow)
    top_k.spin.setFocus()
    wait_until(top_k.spin.hasFocus)
    wheel(top_k.spin, 1)
    assert top_k.value() == before[0] - 1  # focused (a click, Tab), it takes the wheel as before
