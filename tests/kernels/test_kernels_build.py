"""How the decode kernels are built (torch.utils.cpp_extension, for the torch installed) and what a failed build
says: one line with the compiler's first error and where the whole log is kept, then stock ops, in `trace` as in
the app's status bar and Explain."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inference import kernels
from inference.events import STOCK_DECODE
from tiny import make_hf_model, save_hf_model

ROOT = Path(__file__).resolve().parents[2]


def test_first_error_names_the_file_and_line_without_its_folder():
    log = ("[1/2] c++ -MMD -include /tmp/x/broken.h -c /src/inference/kernels/csrc/ops.cpp -o ops.o\n"
           "FAILED: ops.o\n"
           "In file included from <command-line>:\n"
           "/tmp/x/broken.h:1:2: error: #error broken on purpose\n"
           "/src/inference/kernels/csrc/simd.h:9:1: error: a later one\n")
    assert kernels.first_error(log) == "broken.h:1:2: error: #error broken on purpose"
    assert kernels.first_error("c++: error: unrecognized command-line option '-mno-such'\nninja: build stopped\n") \
        == "c++: error: unrecognized command-line option '-mno-such'"
    assert kernels.first_error("ninja: build stopped: subcommand failed.\n") == "ninja: build stopped: subcommand failed."


def _registered_ops() -> list[str]:
    """The ops csrc/ops.cpp registers (its m.def lines), read from the source: no build needed."""
    return re.findall(r'm\.def\("(\w+)\(', (kernels.CSRC / "ops.cpp").read_text())


def test_the_module_docstring_lists_every_registered_op():
    names = _registered_ops()
    assert len(names) == len(set(names)) >= 21
    listed = set(re.findall(r"\b\w+\b", kernels.__doc__))
    assert [name for name in names if name not in listed] == []


def test_ops_cpp_is_the_one_translation_unit_and_includes_every_part():
    """The parts are headers that ops.cpp includes (one translation unit, as the build compiles only ops.cpp);
    only ops.cpp registers ops."""
    assert sorted(p.name for p in kernels.CSRC.glob("*.cpp")) == ["ops.cpp"] and kernels.SOURCE.name == "ops.cpp"
    included = set(re.findall(r'^#include "(\w+\.h)"', kernels.SOURCE.read_text(), re.M))
    assert included == {p.name for p in kernels.CSRC.glob("*.h")}
    for part in kernels.CSRC.glob("*.h"):
        assert "TORCH_LIBRARY" not in part.read_text(), part.name


def test_the_build_key_is_read_from_every_part_of_the_source_folder(tmp_path, monkeypatch):
    """A change to ops.cpp or to any header it includes is a new library; so is a header renamed."""
    folder = tmp_path / "csrc"
    shutil.copytree(kernels.CSRC, folder)
    monkeypatch.setattr(kernels, "CSRC", folder)
    before = kernels._target()
    assert kernels._target() == before
    simd = folder / "simd.h"
    simd.write_text(simd.read_text() + "\n// changed\n")
    changed = kernels._target()
    assert changed != before
    simd.rename(folder / "simd2.h")
    assert kernels._target() not in (before, changed)
    (folder / "notes.txt").write_text("not a source")  # neither .cpp nor .h: not part of the key
    renamed = kernels._target()
    (folder / "notes.txt").write_text("still not a source")
    assert kernels._target() == renamed


@pytest.fixture
def broken_build(tmp_path, monkeypatch):
    """The compiler made to fail for processes started from here: a header with #error forced into the build of
    this CPU's kernels, and a cache of their own (nothing built there yet)."""
    broken = tmp_path / "broken.h"
    broken.write_text("#error broken on purpose\n")
    isa = " ".join(kernels._isa_flags())
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(kernels.FLAGS_ENV, f"{isa} -include {broken}")
    return tmp_path / "cache" / "kernels"


