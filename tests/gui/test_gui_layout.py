"""The window's parts without a model: the action table, the shared formatting, and the dock layout."""

from PySide6.QtCore import QSettings

from gui.actions import ACTIONS, HELP_ORDER
from gui.main_window import MainWindow
from gui.theme import Appearance
from gui.state.format import display, fmt_bytes, fmt_count


def test_no_two_actions_share_a_key_and_the_help_lists_only_keyed_ones():
    keys = [k for spec in ACTIONS.values() for k in spec.shortcuts]
    assert len(keys) == len(set(keys))
    assert all(ACTIONS[key].shortcuts for key in HELP_ORDER)


def test_shared_formatting():
    assert fmt_bytes(2_500_000) == "2.50 MB" and fmt_bytes(538_000_000) == "538 MB" and fmt_bytes(12) == "12 B"
    assert fmt_count(134_515_008) == "134.5 M" and fmt_count(999) == "999"
    assert display(" Paris\n") == "·Paris↵" and display("") == "∅"


def test_reset_layout_gives_back_the_default_docks(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings, appearance=Appearance(), autoload=False)
    qtbot.addWidget(win)
    try:
        win.resize(1600, 1000)
        win.show()
        assert list(win.docks) == ["controls", "context", "candidates", "kv", "stop", "timing", "explain",
                                   "attention", "lens", "branches", "compare"]
        default = {key: dock.geometry() for key, dock in win.docks.items() if dock.isVisible()}
        win.docks["timing"].hide()
        win.docks["attention"].show()
        win.docks["stop"].setFloating(True)
        win.reset_layout()
        qtbot.wait(50)
        after = {key: dock.geometry() for key, dock in win.docks.items() if dock.isVisible()}
        assert after.keys() == default.keys() and "attention" not in after and "lens" not in after
        assert not win.docks["stop"].isFloating()
    finally:
        win.close()
