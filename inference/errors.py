"""Errors the engine raises on purpose. Each carries one line a person can act on."""


class ModelFormatError(ValueError):
    """A model folder or file that cannot be loaded: names the file and the problem."""


class Cancelled(Exception):
    """Raised from a progress callback to stop a long download or conversion."""