@pytest.mark.kernels
def test_a_failed_build_says_why_in_one_line_and_trace_runs_on_stock_ops(tmp_path, broken_build):
    """`trace` prints one line with the compiler's first error and the log's path, keeps the log, and decodes on
    stock ops, its model event saying so."""
    folder = save_hf_model(make_hf_model("llama"), tmp_path / "tiny")
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--model", str(folder), "--greedy",
                             "--max-new-tokens", "2", "--prompt", "a b"], capture_output=True, text=True,
                            timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "did not build" in line]
    assert len(said) == 1, result.stderr
    line = said[0]
    assert line.startswith(f"[tokenstep] {STOCK_DECODE}: the kernels did not build (broken.h:1:2: error: "
                           "#error broken on purpose; full log: "), line
    log = Path(line.rpartition("full log: ")[2].removesuffix(")"))
    assert log.is_file() and log.parent == broken_build
    assert "#error broken on purpose" in log.read_text() and "-std=c++" in log.read_text()  # cpp_extension's flags
    assert not list(broken_build.glob("*.so"))  # nothing half built is left to load
    events = [json.loads(text) for text in result.stdout.splitlines()]
    model = next(e for e in events if e["type"] == "model")
    assert model["decode_path"] == line.removeprefix("[tokenstep] ")
    assert [e["type"] for e in events].count("step") == 2


@pytest.mark.kernels
def test_the_app_says_the_kernels_did_not_build_in_the_status_bar_and_explain(qtbot, tmp_path, broken_build):
    """The app loads on stock ops while the kernels build in the background; when the build fails, the status
    line says so in short, its tooltip and Explain say why, and steps go on."""
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow
    from gui.theme import Appearance

    folder = save_hf_model(make_hf_model("llama"), tmp_path / "tiny")
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings, appearance=Appearance(), model=str(folder), device="cpu", dtype="float32")
    qtbot.addWidget(win)
    win.resize(1600, 1000)  # the app's size: the model line whole (a narrow window shortens it)
    win.show()
    try:
        c = win.controller
        qtbot.waitUntil(lambda: c.info is not None and "did not build" in c.info.decode_path, timeout=300_000)
        assert c.info.decode_path.startswith(f"{STOCK_DECODE}: the kernels did not build (broken.h:1:2: error: ")
        assert f"decode: {STOCK_DECODE}: the kernels did not build · " in win.status.model.text()
        assert win.status.model.toolTip().endswith(f"\nDecode: {c.info.decode_path}")
        explain = win.views["explain"]
        qtbot.waitUntil(lambda: "did not build" in explain.browser.toPlainText(), timeout=10_000)  # redrawn itself
        assert "the kernels did not build (broken.h:1:2: error: #error broken on purpose" in \
            explain.browser.toPlainText()
        win.controls.prompt.setPlainText("the cat")
        win.prefill()
        qtbot.waitUntil(lambda: c.prefilled and not c.busy, timeout=60_000)
        c.step()
        qtbot.waitUntil(lambda: len(c.steps) == 1 and not c.busy, timeout=60_000)
    finally:
        win.controller.shutdown()
        win.close()


def test_kernel_tests_fail_not_skip_when_the_build_breaks(tmp_path, broken_build):
    """Where the kernels should run, a broken build makes their tests fail, naming the compiler's error."""
    if kernels.unavailable_reason() is not None:
        pytest.skip(f"the decode kernels cannot run here: {kernels.unavailable_reason()}")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
                          str(ROOT / "tests" / "kernels" / "test_kernels.py"), "-k", "test_gemv_f32_matches_matmul"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 1, run.stdout[-3000:]
    summary = run.stdout.splitlines()[-1]
    assert " error" in summary and "skipped" not in summary and " passed" not in summary, summary  # setup fails
    assert "should run here but did not load: the kernels did not build (broken.h:1:2: error:" in run.stdout


def test_a_missing_include_in_the_flags_is_the_compilers_error_not_a_crash(tmp_path, monkeypatch):
    """TOKENSTEP_KERNELS_FLAGS is a test knob: a header it names that does not exist fails the build in one line."""
    if kernels.unavailable_reason() is not None:
        pytest.skip(f"the decode kernels cannot run here: {kernels.unavailable_reason()}")
    missing = tmp_path / "missing.h"
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(kernels.FLAGS_ENV, f"{' '.join(kernels._isa_flags())} -include {missing}")
    run = subprocess.run([sys.executable, "-c", "from inference import kernels; kernels.build_pending(); "
                          "print(kernels.ops() is None, kernels.build_failure())"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    off, failure = run.stdout.strip().split(" ", 1)
    assert off == "True" and "missing.h" in failure and "No such file" in failure, failure
    assert "Traceback" not in run.stderr
