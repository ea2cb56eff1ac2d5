"""The import contracts in pyproject.toml ([tool.importlinter]) hold: import-linter reads every import statement of
inference/ and gui/, those inside functions too."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_are_kept():
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                          "sys.exit(lint_imports_command())"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout and " kept" in run.stdout


def test_a_broken_contract_is_seen(tmp_path):
    """The check can fail: a contract that today's code breaks (inference imports numpy) is reported broken."""
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["inference"]\ninclude_external_packages = true\n\n'
                      '[[tool.importlinter.contracts]]\nname = "no numpy"\ntype = "forbidden"\n'
                      'source_modules = ["inference"]\nforbidden_modules = ["numpy"]\n')
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                          f"sys.exit(lint_imports_command([{str(config)!r}]))"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode != 0 and "BROKEN" in run.stdout
