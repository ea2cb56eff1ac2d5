"""Text and number formatting that more than one view (and the status bar) uses, so they all agree."""

from __future__ import annotations


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}" if n / size < 100 else f"{n / size:,.0f} {unit}"
    return f"{n:,.0f} B"


def fmt_count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(int(n))


def display(piece: str) -> str:
    """A token's text with its whitespace made visible, so that " Paris" reads as one token with its space."""
    shown = piece.replace(" ", "·").replace("\t", "→").replace("\r", "").replace("\n", "↵")
    return shown or "∅"
