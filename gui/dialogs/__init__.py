"""Dialogs: the model picker, the loader, connecting to a server."""
