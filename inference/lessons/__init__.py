"""Lesson scripts and the trace writer (main.py trace)."""
