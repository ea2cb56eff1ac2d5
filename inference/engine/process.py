"""The engine process's entry point, free of torch: what the GUI's worker hands to multiprocessing's spawn.

The spawned child resolves the engine's module from a string, so the GUI process, which pickles this
function by reference, never imports the engine (torch, the session, the loader).
"""

from __future__ import annotations

import importlib

ENGINE_MODULE = "inference.engine.engine"


def run_engine(commands, replies, niceness: int = 0) -> None:
    """Serve `commands` in this (child) process until Quit; see `inference.engine.engine.serve`."""
    # The process boundary, on purpose: a string import, which the import-linter contracts cannot follow,
    # so that only the child loads torch.
    importlib.import_module(ENGINE_MODULE).serve(commands, replies, niceness)
