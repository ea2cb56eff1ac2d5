"""The app's language: English or 简体中文 through Qt's translation system.

The strings are extracted by pyside6-lupdate into resources/translations/tokenstep_zh_CN.ts and compiled by
pyside6-lrelease into tokenstep_zh_CN.qm next to it (English is the source: no translator). The .qm is
committed (tests/gui/test_translation.py checks it is what lrelease makes of the .ts):
the app then runs from a checkout or an install without a build step, and both tools come with
PySide6-Essentials for whoever edits a translation. Switching installs the other QTranslator: Qt sends every
widget a LanguageChange event and each one words its texts again (`retranslate`)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QTranslator
from PySide6.QtGui import QFontDatabase

from gui.state import i18n

TRANSLATIONS = Path(__file__).resolve().parent.parent / "resources" / "translations"
LANGUAGES = {"en": "English", "zh_CN": "简体中文"}  # each named in its own language, in the menu
ALIASES = {"zh": "zh_CN", "zh-cn": "zh_CN", "zh_cn": "zh_CN", "zh-hans": "zh_CN", "en_us": "en", "en-us": "en"}

# The Qt-free state's and the views' words, looked up in the installed translators
i18n.install(lambda context, text, disambiguation: QCoreApplication.translate(context, text, disambiguation))

_installed: list[QTranslator] = []
_current = "en"
number_locale = QLocale(QLocale.English, QLocale.UnitedStates)  # the chosen language's digits (set_language)


def locale_number(value: float, decimals: int = 0) -> str:
    """`value` as number_locale writes it: its group separator and decimal point ("1,234.5"; German "1.234,5")."""
    return number_locale.toString(float(value), "f", decimals)


i18n.install_numbers(locale_number)  # every i18n.number() of the views and the state goes through QLocale


def normalise(code: str | None) -> str | None:
    """ "zh_CN" / "zh" / "zh-Hans" → "zh_CN", "en" / "en_US" → "en"; None for a language the app does not have."""
    if not code:
        return None
    code = ALIASES.get(code.lower(), code)
    return code if code in LANGUAGES else None


def system_language() -> str:
    """The system locale's language where the app has it (a Chinese desktop gets 简体中文), else English."""
    locale = QLocale.system()
    return "zh_CN" if locale.language() == QLocale.Chinese and locale.script() != QLocale.TraditionalChineseScript \
        else "en"


def current() -> str:
    return _current


def set_language(code: str) -> str:
    """Install the translators of this language (the app's, and Qt's own for its dialogs' buttons) in place of
    the previous ones; returns the language set. Qt then sends LanguageChange to every widget."""
    global _current
    code = normalise(code) or "en"
    app = QCoreApplication.instance()
    for old in _installed:
        app.removeTranslator(old)
        old.deleteLater()
    _installed.clear()
    for name, folder in ((f"tokenstep_{code}", str(TRANSLATIONS)),
                         (f"qtbase_{code}", QLibraryInfo.path(QLibraryInfo.TranslationsPath))):
        translator = QTranslator(app)
        if translator.load(name, folder):
            app.installTranslator(translator)
            _installed.append(translator)
    global number_locale
    _current = code
    number_locale = QLocale(code)
    i18n.set_language(code)
    return code


# Said in English on purpose: without a Chinese font, Chinese words would be drawn as boxes.
NO_CHINESE_FONT = ("No font for Chinese characters is installed, so Chinese text shows as boxes: install one "
                   "(Debian/Ubuntu: sudo apt install fonts-noto-cjk) and start TokenStep again.")


def has_chinese_font() -> bool:
    """Whether any installed font draws Simplified Chinese (a bare Linux without fonts-noto-cjk has none)."""
    return bool(QFontDatabase.families(QFontDatabase.WritingSystem.SimplifiedChinese))
