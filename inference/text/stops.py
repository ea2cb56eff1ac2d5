"""Stop strings: how much of each one the generated text ends with, and the first one it contains."""

from __future__ import annotations


def match_stop_strings(text: str, stop_strings) -> tuple[tuple[int, ...], str | None]:
    """Per stop string, how many of its characters end `text` now (all of them once it is found); and
    the stop string found earliest in `text` (None when none is)."""
    progress, matched, first = [], None, len(text) + 1
    for s in stop_strings:
        at = text.find(s)
        if at >= 0 and at < first:
            matched, first = s, at
        progress.append(len(s) if at >= 0 else max(
            (n for n in range(len(s) - 1, 0, -1) if text.endswith(s[:n])), default=0))
    return tuple(progress), matched
