"""TokenStep against a REAL llama.cpp `llama-server` on 127.0.0.1, serving the default model's GGUF.

The server is built once per machine from the llama-cpp-python sdist's vendored llama.cpp (llama_server.py;
10-15 min on 2 cores the first time), for the instruction set /proc/cpuinfo lists (never AMX, never
-march=native), and started for this module with `-t 1 -np 1 -fa off`; a build that dies as it starts is
one warning, and the baseline ISA's build serves instead. These tests are skipped only when the machine
cannot build it (no cmake or C++ compiler), and say so. How the ISA is chosen, and the fallback, are
tested without a build in test_llama_server_isa.py.
"""

from __future__ import annotations

import math
import platform
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import llama_server
from inference import cache_dir
from inference.errors import is_expected, one_line
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.http import ServerError

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"
GREEDY = SamplerSettings(greedy=True)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(llama_server.build_impossible() is not None,
                                 reason=f"llama-server cannot be built here: {llama_server.build_impossible()}")]


@pytest.fixture(scope="module")
def server():
    running = llama_server.start_server(llama_server.model_gguf(), say=warnings.warn)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def remote(server):
    return load_model(server.url)  # the tokenizer: from the GGUF the server reports reading


def test_the_build_is_for_the_isa_cpuinfo_lists_and_its_manifest_says_which(server):
    manifest = cache_dir.read_manifest(server.binary.parent)
    isa = manifest["isa"]  # this CPU's options, or their baseline when that build died as it started
    chosen = llama_server.isa_options()
    assert isa in (chosen, llama_server.baseline_options(chosen))
    assert server.binary.parent == llama_server.server_dir(isa)  # the cache folder is keyed by them
    assert manifest["cmake_flags"] == [*llama_server.CMAKE_FLAGS, *llama_server.cmake_isa_flags(isa)]
    if platform.machine() in llama_server.X86:
        assert isa["GGML_NATIVE"] is False and not any(isa[o] for o in llama_server.ALWAYS_OFF)
        assert isa["GGML_AVX2"] == ("avx2" in llama_server.cpu_flags())


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump is not installed (apt-get install binutils)")
def test_the_binary_holds_no_amx_instruction(server):
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(server.binary)], capture_output=True,
                             text=True, check=True).stdout
    assert "<main>:" in listing  # a listing of the code itself
    assert not any(amx in listing for amx in ("ldtilecfg", "tileloadd", "tdpbssd", "tdpbf16ps"))


def llama_cpp_top(server, ids: list[int], n: int = 5) -> dict[int, float]:
    reply = server.post("/completion", {"prompt": ids, "n_predict": 1, "n_probs": n, "temperature": 0})
    return {t["id"]: math.exp(t["logprob"]) for t in reply["completion_probabilities"][0]["top_logprobs"]}


def test_connect_reads_the_server(remote, server, default_model, tmp_path):
    from tiny import write_tokenizer

    from inference.errors import ModelFormatError

    named = load_model(server.url, tokenizer=str(default_model.folder / "tokenizer.json"))  # the HF one agrees
    assert named.config.eos_ids == remote.config.eos_ids and named.folder == default_model.folder
    write_tokenizer(tmp_path)
    with pytest.raises(ModelFormatError, match="tokens, the local one"):  # another tokenizer is refused
        load_model(server.url, tokenizer=str(tmp_path))
    info = remote.info()
    assert info.vocab_size == 49152 and info.context_length == server.ctx and info.dtype == "remote"
    assert info.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and info.n_params > 100_000_000
    assert remote.tokenizer.decode(list(remote.config.eos_ids)) == "<|im_end|>"


def test_paris_first_with_llama_cpps_probability(remote, server, default_model):
    ids = remote.tokenizer.encode(PROMPT)
    session = Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=1))
    pending = session.prefill(ids, PROMPT).pending
    assert pending.candidates.texts[0] == " Paris"
    paris = int(pending.candidates.ids[0])
    p_remote = float(pending.candidates.p_raw[0])
    assert abs(p_remote - llama_cpp_top(server, ids)[paris]) < 0.03  # what the server itself reports
    local = Session(default_model, GenerationSettings(sampler=GREEDY, max_new_tokens=1))
    p_local = local.prefill(default_model.tokenizer.encode(PROMPT), PROMPT).pending
    assert int(p_local.candidates.ids[0]) == paris
    assert abs(p_remote - float(p_local.candidates.p_raw[0])) < 0.03  # our decoder on the same weights
    tail = pending.server
    assert tail.tail_count == 49152 - tail.n_top and 0 < tail.tail_p < 1 - p_remote


