"""benchmarks/ holds scripts, RESULTS.md and results/ only, and RESULTS.md cites every file kept in results/.

Citations, as the paragraph at the top of benchmarks/RESULTS.md defines them:
- in full: `<folder>/<name>.json`, with or without `benchmarks/results/` before it, names
  benchmarks/results/<folder>/<name>.json; a name ending in `_N.json` names a series, no file;
- short: `` `_<id>.json` ``, `` `..._<id>.json` ``, `` `…_<id>.json` ``, `` `_<digits>` ``, or a table row whose
  first cell starts with `_<digits>`, names <folder>/<base>_<id>.json, where <folder>/<name>.json is the nearest
  full citation above it in the same section (a heading ends a section) and <base> is <name> without a trailing
  `_N` or `_<digits>`.
Only git-tracked files count (the results of a run not yet kept, __pycache__, are not part of the layout).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
RESULTS_MD = BENCHMARKS / "RESULTS.md"
TOP_LEVEL = ("RESULTS.md", "results")  # besides the *.py and *.sh scripts
NOT_RESULTS = ("results/__init__.py",)  # the folder's layout in code (--json's default path), not a result

FULL = re.compile(r"(?<![\w./-])(?:benchmarks/results/)?([a-z0-9_]+)/([\w.-]+\.json)")
SHORT = re.compile(r"`(?:\.\.\.|…)?_([A-Za-z0-9]+)\.json`|`_(\d+)`|^\| _(\d+)\b")
SERIES_OR_NUMBER = re.compile(r"_(?:N|\d+)$")


def tracked(under: str) -> list[str]:
    """Git-tracked files under `under` (relative to the repository root); skips the test outside a checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", under], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (or no git): the layout is checked on tracked files only")
    return [name for name in out.split("\0") if name]


def citations(text: str) -> set[str]:
    """results/-relative paths (<folder>/<name>.json) that `text` cites, by the rules in this module's docstring."""
    cited: set[str] = set()
    last: tuple[str, str] | None = None  # (folder, base) of the nearest full citation in this section
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("#") and not fenced:  # a heading: a new section, whose own citations count
            last = None
        events = [(m.start(), "full", m) for m in FULL.finditer(line)]
        events += [(m.start(), "short", m) for m in SHORT.finditer(line)]
        for _, kind, m in sorted(events, key=lambda e: e[0]):
            if kind == "full":
                folder, name = m.group(1), m.group(2)
                stem = name.removesuffix(".json")
                if not stem.endswith("_N"):
                    cited.add(f"{folder}/{name}")
                last = (folder, SERIES_OR_NUMBER.sub("", stem))
            elif last is not None:
                suffix = next(g for g in m.groups() if g is not None)
                cited.add(f"{last[0]}/{last[1]}_{suffix}.json")
    return cited


def kept_results() -> set[str]:
    """results/-relative paths of the tracked files under benchmarks/results/, but for its own code."""
    prefix = "benchmarks/"
    names = {name.removeprefix(prefix) for name in tracked("benchmarks/results")}
    return {name.removeprefix("results/") for name in names - set(NOT_RESULTS)}


def test_top_level_holds_scripts_results_md_and_results_only():
    top = {name.removeprefix("benchmarks/").split("/")[0] for name in tracked("benchmarks")}
    stray = sorted(name for name in top if name not in TOP_LEVEL and not name.endswith((".py", ".sh")))
    assert not stray, f"benchmarks/ holds only *.py / *.sh scripts, RESULTS.md and results/; also: {stray}"


def test_every_kept_result_is_cited():
    uncited = sorted(kept_results() - citations(RESULTS_MD.read_text(encoding="utf-8")))
    assert not uncited, ("benchmarks/RESULTS.md cites none of these (cite each, in full or by the short form "
                         f"its first paragraph defines, or remove it): {uncited}")


def test_every_cited_result_exists():
    missing = sorted(citations(RESULTS_MD.read_text(encoding="utf-8")) - kept_results())
    assert not missing, f"benchmarks/RESULTS.md cites files that benchmarks/results/ does not hold: {missing}"


def test_citation_rules():
    text = "\n".join([
        "## A", "`benchmarks/results/decode/avx2_2026-12-05_N.json`:", "| _8, 08:38 | x |", "and `_9`",
        "`gui_probe/amd_2026-12-04_night.json` and `..._2.json`, `…_3.json`",
        "```", "# a comment in a command, no heading", "```", "| _4 | y |",
        "## B (`host/amd_2026-12-04.json`)", "| _6 | w |", "## C", "| _5, no full citation in this section | z |", "`_MM_HINT_T1` is not a citation",
        "<machine>_<date>.json: `benchmarks/results/decode/<machine>_<date>.json` is no file either",
    ])
    assert citations(text) == {"decode/avx2_2026-12-05_8.json", "decode/avx2_2026-12-05_9.json",
                               "gui_probe/amd_2026-12-04_night.json", "gui_probe/amd_2026-12-04_night_2.json",
                               "gui_probe/amd_2026-12-04_night_3.json", "gui_probe/amd_2026-12-04_night_4.json",
                               "host/amd_2026-12-04.json", "host/amd_2026-12-04_6.json"}
