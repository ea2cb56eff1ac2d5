"""The app's words, translatable from Qt-free code: `translate(context, text, disambiguation, n)` looks the text
up through QCoreApplication.translate once gui/language.py installs that hook (the state cannot import Qt), and
is the text itself before. pyside6-lupdate finds `translate("Context", "text")` and
`QT_TRANSLATE_NOOP("Context", "text")` by name, so strings written here or in a view are extracted into
resources/translations/tokenstep_zh_CN.ts like any `tr()` of a widget.

Counts go in as Qt's %n: `translate("StatusBar", "%n token(s)", None, n)` gives "1 token", "2 tokens",
"1,024 tokens" in English and the .ts's "%n 个 Token" in Chinese. (pyside6-lupdate 6.11 marks a Python message
as numerus only when n is a literal, so English plurals cannot come from a plural-forms .qm: "(s)" and "(es)"
are resolved here, in the text the translator returns when it has none.) Other values go in with str.format
after translation (`{name}` placeholders, which a translation keeps)."""

from __future__ import annotations

import re
from typing import Callable

Hook = Callable[[str, str, "str | None"], str]
NumberHook = Callable[[float, int], str]  # (value, decimals) → the digits in the app's locale
_hook: Hook | None = None
_number: NumberHook | None = None
_language = "en"  # the app's language (gui/language.py sets it): widgets size their lines for its script
ENGLISH_PLURAL = re.compile(r"\((e?s)\)")


def set_language(code: str) -> None:
    global _language
    _language = code


def language() -> str:
    return _language


def install(hook: Hook | None) -> None:
    """Look every translate() up through `hook` (context, text, disambiguation → text); None: the source text."""
    global _hook
    _hook = hook


def install_numbers(hook: NumberHook | None) -> None:
    """Write numbers through `hook` (gui/language.py: QLocale of the chosen language); None: Python's "1,234.5"."""
    global _number
    _number = hook


def number(value: float, decimals: int = 0) -> str:
    """A number the user reads, grouped and with the decimal point of the app's locale: 1234.5 → "1,234.5" in
    English and Chinese, "1.234,5" in a German locale. The one way the views write counts, bytes and times."""
    return _number(value, decimals) if _number is not None else f"{value:,.{decimals}f}"


def size(n_bytes: float) -> str:
    """Bytes as the user reads them ("538 MB", "1.2 GB"), the thresholds of inference.messages.human_bytes."""
    # (no f-string around a call here: pyside6-lupdate's Python reader then loses the quotes of the lines after)
    if n_bytes >= 1e9:
        return number(n_bytes / 1e9, 1) + " GB"
    if n_bytes >= 1e6:
        return number(n_bytes / 1e6) + " MB"
    if n_bytes >= 1e3:
        return number(n_bytes / 1e3) + " KB"
    return translate("Format", "{n} bytes").format(n=number(n_bytes))


def translate(context: str, text: str, disambiguation: str | None = None, n: int = -1) -> str:
    out = _hook(context, text, disambiguation) if _hook is not None else text
    if n >= 0:
        out = ENGLISH_PLURAL.sub("" if n == 1 else r"\1", out).replace("%n", number(n))
    return out


def QT_TRANSLATE_NOOP(context: str, text: str, disambiguation: str | None = None) -> str:  # noqa: N802 (Qt's name)
    """Mark a table's text for lupdate (its context names where translate() reads it), unchanged here."""
    return text
