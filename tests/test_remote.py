"""The remote source against fake servers on 127.0.0.1 that answer in each dialect's reply shape.

The fakes serve one deterministic "model": a full distribution over the vocabulary drawn from the
context's hash, of which a request gets the top-N. The reply shapes are those of llama.cpp's
`llama-server` (checked against the real one in test_llama_server.py), vLLM's `/v1/completions` with
`return_tokens_as_token_ids`, and SGLang's `/generate` with `return_logprob`.
"""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from inference.errors import ModelFormatError, is_expected, one_line
from inference.loading import load_model
from inference.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.dialects import TEXT_KEYED
from inference.sources.http import RemoteUnsupported, ServerError
from inference.sources.remote import tail_matters
from inference.sources.remote_model import PROBE
from tiny import write_tokenizer

V = 263  # the tiny tokenizer: 256 bytes, 5 merges, <s>, </s>


def model_logprobs(context: list[int], vocab: int = V, spread: float = 2.5) -> np.ndarray:
    """The fake model: a full log-distribution over the vocabulary, a function of the context alone."""
    rng = np.random.default_rng(abs(hash(tuple(context))) % (2 ** 32))
    logits = rng.normal(size=vocab) * spread
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def top(context: list[int], n: int) -> tuple[list[int], list[float]]:
    lp = model_logprobs(context)
    ids = np.argsort(-lp, kind="stable")[:n]
    return [int(i) for i in ids], [float(lp[i]) for i in ids]


class Fake:
    """A fake server: routes (method, path) -> handler(body) -> (status, JSON); every request recorded."""

    def __init__(self, routes: dict, port: int = 0):
        self.routes, self.requests = routes, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append((method, self.path, body))
                route = fake.routes.get((method, self.path))
                status, reply = (404, {"error": "not found"}) if route is None else route(body)
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.answer("GET")

            def do_POST(self):
                self.answer("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def posted(self, path: str) -> list[dict]:
        return [body for method, p, body in self.requests if method == "POST" and p == path]


@pytest.fixture
def tokenizer_dir(tmp_path):
    write_tokenizer(tmp_path)
    return tmp_path


def probe_ids(folder) -> list[int]:
    from inference.tokenizer import Tokenizer

    return Tokenizer.from_folder(folder).encode(PROBE, add_special_tokens=False)


def llama_cpp_routes(folder, n_ctx=96):
    def completion(body):
        ids, lps = top(body["prompt"], body["n_probs"])
        entries = [{"id": i, "token": "?", "bytes": [63], "logprob": lp} for i, lp in zip(ids, lps)]
        return 200, {"content": "?", "tokens_cached": len(body["prompt"]),
                     "timings": {"cache_n": len(body["prompt"]) - 1, "prompt_n": 1, "prompt_ms": 3.0,
                                 "predicted_n": 1, "predicted_ms": 0.5},
                     "completion_probabilities": [{**entries[0], "top_logprobs": entries}]}

    return {("GET", "/props"): lambda _: (200, {"default_generation_settings": {"n_ctx": n_ctx},
                                                "model_path": "/nowhere/model.gguf", "bos_token": "<s>",
                                                "eos_token": "</s>"}),
            ("GET", "/v1/models"): lambda _: (200, {"data": [{"id": "tiny.gguf", "owned_by": "llamacpp",
                                                              "meta": {"n_vocab": V, "n_params": 1234}}]}),
            ("POST", "/tokenize"): lambda _: (200, {"tokens": probe_ids(folder)}),
            ("POST", "/completion"): completion}


def vllm_routes(folder, cap=20):
    def completions(body):
        if body["logprobs"] > cap:
            return 400, {"object": "error", "message": f"Requested sample logprobs of {body['logprobs']}, "
                                                       f"which is greater than max allowed: {cap}"}
        ids, lps = top(body["prompt"], body["logprobs"])
        return 200, {"choices": [{"text": f"token_id:{ids[0]}", "logprobs": {
            "tokens": [f"token_id:{ids[0]}"], "token_logprobs": [lps[0]], "text_offset": [0],
            "top_logprobs": [{f"token_id:{i}": lp for i, lp in zip(ids, lps)}]}}],
            "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 1,
                      "prompt_tokens_details": {"cached_tokens": len(body["prompt"]) - 1}}}

    metrics = "# HELP x\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.125\n"
    return {("GET", "/version"): lambda _: (200, {"version": "0.11.0"}),
            ("GET", "/v1/models"): lambda _: (200, {"data": [{"id": "tiny", "owned_by": "vllm", "root": "/nowhere",
                                                              "max_model_len": 80}]}),
            ("GET", "/metrics"): lambda _: (200, metrics),
            ("POST", "/tokenize"): lambda _: (200, {"tokens": probe_ids(folder), "count": 3, "max_model_len": 80}),
            ("POST", "/v1/completions"): completions}


