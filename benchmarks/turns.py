"""Two trees side by side in one run: this one and a reference commit checked out in a temporary worktree, each in a
process of its own, taking turns (frame_ab.py, pass_ab.py). These machines drift by 10-30 % within a minute; taking
turns, both trees see the same drift, and the ratio holds where the absolute figures do not.

A script runs both sides with `run(__file__, ref, options)`: each side is `script options --child TREE ROLE OTHER
TURN` in its tree. A side sets itself up, says it is `ready()` (the turns start once both are: a model loading beside
a turn would be in its figures), measures at each turn of `Side.turns(n)`, and prints its report as JSON on its last
line, which `run` returns.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("this", "reference")


def child_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--child", nargs=4, metavar=("TREE", "ROLE", "OTHER", "TURN"), help=argparse.SUPPRESS)


class Side:
    """One side's part in the turns: `--child`'s TREE ROLE OTHER TURN."""

    def __init__(self, tree: str, role: str, other: str, turn: str):
        self.tree, self.role, self.other, self.turn = tree, role, other, Path(turn)

    def ready(self) -> None:
        Path(f"{self.turn}.{self.role}").touch()

    def turns(self, n: int):
        """Yields at each of this side's n turns, the other side waiting meanwhile; hands the turn over after each."""
        for i in range(n):
            while self.turn.read_text().strip() != self.role:
                time.sleep(0.005)
            yield i
            self.turn.write_text(self.other)


def run(script: str, ref: str, options: list[str]) -> dict[str, dict]:
    """{"this": report, "reference": report}: `script options --child ...` in this tree and in a worktree of `ref`."""
    temporary = Path(tempfile.mkdtemp())
    reference = temporary / "reference"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(reference), ref], check=True,
                   capture_output=True)
    turn = temporary / "turn"
    turn.write_text("")
    try:
        trees = {"this": str(ROOT), "reference": str(reference)}
        procs = {name: subprocess.Popen(
            [sys.executable, script, *options, "--child", tree, name, SIDES[name == "this"], str(turn)],
            stdout=subprocess.PIPE, text=True, cwd=tree) for name, tree in trees.items()}
        while not all(Path(f"{turn}.{name}").exists() for name in trees):
            if any(proc.poll() is not None for proc in procs.values()):
                break  # a side ended before it was ready: its return code says so below
            time.sleep(0.1)
        turn.write_text("this")
        out = {}
        for name, proc in procs.items():
            stdout, _ = proc.communicate(timeout=3600)
            if proc.returncode:
                raise SystemExit(f"{name} failed ({proc.returncode})")
            out[name] = json.loads(stdout.strip().splitlines()[-1])
        return out
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(reference)], capture_output=True)
