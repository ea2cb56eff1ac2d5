"""The only GUI code that talks to the engine: the worker thread, the controller, redraw pacing."""
