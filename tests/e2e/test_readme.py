"""The README's two commands are what CI and users run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_has_two_one_line_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```[^\n]*\n(.*?)```", readme, flags=re.S)
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) == 1 for b in blocks)
    run, test = (b.strip() for b in blocks)
    assert run.endswith("python main.py") and "pytest" in test
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in ci
