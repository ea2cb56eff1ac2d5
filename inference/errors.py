"""Errors the engine raises on purpose, and the one way every front-end turns an error into one line."""

from __future__ import annotations


class ModelFormatError(ValueError):
    """A model folder or file that cannot be loaded: names the file and the problem."""


class NotReady(RuntimeError):
    """A request the session cannot serve in its present state (no prompt read yet, generation ended)."""


class Cancelled(Exception):
    """Raised from a progress callback to stop a long download or conversion."""


# What bad input raises (a person can act on the message); anything else is a bug in TokenStep.
EXPECTED = (ValueError, OSError, NotReady)


def is_expected(error: BaseException) -> bool:
    return isinstance(error, EXPECTED)


def one_line(error: BaseException) -> str:
    """The message's first line; a bug's is prefixed with its exception type."""
    text = str(error).splitlines()[0] if str(error).strip() else type(error).__name__
    return text if is_expected(error) else f"{type(error).__name__}: {text}"
