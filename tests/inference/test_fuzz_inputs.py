"""Hostile model files (mutated GGUF headers, safetensors headers and values, config.json fields) never
hang, never allocate without bound, and fail, if at all, with one expected error whose message names the
file. In process, each case under an alarm (CASE_SECONDS), an address-space cap (CASE_BYTES above what
the process has mapped) and a check of its peak RSS growth (VmHWM, reset before each case). The
subprocess corpus over every kind of input, the CLI included, is fuzz_corpus.py."""

from __future__ import annotations

import contextlib
import json
import math
import resource
import shutil
import signal
import tempfile
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fuzz_mutations as fm
from inference.errors import is_expected
from inference.store.gguf.convert import convert
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

CASE_SECONDS = 20
CASE_BYTES = 1536 << 20  # address space a case may add (an allocation beyond fails, and is reported)
RSS_GROWTH = 500 << 20  # peak RSS a case may add


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


@contextlib.contextmanager
def _bounded():
    """An alarm and an address-space cap for one case; its peak RSS growth checked after."""
    def expire(signum, frame):
        raise TimeoutError(f"case ran past {CASE_SECONDS} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _status("VmSize") + CASE_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    before = _status("VmRSS")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(CASE_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    grown = _status("VmHWM") - before
    assert grown < RSS_GROWTH, f"peak RSS grew by {grown >> 20} MB"


def _outcome(case: str, run, names: tuple[str, ...]) -> str:
    """Run one case: 'ok', or the expected error's message, which must name one of `names`."""
    try:
        with _bounded():
            run()
        return "ok"
    except MemoryError:
        pytest.fail(f"{case}: allocated beyond {CASE_BYTES >> 20} MB\n{traceback.format_exc()}")
    except TimeoutError:
        pytest.fail(f"{case}: ran past {CASE_SECONDS} s\n{traceback.format_exc()}")
    except Exception as e:  # noqa: BLE001 - classified here
        if not is_expected(e):
            pytest.fail(f"{case}: unexpected {type(e).__name__}: {e}\n{traceback.format_exc()}")
        line = str(e).splitlines()[0] if str(e).strip() else ""
        assert any(name in line for name in names), f"{case}: {line!r} names none of {names}"
        return line


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(HF folder, GGUF bytes, its header fields) of a tiny Llama."""
    from gguf_writer import write_gguf

    root = tmp_path_factory.mktemp("fuzz")
    hf = make_hf_model("llama", seed=3)
    folder = save_hf_model(hf, root / "hf")
    data = write_gguf(hf, folder, root / "tiny.gguf").read_bytes()
    return _Tiny((folder, data, fm.gguf_fields(data)))


class _Tiny(tuple):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing case: not 1 MB of bytes
        return "tiny(folder, gguf bytes, fields)"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))


def _copy(folder: Path, into: Path) -> Path:
    return Path(shutil.copytree(folder, into / "model"))


@settings(max_examples=60, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_gguf_headers(tiny, data):
    _, original, spots = tiny
    if data.draw(st.booleans(), "truncate"):
        fraction = data.draw(st.floats(0.0, 0.999), "fraction")
        mutated, case = fm.truncate(original, fraction), f"truncated at {fraction:.3f}"
    else:
        spot = data.draw(st.sampled_from(spots), "spot")
        value = data.draw(st.sampled_from(fm.HOSTILE[spot.fmt]), "value")
        mutated, case = fm.overwrite(original, spot, value), f"{spot.what} = {value!r}"
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "mutant.gguf", Path(tmp) / "out"
        path.write_bytes(mutated)
        out.mkdir()

        def run():
            convert(path, out)
            load_model(out, device="cpu")

        _outcome(case, run, (path.name, str(out)))


@settings(max_examples=40)
@given(st.data())
def test_mutated_safetensors(tiny, data):
    folder, _, _ = tiny
    original = (folder / "model.safetensors").read_bytes()
    kind = data.draw(st.sampled_from(["field", "length", "poison", "truncate"]), "kind")
    if kind == "field":
        field = data.draw(st.sampled_from(sorted(fm.SAFETENSORS_FIELDS)), "field")
        value = data.draw(st.sampled_from(fm.SAFETENSORS_FIELDS[field]), "value")
        mutated = fm.mutate_safetensors(original, data.draw(st.integers(0, 30), "tensor"), field, value)
    elif kind == "length":
        mutated = fm.safetensors_length(original, data.draw(st.sampled_from([0, 1, 7, 2**31, 2**63, len(original)]
                                                                            ), "length"))
    elif kind == "poison":
        mutated = fm.poison_safetensors(original, data.draw(st.integers(0, 30), "tensor"),
                                        data.draw(st.sampled_from([math.nan, math.inf, -math.inf]), "value"))
    else:
        mutated = fm.truncate(original, data.draw(st.floats(0.0, 0.999), "fraction"))
    with tempfile.TemporaryDirectory() as tmp:
        model = _copy(folder, Path(tmp))
        (model / "model.safetensors").write_bytes(mutated)
        line = _outcome(kind, lambda: load_model(model, device="cpu"), ("model.safetensors", str(model)))
        if kind == "poison":
            assert "NaN or infinite" in line


@settings(max_examples=40)
@given(st.sampled_from(fm.CONFIG_KEYS), st.sampled_from(fm.CONFIG_VALUES))
def test_mutated_config_fields(tiny, key, value):
    folder, _, _ = tiny
    with tempfile.TemporaryDirectory() as tmp:
        model = _copy(folder, Path(tmp))
        path = model / "config.json"
        path.write_text(fm.mutate_config(path.read_text(), key, value))
        _outcome(f"{key} = {value!r}"[:80], lambda: load_model(model, device="cpu"),
                 ("config.json", "model.safetensors", "tokenizer", str(model)))


@pytest.mark.parametrize("text", [fm.deep_json(), "[1, 2]", "{", "\udcff", '{"hidden_size": [1, [2]]}'])
def test_broken_config_files(tiny, tmp_path, text):
    model = _copy(tiny[0], tmp_path)
    (model / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    line = _outcome(text[:20], lambda: load_model(model, device="cpu"), ("config.json",))
    assert line != "ok"


def test_issue_cases_are_refused_in_one_line(tiny, tmp_path):
    """The issue's named cases: rope base NaN, a 2^40 token_type count, add_bos 2, 2^31 layers, NaN weights."""
    _, original, spots = tiny
    by_name = {spot.what: spot for spot in spots}
    for what, value, words in (("llama.rope.freq_base value", math.nan, "rope"),
                               ("tokenizer.ggml.token_type count", 2**40, "token_type"),
                               ("llama.block_count value", 2**31, "block_count"),
                               ("llama.attention.head_count value", 0, "head_count")):
        path = tmp_path / f"{what.split()[0]}.gguf"
        path.write_bytes(fm.overwrite(original, by_name[what], value))
        out = tmp_path / f"out-{what.split()[0]}"
        out.mkdir()
        line = _outcome(what, lambda: convert(path, out), (path.name,))
        assert words in line, line
    add_bos = [s for s in spots if s.what.startswith("tokenizer.ggml.add_bos") and s.what.endswith("value")]
    for spot in add_bos:  # the tiny writer may not write the flag
        path = tmp_path / "bos.gguf"
        path.write_bytes(fm.overwrite(original, spot, 2))
        assert "bool of 2" in _outcome("add_bos 2", lambda: convert(path, tmp_path), (path.name,))
    model = _copy(tiny[0], tmp_path / "nan")
    (model / "model.safetensors").write_bytes(
        fm.poison_safetensors((model / "model.safetensors").read_bytes(), 0, math.nan))
    assert "NaN or infinite" in _outcome("NaN weight", lambda: load_model(model, device="cpu"),
                                         ("model.safetensors",))
    json.loads((tiny[0] / "config.json").read_text())  # the original still reads