def test_twenty_greedy_steps_equal_llama_cpps_greedy_text(remote, server):
    ids = remote.tokenizer.encode(PROMPT)
    session = Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=20))
    events = list(session.generate(ids, PROMPT))
    ours = [e.token.id for e in events if hasattr(e, "token")]
    theirs = server.post("/completion", {"prompt": ids, "n_predict": 20, "temperature": 0,
                                         "return_tokens": True})
    assert ours == theirs["tokens"][:len(ours)] and len(ours) == len(theirs["tokens"])
    assert session.text == theirs["content"]
    cached = [e.dist.server.cached_tokens for e in events[2:] if hasattr(e, "token")]
    assert all(c is not None and c >= len(ids) for c in cached)  # each step a decode on the server's cache


def test_killed_server_one_line_error_steps_kept_then_step_continues(remote, server, tmp_path):
    command = [sys.executable, str(ROOT / "main.py"), "trace", "--model", server.url, "--greedy",
               "--max-new-tokens", "400", "--chat", "--prompt", "Write a long story about a dragon."]
    trace = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines = []
    while sum('"type": "step"' in line for line in lines) < 3:
        lines.append(trace.stdout.readline())
        assert lines[-1], f"the trace ended early: {trace.stderr.read()}"
    server.kill()
    out, err = trace.communicate(timeout=120)
    lines += out.splitlines()
    assert trace.returncode == 1
    errors = [line for line in err.splitlines() if not line.startswith("[tokenstep]")]  # progress lines aside
    assert len(errors) == 1 and errors[0].startswith("error: the server at") and "Traceback" not in err, err
    assert sum('"type": "step"' in line for line in lines) >= 3  # the steps before it stay printed
    server.start()

    session = Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=8))
    session.prefill(remote.tokenizer.encode(PROMPT), PROMPT)
    list(session.step())
    list(session.step())
    server.kill()
    with pytest.raises(ServerError) as e:
        list(session.step())
    assert is_expected(e.value) and "\n" not in one_line(e.value)
    kept = list(session.generated)
    assert len(kept) >= 2
    server.start()
    for _ in range(3):
        list(session.step())
    assert session.generated[:len(kept)] == kept and len(session.generated) == len(kept) + 3
    ids = remote.tokenizer.encode(PROMPT)
    theirs = server.post("/completion", {"prompt": ids, "n_predict": len(session.generated), "temperature": 0,
                                         "return_tokens": True})["tokens"]
    assert session.generated == theirs  # the run went on exactly where it stood


def test_sampling_widens_the_top_n_and_draws_among_the_listed(remote, server):
    hot = GenerationSettings(sampler=SamplerSettings(temperature=1.5, top_k=0, top_p=1.0), max_new_tokens=4, seed=7)
    session = Session(remote, hot)
    ids = remote.tokenizer.encode(PROMPT)
    pending = session.prefill(ids, PROMPT).pending
    note = pending.server
    assert note.n_top == 1280 and note.tail_count == 49152 - 1280  # llama.cpp has no cap on n_probs
    theirs = llama_cpp_top(server, ids, 1280)
    listed = dict(zip(pending.candidates.ids.tolist(), pending.candidates.p_raw.tolist()))
    assert all(abs(listed[i] - theirs[i]) < 1e-6 for i in list(listed)[:20])  # p_raw is the server's own
    assert note.tail_p == pytest.approx(1 - sum(theirs.values()), abs=1e-6)
    for event in [e for e in session.run() if hasattr(e, "token")]:
        assert event.dist.server.n_top == 1280 and event.dist.candidates.p_final.sum() <= 1 + 1e-9
        assert event.chosen_rank < 1280  # drawn among the tokens the server listed
