"""The architecture's boundaries hold: the import contracts in pyproject.toml ([tool.importlinter]: what may import
what, the layers, no cycles) are kept, and no import inside a function hides an edge from them."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command({}))"


def lint(config: Path | None = None) -> subprocess.CompletedProcess:
    args = "" if config is None else f"[{str(config)!r}]"
    return subprocess.run([sys.executable, "-c", LINT.format(args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_the_import_contracts_are_kept():
    run = lint()
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout and " kept" in run.stdout


def test_a_broken_contract_is_seen(tmp_path):
    """The check can fail: a contract that today's code breaks (inference imports numpy) is reported broken."""
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["inference"]\ninclude_external_packages = true\n\n'
                      '[[tool.importlinter.contracts]]\nname = "no numpy"\ntype = "forbidden"\n'
                      'source_modules = ["inference"]\nforbidden_modules = ["numpy"]\n')
    run = lint(config)
    assert run.returncode != 0 and "BROKEN" in run.stdout


def imports_inside_functions(source: str) -> list[tuple[int, str]]:
    """(line, text) of every import statement inside a function that is not marked `# lazy: <why>`: an optional
    heavy dependency loaded only when needed is fine, said so; an edge hidden from the contracts is not."""
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    text = "\n".join(lines[node.lineno - 1:node.end_lineno])
                    if "# lazy: " not in text:
                        found.append((node.lineno, text.strip()))
    return found


def test_no_import_hides_inside_a_function():
    hidden = [f"{path.relative_to(ROOT)}:{line}: {text}"
              for folder in ("inference", "gui") for path in sorted((ROOT / folder).rglob("*.py"))
              for line, text in imports_inside_functions(path.read_text(encoding="utf-8"))]
    assert not hidden, "\n".join(hidden)


def test_the_scan_sees_an_import_inside_a_function():
    source = "import os\n\ndef f():\n    import json\n    import av  # lazy: video export only\n    return json\n"
    assert imports_inside_functions(source) == [(4, "import json")]
