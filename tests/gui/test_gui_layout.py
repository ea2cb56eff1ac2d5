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
                                   "attention", "lens", "branches", "compare", "serving"]
        default = {key: dock.geometry() for key, dock in win.docks.items() if dock.isVisible()}
        win.docks["timing"].hide()
        win.docks["attention"].show()
        win.docks["stop"].setFloating(True)
        win.reset_layout()
        qtbot.wait(50)
        after = {key: dock.geometry() for key, dock in win.docks.items() if dock.isVisible()}
        assert after.keys() == default.keys() and "attention" not in after and "lens" not in after
        assert "serving" not in after  # shown once requests are served
        assert not win.docks["stop"].isFloating()
    finally:
        win.close()


def _window(qtbot, settings, size=(1600, 1000)):
    win = MainWindow(settings=settings, appearance=Appearance(), autoload=False)
    qtbot.addWidget(win)
    win.resize(*size)
    return win


def test_a_layout_saved_on_another_screen_size_is_not_reused(qtbot, tmp_path):
    """Issue 40 item 14: a layout saved on a small screen came back on a large one (a 600 px Controls column at
    1600x1000), and one from a large screen on a small one. Each is reused only on a screen of about its size."""
    from PySide6.QtCore import QRect

    settings = QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)
    small_screen, large_screen = QRect(0, 0, 1024, 700), QRect(0, 0, 1600, 1000)
    # (closing a window saves its layout for the offscreen screen: each is saved again after it closed)
    small = _window(qtbot, settings, (1010, 652))
    small.docks["stop"].hide()
    small.close()
    small.dock_layout.save(small_screen)
    large = _window(qtbot, settings)
    try:
        assert not large.dock_layout.restore(large_screen)
        assert not large.docks["stop"].isHidden()  # the default's docks
        assert large.dock_layout.restore(QRect(0, 0, 1080, 720))  # about the same size as it was saved on
        assert large.docks["stop"].isHidden()
    finally:
        large.close()
    large.resize(1600, 1000)
    large.dock_layout.save(large_screen)
    again = _window(qtbot, settings)
    try:
        assert not again.dock_layout.restore(small_screen)
        assert again.dock_layout.restore(large_screen) and again.docks["stop"].isHidden()
    finally:
        again.close()


def test_each_arrangement_saves_and_comes_back(qtbot, tmp_path):
    """The compact arrangement (1280x720) is saved as such and restored as such on that screen."""
    from PySide6.QtCore import QRect

    settings = QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat)
    screen = QRect(0, 0, 1280, 720)
    win = _window(qtbot, settings, (1264, 672))
    try:
        win.proportion_docks()
        d = win.docks
        assert win.dock_layout.arrangement == "compact"
        assert d["kv"] in win.tabifiedDockWidgets(d["candidates"])
        assert d["kv"].titleBarWidget() is not None  # a tab names it: no title bar of its own
    finally:
        win.close()
    win.dock_layout.save(screen)
    again = _window(qtbot, settings, (1264, 672))
    try:
        assert again.dock_layout.restore(screen) and again.dock_layout.arrangement == "compact"
        assert again.docks["kv"] in again.tabifiedDockWidgets(again.docks["candidates"])
        again.docks["kv"].setFloating(True)  # a floated dock gets its title bar back
        qtbot.waitUntil(lambda: again.docks["kv"].titleBarWidget() is None, timeout=2000)
    finally:
        again.close()


def test_every_model_action_is_in_the_model_menu_and_none_in_file(qtbot, tmp_path):
    """Issue 40 item 14: opening a model was split between File and Model."""
    win = _window(qtbot, QSettings(str(tmp_path / "tokenstep.ini"), QSettings.IniFormat))
    try:
        menus = {m.text().replace("&", ""): m.menu() for m in win.menuBar().actions()}
        model_keys = ("open_model", "open_folder", "open_gguf", "default_model", "connect_server")
        for key in model_keys:
            assert win.actions[key] in menus["Model"].actions(), key
            assert win.actions[key] not in menus["File"].actions(), key
        assert win.actions["play_script"] in menus["File"].actions()
    finally:
        win.close()


def _contrast(a, b) -> float:
    def luminance(c):
        def channel(v):
            v /= 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(c.red()) + 0.7152 * channel(c.green()) + 0.0722 * channel(c.blue())
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_check_boxes_stand_out_on_the_dark_theme(qtbot):
    """Issue 40 item 14: on the dark theme an unchecked box was all but invisible (Fusion's faint edge). Its
    edge now contrasts with the panel at least 3:1 (WCAG's rule for the parts of a control), checked too."""
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

    appearance = Appearance(dark=True)
    appearance.apply()
    try:
        for checked in (False, True):
            box = QCheckBox("Greedy")
            qtbot.addWidget(box)
            box.setChecked(checked)
            box.show()
            qtbot.waitExposed(box)
            image = box.grab().toImage()
            option = QStyleOptionButton()
            option.initFrom(box)
            indicator = box.style().subElementRect(QStyle.SE_CheckBoxIndicator, option, box)
            background = QColor(appearance.theme.window)
            best = max(_contrast(QColor(image.pixel(x, y)), background)
                       for x in range(indicator.left(), indicator.right() + 1)
                       for y in range(indicator.top(), indicator.bottom() + 1))
            assert best >= 3.0, (checked, best)
    finally:
        Appearance().apply()


def test_a_caption_keeps_to_its_lines_and_its_tooltip_has_the_whole_text(qtbot):
    """The draw's caption wrapped to three lines in a narrow Candidates dock and was drawn over the plot's
    axis: it now shows at most its lines, the last cut with "…", and the whole text as its tooltip."""
    from gui.widgets.wrap_label import CaptionLabel

    caption = CaptionLabel(lines=2)
    qtbot.addWidget(caption)
    text = "50 tokens kept; u = 0.8436 fell in the segment of ·there (rank 8 by logit)."
    caption.setText(text)
    metrics = caption.fontMetrics()
    assert caption.sizeHint().height() == caption.minimumSizeHint().height() == 2 * metrics.lineSpacing()
    wide = caption.shown_lines(metrics.horizontalAdvance(text) + 10)
    assert wide == [text]
    narrow = metrics.horizontalAdvance(text) // 3
    lines = caption.shown_lines(narrow)
    assert len(lines) == 2 and lines[-1].endswith("…")
    assert all(metrics.horizontalAdvance(line) <= narrow for line in lines)
    assert caption.toolTip() == text
