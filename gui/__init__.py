"""The PySide6 desktop app: Qt only, consuming the inference session's events."""
