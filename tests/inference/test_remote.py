"""The remote source (inference/sources/) against fake servers in each dialect (fake_servers.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fake_servers import ROUTES, V, Fake, llama_cpp_routes, probe_ids, tokenizer_folder, top, vllm_routes
from inference.errors import ModelFormatError, is_expected, one_line
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.dialects import TEXT_KEYED
from inference.sources.http import RemoteUnsupported, ServerError
from inference.sources.remote import tail_matters
from inference.store.remote_model import offer


@pytest.fixture
def tokenizer_dir(tmp_path):
    return tokenizer_folder(tmp_path)


@pytest.fixture(params=sorted(ROUTES))
def served(request, tokenizer_dir):
    """(dialect, its fake server, the model connected to it)"""
    fake = Fake(ROUTES[request.param](tokenizer_dir))
    yield request.param, fake, load_model(fake.url, tokenizer=str(tokenizer_dir))
    fake.stop()


GREEDY = GenerationSettings(sampler=SamplerSettings(greedy=True), max_new_tokens=6)


def test_each_dialect_steps_with_token_ids_and_reports_the_tail(served):
    dialect, fake, model = served
    info = model.info()
    assert info.dtype == "remote" and info.vocab_size == V and dialect in info.architecture
    session = Session(model, GREEDY)
    prompt = model.tokenizer.encode("the tin", add_special_tokens=False)
    done = session.prefill(prompt)
    ids, lps = top(prompt, 20)
    dist = done.pending
    assert dist.candidates.ids[0] == ids[0]  # ranked as the server ranked them, keyed by id
    assert np.allclose(dist.candidates.p_raw[:5], np.exp(lps[:5]), atol=1e-9)  # the server's raw p
    assert dist.server.tail_p == pytest.approx(1 - sum(math.exp(x) for x in lps), abs=1e-9)
    assert dist.server.tail_count == V - 20
    steps = [e for e in session.run() if hasattr(e, "token")]
    context = list(prompt)
    for event in steps:  # every greedy step is the fake model's argmax after the context so far
        assert event.token.id == top(context, 1)[0][0]
        context.append(event.token.id)
        line = json.loads(event.to_json())
        assert line["server"]["n_top"] == 20 and line["server"]["tail_count"] == V - 20
    sent = [b.get("prompt", b.get("input_ids")) for _, p, b in fake.requests
            if p in ("/completion", "/v1/completions", "/generate")]
    assert sent[0] == prompt and sent[-1] == context[:-1]  # the whole context as ids, one token per request


def test_dialect_specific_fields(served):
    dialect, fake, model = served
    session = Session(model, GREEDY)
    session.prefill(model.tokenizer.encode("he", add_special_tokens=False))
    event = next(session.step())
    note = event.dist.server
    if dialect == "llama.cpp":
        body = fake.posted("/completion")[0]
        assert body["n_predict"] == 1 and body["post_sampling_probs"] is False and body["temperature"] == 0
        assert note.server_ms == pytest.approx(3.5) and note.cached_tokens == len(body["prompt"]) - 1
        assert model.n_params == 1234 and model.config.context_length == 96
    elif dialect == "vllm":
        body = fake.posted("/v1/completions")[0]
        assert body["return_tokens_as_token_ids"] is True and body["max_tokens"] == 1
        assert note.kv_usage == pytest.approx(0.125) and model.config.context_length == 80
        assert note.server_ms == pytest.approx(4.0)  # the one request's inference time, from /metrics
    else:
        body = fake.posted("/generate")[0]
        assert body["return_logprob"] is True and body["sampling_params"]["temperature"] == 0
        assert note.server_ms == pytest.approx(4.0) and note.cached_tokens == 2
        assert model.config.context_length == 64
    assert model.config.eos_ids == (model.tokenizer.token_id("</s>"),)


def test_a_tail_that_could_matter_is_asked_again_wider_up_to_vllms_cap(tokenizer_dir):
    llama = Fake(llama_cpp_routes(tokenizer_dir))
    vllm = Fake(vllm_routes(tokenizer_dir, cap=40))
    try:
        hot = GenerationSettings(sampler=SamplerSettings(temperature=1.5, top_k=0, top_p=1.0), max_new_tokens=4)
        for fake, path, key, most in ((llama, "/completion", "n_probs", 1280), (vllm, "/v1/completions", "logprobs", 40)):
            session = Session(load_model(fake.url, tokenizer=str(tokenizer_dir)), hot)
            pending = session.prefill(model_prompt := [70, 71, 72]).pending
            asked = [b[key] for b in fake.posted(path)]
            assert asked[0] == 20 and asked[-1] > 20, asked  # widened before the first draw was shown
            assert pending.server.n_top == min(most, V)
            ids, lps = top(model_prompt, V)
            assert pending.server.tail_p == pytest.approx(1 - sum(math.exp(x) for x in lps[:pending.server.n_top]),
                                                          abs=1e-9)
            before = len(fake.posted(path))
            list(session.step())  # the next step asks for as many at once: one request
            assert [b[key] for b in fake.posted(path)[before:]] == [pending.server.n_top]
        cool = GenerationSettings(sampler=SamplerSettings(temperature=0.7, top_k=10), max_new_tokens=4)
        session = Session(load_model(llama.url, tokenizer=str(tokenizer_dir)), cool)
        before = len(llama.posted("/completion"))
        session.prefill([70, 71, 72])
        assert [b["n_probs"] for b in llama.posted("/completion")[before:]] == [20]  # top-k 10 <= 20: enough
    finally:
        llama.stop()
        vllm.stop()


def test_tail_rule():
    from inference.events import ServerNote
    import torch

    logits = torch.full((100,), -math.inf, dtype=torch.float64)
    logits[:4] = torch.log(torch.tensor([0.5, 0.2, 0.1, 0.05], dtype=torch.float64))
    note = ServerNote(n_top=4, tail_p=0.15, tail_count=96)
    assert not tail_matters(logits, note, SamplerSettings(greedy=True))
    assert not tail_matters(logits, note, SamplerSettings(temperature=1.0, top_k=3))
    assert not tail_matters(logits, note, SamplerSettings(temperature=1.0, top_k=0, top_p=0.5))
    assert not tail_matters(logits, note, SamplerSettings(temperature=1.0, top_k=0, min_p=0.2))
    assert tail_matters(logits, note, SamplerSettings(temperature=1.0, top_k=0))  # 0.15 > 0.05
    small = ServerNote(n_top=4, tail_p=0.04, tail_count=96)  # all of it is less than the smallest listed
    assert not tail_matters(logits, small, SamplerSettings(temperature=0.2, top_k=0))
    assert tail_matters(logits, small, SamplerSettings(temperature=3.0, top_k=0))  # spread flat, it weighs more
    assert tail_matters(logits, note, SamplerSettings(temperature=1.0, top_k=50))


def test_text_keyed_server_is_refused(tokenizer_dir):
    fake = Fake({("GET", "/v1/models"): lambda _: (200, {"object": "list", "data": [{"id": "m", "owned_by": "me"}]}),
                 ("POST", "/v1/completions"): lambda _: (200, {})})
    try:
        with pytest.raises(ServerError) as e:
            load_model(fake.url, tokenizer=str(tokenizer_dir))
        assert str(e.value) == TEXT_KEYED and is_expected(e.value)
    finally:
        fake.stop()


def test_a_different_tokenizer_is_refused(tokenizer_dir):
    routes = llama_cpp_routes(tokenizer_dir)
    routes[("POST", "/tokenize")] = lambda _: (200, {"tokens": probe_ids(tokenizer_dir)[:3] + [5, 6]})
    fake = Fake(routes)
    try:
        with pytest.raises(ModelFormatError, match="splits a probe text differently.*token 3"):
            load_model(fake.url, tokenizer=str(tokenizer_dir))
        routes[("POST", "/tokenize")] = lambda _: (200, {"tokens": probe_ids(tokenizer_dir)})
        routes[("GET", "/v1/models")] = lambda _: (200, {"data": [{"id": "x", "meta": {"n_vocab": V + 7}}]})
        with pytest.raises(ModelFormatError, match=f"has {V + 7} tokens"):
            load_model(fake.url, tokenizer=str(tokenizer_dir))
        routes[("GET", "/v1/models")] = lambda _: (200, {"data": [{"id": "x", "meta": {"n_vocab": V}}]})
        with pytest.raises(ModelFormatError, match="--tokenizer PATH"):  # none named, the server's not here
            load_model(fake.url)
    finally:
        fake.stop()


def test_a_hub_id_reported_by_the_server_finds_its_snapshot_in_the_local_hf_cache(tokenizer_dir, tmp_path, monkeypatch):
    import shutil

    snapshot = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "abc123"
    shutil.copytree(tokenizer_dir, snapshot)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    routes = vllm_routes(tokenizer_dir)
    routes[("GET", "/v1/models")] = lambda _: (200, {"data": [{"id": "org/tiny", "owned_by": "vllm", "root": "org/tiny",
                                                               "max_model_len": 80}]})
    fake = Fake(routes)
    try:
        said = offer(fake.url)  # what the connect dialog shows before anything is read
        assert said == {"dialect": "vllm", "model": "org/tiny", "model_path": "org/tiny", "tokenizer": str(snapshot)}
        model = load_model(fake.url)  # no --tokenizer: the server's hub id, found in the cache
        assert model.folder == snapshot and model.name == "org/tiny"
    finally:
        fake.stop()
    assert offer(fake.url)["error"].startswith(f"cannot reach the server at {fake.url}")


def test_views_that_need_weights_say_why(tokenizer_dir):
    fake = Fake(llama_cpp_routes(tokenizer_dir))
    try:
        model = load_model(fake.url, tokenizer=str(tokenizer_dir))
        source = model.logits_source()  # what the type says, asked of no attribute's presence
        assert model.remote and source.remote and source.kv_used_bytes == 0
        session = Session(model, GREEDY, capture_attention=True)
        with pytest.raises(RemoteUnsupported, match="attention capture needs the model's weights"):
            session.prefill([70, 71])
        session = Session(model, GREEDY)
        session.prefill([70, 71])
        with pytest.raises(RemoteUnsupported, match="without the KV cache.*weights in this process"):
            session.use_kv_cache(False)
        with pytest.raises(RemoteUnsupported, match="the logit lens needs the model's weights"):
            Session(model, GREEDY, capture_lens=True).prefill([70, 71])
    finally:
        fake.stop()


def test_a_server_that_dies_keeps_the_steps_and_comes_back(tokenizer_dir):
    fake = Fake(llama_cpp_routes(tokenizer_dir))
    port = fake.port
    model = load_model(fake.url, tokenizer=str(tokenizer_dir))
    session = Session(model, GREEDY)
    session.prefill([70, 71, 72])
    first = [e.token.id for e in session.step() if hasattr(e, "token")]
    fake.stop()
    with pytest.raises(ServerError) as e:
        list(session.step())
    assert is_expected(e.value) and "\n" not in one_line(e.value) and "cannot reach" in one_line(e.value)
    kept = list(session.generated)
    assert kept[:1] == first  # the steps so far are kept (the drawn token too: its feed is what failed)
    with pytest.raises(ServerError):
        session.preview()
    fake = Fake(llama_cpp_routes(tokenizer_dir), port=port)  # back on the same address
    try:
        events = [e for e in session.step() if hasattr(e, "token")]
        assert session.generated[:len(kept)] == kept and len(session.generated) == len(kept) + len(events)
        context = [70, 71, 72] + session.generated[:-1]
        assert session.generated[-1] == top(context, 1)[0][0]
    finally:
        fake.stop()


def test_connect_errors_are_one_line():
    with pytest.raises(ServerError) as e:
        load_model("http://127.0.0.1:9")  # discard port: nothing listens
    assert is_expected(e.value) and "cannot reach the server at http://127.0.0.1:9" in one_line(e.value)
    with pytest.raises(ValueError, match="HOST:PORT"):
        load_model("http://")


def test_branches_speculation_and_trace_work_unchanged(served):
    dialect, fake, model = served
    prompt = [70, 71, 72]

    def greedy_path(n):
        context = list(prompt)
        for _ in range(n):
            context.append(top(context, 1)[0][0])
        return context[len(prompt):]

    session = Session(model, GenerationSettings(sampler=SamplerSettings(greedy=True), max_new_tokens=5))
    session.prefill(prompt)
    list(session.run())
    assert session.generated == greedy_path(5)
    first = session.node
    session.rewind(3)  # back to before step 3: fork there with another token
    assert len(session.generated) == 2
    other = 100 if greedy_path(3)[2] != 100 else 101  # not the token greedy took there
    list(session.force(other))
    assert session.generated[:2] == greedy_path(2) and session.generated[2] == other
    list(session.step())
    assert session.generated[3] == top(prompt + session.generated[:3], 1)[0][0]  # the fork's own context
    session.switch(first)
    assert session.generated == greedy_path(5)
    spec = Session(model, GenerationSettings(sampler=SamplerSettings(greedy=True), max_new_tokens=5, speculate=3))
    events = list(spec.generate(prompt))
    assert spec.generated == greedy_path(5) and json.loads(events[1].to_json())["server"]["n_top"] == 20


def test_a_vllm_restarted_with_a_lower_cap_is_asked_within_it(tokenizer_dir):
    """A session widened to vLLM's --max-logprobs 40 goes on when the server comes back listing at most 20."""
    routes = vllm_routes(tokenizer_dir, cap=40)
    fake = Fake(routes)
    try:
        hot = GenerationSettings(sampler=SamplerSettings(temperature=1.5, top_k=0), max_new_tokens=4)
        session = Session(load_model(fake.url, tokenizer=str(tokenizer_dir)), hot)
        assert session.prefill([70, 71, 72]).pending.server.n_top == 40
        routes[("POST", "/v1/completions")] = vllm_routes(tokenizer_dir, cap=20)[("POST", "/v1/completions")]
        events = [e for e in session.step() if hasattr(e, "token")]
        assert session.preview().dist.server.n_top == 20 and len(events) == 1  # not an error: asked again within it
    finally:
        fake.stop()
