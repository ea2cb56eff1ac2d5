"""The engine process and the typed protocol the GUI talks to it by."""
