"""Light and dark themes, and presentation mode (bigger type, thicker bars, more contrast).

Views read colours and sizes from the one `Appearance` object and redraw when it changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication

STYLES = Path(__file__).resolve().parent.parent / "resources" / "styles"


@dataclass(frozen=True)
class Theme:
    name: str
    window: str
    panel: str
    text: str
    muted: str
    grid: str
    prompt_chip: str
    generated_chip: str
    special_chip: str
    newest: str
    selected: str
    raw: str
    temp: str
    final: str
    chosen: str
    removed: str
    kept: str
    accent: str
    warning: str
    # Candidates' three stages: raw p grey, after temperature violet, final p a saturated blue, in every
    # theme (two near blues read as one, and they swapped between light and dark)


LIGHT = Theme(
    name="light", window="#f5f6f8", panel="#ffffff", text="#1d2330", muted="#667085", grid="#d0d5dd",
    prompt_chip="#e4e9f2", generated_chip="#d9f2e3", special_chip="#efe3fb", newest="#f79009",
    selected="#2e90fa", raw="#98a2b3", temp="#9e77ed", final="#1570ef", chosen="#f04438",
    removed="#fda29b", kept="#32d583", accent="#7a5af8", warning="#dc6803")

DARK = Theme(
    name="dark", window="#161a22", panel="#1e232d", text="#e6e9ef", muted="#98a2b3", grid="#344054",
    prompt_chip="#2c3444", generated_chip="#1f4d36", special_chip="#45325f", newest="#fdb022",
    selected="#53b1fd", raw="#667085", temp="#b692f6", final="#2e90fa", chosen="#f97066",
    removed="#b42318", kept="#12b76a", accent="#9b8afb", warning="#fdb022")


# One colour per served request (the Serving dock's rows and blocks): mid-tone hues that read on the light and
# the dark panel alike, neighbours far apart on the wheel; request i takes REQUEST_COLOURS[i % 16].
REQUEST_COLOURS = ("#2e90fa", "#f79009", "#12b76a", "#ee46bc", "#7a5af8", "#f04438", "#06aed4", "#a15c07",
                   "#66c61c", "#dd2590", "#4e5ba6", "#e04f16", "#0e9384", "#b692f6", "#ca8504", "#98a2b3")


def request_colour(index: int) -> str:
    return REQUEST_COLOURS[index % len(REQUEST_COLOURS)]


def _high_contrast(t: Theme) -> Theme:
    if t.name == "light":
        return replace(t, text="#000000", muted="#344054", grid="#98a2b3", raw="#667085", temp="#7f56d9",
                       final="#0040c1", chosen="#d92d20")
    return replace(t, text="#ffffff", muted="#d0d5dd", grid="#475467", raw="#98a2b3", temp="#d6bbfb",
                   final="#53b1fd", chosen="#ff6b5e")


class Appearance(QObject):
    """The current theme and presentation mode; `changed` fires when either changes."""

    changed = Signal()

    def __init__(self, dark: bool = False, presentation: bool = False):
        super().__init__()
        self.dark = dark
        self.presentation = presentation
        self._base_point_size = QApplication.font().pointSizeF() if QApplication.instance() else 10.0

    @property
    def theme(self) -> Theme:
        t = DARK if self.dark else LIGHT
        return _high_contrast(t) if self.presentation else t

    @property
    def scale(self) -> float:
        """Type and line sizes grow by this factor in presentation mode."""
        return 1.3 if self.presentation else 1.0

    def font(self, relative: float = 1.0, bold: bool = False, mono: bool = False) -> QFont:
        font = QFont("DejaVu Sans Mono" if mono else QApplication.font().family())
        font.setPointSizeF(max(6.0, self._base_point_size * relative * self.scale))
        font.setBold(bold)
        return font

    def bar_width(self, base: float) -> float:
        return base * (1.25 if self.presentation else 1.0)

    def set_dark(self, dark: bool) -> None:
        if dark != self.dark:
            self.dark = dark
            self.apply()

    def set_presentation(self, on: bool) -> None:
        if on != self.presentation:
            self.presentation = on
            self.apply()

    def apply(self) -> None:
        """Push the palette, style sheet and font into the application, then tell the views."""
        app = QApplication.instance()
        t = self.theme
        palette = QPalette()
        for role, colour in ((QPalette.Window, t.window), (QPalette.Base, t.panel),
                             (QPalette.AlternateBase, t.window), (QPalette.Text, t.text),
                             (QPalette.WindowText, t.text), (QPalette.Button, t.panel),
                             (QPalette.ButtonText, t.text), (QPalette.ToolTipBase, t.panel),
                             (QPalette.ToolTipText, t.text), (QPalette.Highlight, t.selected),
                             (QPalette.HighlightedText, "#ffffff"), (QPalette.PlaceholderText, t.muted)):
            palette.setColor(role, QColor(colour))
        palette.setColor(QPalette.Disabled, QPalette.Text, QColor(t.muted))
        palette.setColor(QPalette.Disabled, QPalette.ButtonText, QColor(t.muted))
        palette.setColor(QPalette.Disabled, QPalette.WindowText, QColor(t.muted))
        app.setPalette(palette)
        font = app.font()
        font.setPointSizeF(self._base_point_size * self.scale)
        app.setFont(font)
        sheet = (STYLES / "app.qss").read_text(encoding="utf-8")
        sheet = sheet.replace("@styles", STYLES.as_posix()).replace("@indicator", f"{round(14 * self.scale)}px")
        for key, value in t.__dict__.items():
            sheet = sheet.replace("@" + key, value)
        app.setStyleSheet(sheet)
        self.changed.emit()