def sglang_routes(folder):
    def generate(body):
        ids, lps = top(body["input_ids"], body["top_logprobs_num"])
        return 200, {"text": "?", "output_ids": [ids[0]], "meta_info": {
            "prompt_tokens": len(body["input_ids"]), "completion_tokens": 1, "cached_tokens": 2,
            "e2e_latency": 0.004, "output_token_logprobs": [[lps[0], ids[0], None]],
            "output_top_logprobs": [[[lp, i, None] for i, lp in zip(ids, lps)]]}}

    return {("GET", "/get_model_info"): lambda _: (200, {"model_path": "/nowhere", "tokenizer_path": "/nowhere",
                                                         "is_generation": True}),
            ("GET", "/server_info"): lambda _: (200, {"context_length": None, "max_total_num_tokens": 9999}),
            ("POST", "/tokenize"): lambda _: (200, {"tokens": probe_ids(folder), "count": 3, "max_model_len": 64}),
            ("POST", "/generate"): generate}


@pytest.fixture(params=["llama.cpp", "vllm", "sglang"])
def served(request, tokenizer_dir):
    routes = {"llama.cpp": llama_cpp_routes, "vllm": vllm_routes, "sglang": sglang_routes}[request.param]
    fake = Fake(routes(tokenizer_dir))
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
        model = load_model(fake.url)  # no --tokenizer: the server's hub id, found in the cache
        assert model.folder == snapshot and model.name == "org/tiny"
    finally:
        fake.stop()


def test_views_that_need_weights_say_why(tokenizer_dir):
    fake = Fake(llama_cpp_routes(tokenizer_dir))
    try:
        model = load_model(fake.url, tokenizer=str(tokenizer_dir))
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


def test_the_app_steps_a_server_shows_the_tail_and_survives_its_death(qtbot, tokenizer_dir, tmp_path):
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow
    from gui.theme import Appearance

    fake = Fake(llama_cpp_routes(tokenizer_dir))
    port, errors = fake.port, []
    win = MainWindow(settings=QSettings(str(tmp_path / "t.ini"), QSettings.IniFormat), appearance=Appearance(),
                     model=f"{fake.url}#tokenizer={tokenizer_dir}")
    qtbot.addWidget(win)
    win.show()
    c = win.controller
    c.error.connect(lambda message, details, expected: errors.append((message, expected)))
    idle = lambda: not c.busy and not c.running  # noqa: E731
    try:
        qtbot.waitUntil(lambda: c.info is not None, timeout=60_000)
        assert c.info.dtype == "remote" and c.info.vocab_size == V
        win.controls.prompt.setPlainText("the tin")
        win.actions["prefill"].trigger()
        qtbot.waitUntil(lambda: c.prefilled and idle(), timeout=60_000)
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: len(c.steps) == 1 and idle(), timeout=60_000)
        qtbot.waitUntil(lambda: not c.scheduler.redraw_due, timeout=60_000)
        view, step = win.views["candidates"], c.steps[0]
        ticks = [label for _, label in view.bars.getAxis("left")._tickLevels[0]]
        note = step.dist.server  # the app's sampler (top-k 50 > 20) had the server asked for 80
        assert note.n_top == 80 and ticks[-1] == f"other ({V - 80} tokens)" == f"other ({note.tail_count} tokens)"
        assert view.tail_bar.opts["width"] == [note.tail_p] and "server listed top 80" in view.header.text()
        kv = win.views["kv"]
        kv._force_refresh()
        assert "KV bytes not known" in kv.formula.text() and f"took {note.cached_tokens}" in kv.formula.text()
        fake.stop()
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: bool(errors) and idle(), timeout=60_000)
        assert errors[0][1] and "\n" not in errors[0][0] and "cannot reach the server" in errors[0][0]
        kept = [s.token.id for s in c.steps]
        assert len(kept) >= 1
        fake = Fake(llama_cpp_routes(tokenizer_dir), port=port)
        win.actions["step"].trigger()
        qtbot.waitUntil(lambda: len(c.steps) == len(kept) + 1 and idle(), timeout=60_000)
        assert [s.token.id for s in c.steps][:len(kept)] == kept
    finally:
        win.close()
        fake.stop()


def test_connect_dialog_builds_the_spec_the_engine_loads(qtbot, tokenizer_dir):
    from PySide6.QtWidgets import QDialogButtonBox

    from gui.connect_dialog import ConnectDialog, server_spec
    from inference.sources.remote_model import split_spec

    dialog = ConnectDialog(None, "http://10.0.0.5:8000", str(tokenizer_dir / "tokenizer.json"))
    qtbot.addWidget(dialog)
    assert split_spec(dialog.spec()) == ("http://10.0.0.5:8000", str(tokenizer_dir / "tokenizer.json"))
    assert server_spec(" https://h:1 ") == "https://h:1" and split_spec("https://h:1") == ("https://h:1", None)
    dialog.url.setText("ftp://nope")
    assert not dialog.buttons.button(QDialogButtonBox.Ok).isEnabled()


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
