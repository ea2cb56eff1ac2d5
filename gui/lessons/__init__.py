"""Lessons in the GUI: playing scripts and recording them to video."""
