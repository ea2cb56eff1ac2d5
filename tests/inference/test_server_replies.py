"""Malformed and hostile replies from an inference server, through the real load path (load_model(url),
Session, `trace`) against fake servers on 127.0.0.1: each ends in one expected line that names the server and
what it sent, never a traceback nor a misleading reason (NaN blamed on the weights, a tail bar hidden)."""

from __future__ import annotations

import copy
import socket
import threading

import pytest

from fake_servers import ROUTES, CutShort, Fake, top
from inference.errors import is_expected
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings

GREEDY = GenerationSettings(sampler=SamplerSettings(greedy=True), max_new_tokens=3)
PROMPT = [70, 71, 72]
PROPS, MODELS, TOKENIZE = ("GET", "/props"), ("GET", "/v1/models"), ("POST", "/tokenize")
MODEL_INFO, SERVER_INFO = ("GET", "/get_model_info"), ("GET", "/server_info")
COMPLETION, COMPLETIONS, GENERATE = ("POST", "/completion"), ("POST", "/v1/completions"), ("POST", "/generate")


@pytest.fixture
def tokenizer_dir(tmp_path):
    from fake_servers import tokenizer_folder

    return tokenizer_folder(tmp_path / "tokenizer")


def edited(routes: dict, key: tuple, edit) -> dict:
    """`routes` with the reply at `key` passed through `edit` (a copy of the reply in, the reply to send out)."""
    answer = routes[key]

    def route(body):
        status, reply = answer(body)
        return status, edit(copy.deepcopy(reply))

    return {**routes, key: route}


def put(*path_and_value):
    """An edit that sets the field at a path of keys and indices."""
    *path, value = path_and_value

    def edit(reply):
        here = reply
        for key in path[:-1]:
            here = here[key]
        here[path[-1]] = value
        return reply

    return edit


def assert_one_line(error: BaseException, fake: Fake, *said: str) -> None:
    text = str(error)
    assert is_expected(error), f"a bug: {type(error).__name__}: {text}"
    assert "\n" not in text and fake.url in text and all(s in text for s in said), text


def case(name, dialect, key, edit, said):
    """One malformed reply: `edit` applied to `dialect`'s reply at `key`; the error must say `said`."""
    return pytest.param(dialect, key, edit, said, id=f"{dialect}: {name}")


N_CTX = ("default_generation_settings", "n_ctx")


@pytest.mark.parametrize("dialect, key, edit, said", [
    case("n_ctx a string", "llama.cpp", PROPS, put(*N_CTX, "many"), "n_ctx"),
    case("n_ctx 4096.5", "llama.cpp", PROPS, put(*N_CTX, 4096.5), "n_ctx"),
    case("n_ctx negative", "llama.cpp", PROPS, put(*N_CTX, -5), "n_ctx"),
    case("n_ctx 2^40", "llama.cpp", PROPS, put(*N_CTX, 1 << 40), "n_ctx"),
    case("n_ctx true", "llama.cpp", PROPS, put(*N_CTX, True), "n_ctx"),
    case("model_path a list", "llama.cpp", PROPS, put("model_path", ["/a"]), "model_path"),
    case("eos_token a dict", "llama.cpp", PROPS, put("eos_token", {"content": "</s>"}), "eos_token"),
    case("n_vocab a string", "llama.cpp", MODELS, put("data", 0, "meta", "n_vocab", "many"), "n_vocab"),
    case("n_params a string", "llama.cpp", MODELS, put("data", 0, "meta", "n_params", "lots"), "n_params"),
    case("model id a number", "llama.cpp", MODELS, put("data", 0, "id", 7), "id"),
    case("data a string", "llama.cpp", MODELS, put("data", "all"), "data"),
    case("tokens a string", "llama.cpp", TOKENIZE, put("tokens", "abc"), "tokens"),
    case("tokens floats", "llama.cpp", TOKENIZE, put("tokens", [1.5]), "tokens"),
    case("no tokens", "llama.cpp", TOKENIZE, lambda reply: {}, "tokens"),
    case("max_model_len a string", "vllm", MODELS, put("data", 0, "max_model_len", "80k"), "max_model_len"),
    case("root a number", "vllm", MODELS, put("data", 0, "root", 7), "root"),
    case("data of strings", "vllm", MODELS, put("data", ["tiny"]), "data"),
    case("no tokens", "vllm", TOKENIZE, lambda reply: {"count": 3}, "tokens"),
    case("tokenizer_path a number", "sglang", MODEL_INFO, put("tokenizer_path", 5), "tokenizer_path"),
    case("context_length a string", "sglang", SERVER_INFO, put("context_length", "long"), "context_length"),
    case("server_args a string", "sglang", SERVER_INFO, put("server_args", "x"), "server_args"),
    case("max_model_len negative", "sglang", TOKENIZE, put("max_model_len", -1), "max_model_len"),
])
def test_a_malformed_fact_refuses_the_connection_in_one_line(dialect, key, edit, said, tokenizer_dir):
    fake = Fake(edited(ROUTES[dialect](tokenizer_dir), key, edit))
    try:
        with pytest.raises(Exception) as refused:
            load_model(fake.url, tokenizer=str(tokenizer_dir))
        assert_one_line(refused.value, fake, said)
    finally:
        fake.stop()


def _llama_entries(edit):
    def on_reply(reply):
        edit(reply["completion_probabilities"][0]["top_logprobs"])
        return reply
    return on_reply


def _duplicate_second(entries):
    entries[1]["id"] = entries[0]["id"]


def _vllm_top(edit):
    def on_reply(reply):
        listed = reply["choices"][0]["logprobs"]["top_logprobs"]
        listed[0] = edit(listed[0])
        return reply
    return on_reply


def _vllm_same_id_twice(listed):
    first = next(iter(listed))  # "token_id:N" and "token_id:0N" are one token
    return {**listed, f"token_id:0{first.removeprefix('token_id:')}": -30.0}


TOP_LLAMA = ("completion_probabilities", 0, "top_logprobs")
TOP_SGLANG = ("meta_info", "output_top_logprobs", 0)


@pytest.mark.parametrize("dialect, key, edit, said", [
    case("tokens_cached a string", "llama.cpp", COMPLETION, lambda r: {**r, "tokens_cached": "many", "timings": {}},
         "tokens_cached"),
    case("timings a string", "llama.cpp", COMPLETION, put("timings", "fast"), "timings"),
    case("prompt_ms a string", "llama.cpp", COMPLETION, put("timings", "prompt_ms", "3 ms"), "prompt_ms"),
    case("cache_n negative", "llama.cpp", COMPLETION, put("timings", "cache_n", -3), "cache_n"),
    case("logprob positive", "llama.cpp", COMPLETION, put(*TOP_LLAMA, 0, "logprob", 5.0), "log-probability"),
    case("logprob 'NaN'", "llama.cpp", COMPLETION, put(*TOP_LLAMA, 0, "logprob", "NaN"), "log-probability"),
    case("logprob 'inf'", "llama.cpp", COMPLETION, put(*TOP_LLAMA, 0, "logprob", "inf"), "log-probability"),
    case("p sums past 1", "llama.cpp", COMPLETION, _llama_entries(lambda e: [t.update(logprob=-0.01) for t in e]),
         "sum to"),
    case("id a string", "llama.cpp", COMPLETION, put(*TOP_LLAMA, 0, "id", "7"), "token id"),
    case("id negative", "llama.cpp", COMPLETION, put(*TOP_LLAMA, 1, "id", -1), "token id"),
    case("id past the vocabulary", "llama.cpp", COMPLETION, put(*TOP_LLAMA, 1, "id", 10 ** 6),
         "outside the vocabulary"),
    case("id twice", "llama.cpp", COMPLETION, _llama_entries(_duplicate_second), "twice"),
    case("top list empty", "llama.cpp", COMPLETION, put(*TOP_LLAMA, []), "no tokens"),
    case("no completion_probabilities", "llama.cpp", COMPLETION, put("completion_probabilities", []),
         "top_logprobs"),
    case("key not an id", "vllm", COMPLETIONS, _vllm_top(lambda listed: {**listed, "token_id:abc": -9.0}),
         "token_id:abc"),
    case("id twice", "vllm", COMPLETIONS, _vllm_top(_vllm_same_id_twice), "twice"),
    case("logprob a string", "vllm", COMPLETIONS, _vllm_top(lambda listed: dict.fromkeys(listed, "x")),
         "log-probability"),
    case("logprob positive", "vllm", COMPLETIONS, _vllm_top(lambda listed: dict.fromkeys(listed, 0.5)),
         "log-probability"),
    case("cached_tokens a string", "vllm", COMPLETIONS, put("usage", "prompt_tokens_details", "cached_tokens", "many"),
         "cached_tokens"),
    case("empty list", "sglang", GENERATE, lambda reply: [], "empty list"),
    case("list of a number", "sglang", GENERATE, lambda reply: [5], "meta_info"),
    case("cached_tokens a string", "sglang", GENERATE, put("meta_info", "cached_tokens", "many"), "cached_tokens"),
    case("e2e_latency a string", "sglang", GENERATE, put("meta_info", "e2e_latency", "slow"), "e2e_latency"),
    case("entry too short", "sglang", GENERATE, put(*TOP_SGLANG, 0, [-0.5]), "output_top_logprobs"),
    case("id 2.5", "sglang", GENERATE, put(*TOP_SGLANG, 3, 1, 2.5), "token id"),
])
def test_a_malformed_step_reply_is_one_line_and_the_session_goes_on(dialect, key, edit, said, tokenizer_dir):
    broken = [True]
    fake = Fake(edited(ROUTES[dialect](tokenizer_dir), key, lambda reply: edit(reply) if broken else reply))
    try:
        session = Session(load_model(fake.url, tokenizer=str(tokenizer_dir)), GREEDY)
        with pytest.raises(Exception) as refused:
            session.prefill(PROMPT)
        assert_one_line(refused.value, fake, said)
        broken.clear()  # the server mended: the same session reads the prompt
        assert session.prefill(PROMPT).pending.candidates.ids[0] == top(PROMPT, 1)[0][0]
    finally:
        fake.stop()


def _raw_completion(number: str) -> str:
    return '{"completion_probabilities": [{"top_logprobs": [{"id": 5, "logprob": ' + number + '}]}]}'


@pytest.mark.parametrize("reply, said", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (_raw_completion("1e400"), "not finite"),
    (_raw_completion("-1e400"), "not finite"),
    (_raw_completion("NaN"), "not finite"),
    (CutShort(_raw_completion("-0.5")), "the reply was cut short"),
], ids=["deep", "1e400", "-1e400", "NaN", "cut-short"])
def test_replies_http_refuses_reach_the_session_as_one_line(reply, said, tokenizer_dir):
    routes = ROUTES["llama.cpp"](tokenizer_dir)
    fake = Fake({**routes, COMPLETION: lambda body: (200, reply)})
    try:
        session = Session(load_model(fake.url, tokenizer=str(tokenizer_dir)), GREEDY)
        with pytest.raises(Exception) as refused:
            session.prefill(PROMPT)
        assert_one_line(refused.value, fake, said)
    finally:
        fake.stop()


def test_a_number_beyond_float_range_in_the_facts_refuses_the_connection(tokenizer_dir):
    routes = ROUTES["llama.cpp"](tokenizer_dir)
    fake = Fake({**routes, PROPS: lambda body: (200, '{"default_generation_settings": {"n_ctx": 1e400}}')})
    try:
        with pytest.raises(Exception) as refused:
            load_model(fake.url, tokenizer=str(tokenizer_dir))
        assert_one_line(refused.value, fake, "not finite")
    finally:
        fake.stop()


def test_a_service_that_does_not_speak_http_on_the_port_is_one_line(tokenizer_dir):
    listening = socket.create_server(("127.0.0.1", 0))

    def greet():  # an SSH server's greeting to whoever connects
        while True:
            try:
                connection, _ = listening.accept()
            except OSError:
                return
            with connection:
                connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    threading.Thread(target=greet, daemon=True).start()
    url = f"http://127.0.0.1:{listening.getsockname()[1]}"
    try:
        with pytest.raises(Exception) as refused:
            load_model(url, tokenizer=str(tokenizer_dir))
        assert is_expected(refused.value) and "\n" not in str(refused.value)
        assert url in str(refused.value) and "did not answer in HTTP" in str(refused.value)
    finally:
        listening.close()


@pytest.mark.parametrize("metric", ["1-2", "7.5", "-0.25"])
def test_an_unreadable_kv_usage_metric_is_not_reported(metric, tokenizer_dir):
    """vLLM's /metrics is an optional extra: a value that is not a fraction is left out, the step goes on."""
    routes = ROUTES["vllm"](tokenizer_dir)
    fake = Fake({**routes, ("GET", "/metrics"): lambda body: (200, f"vllm:kv_cache_usage_perc {metric}\n")})
    try:
        session = Session(load_model(fake.url, tokenizer=str(tokenizer_dir)), GREEDY)
        pending = session.prefill(PROMPT).pending
        assert pending.server.kv_usage is None and pending.server.n_top == 20
    finally:
        fake.stop()


def test_trace_ends_a_malformed_reply_with_one_error_line(tokenizer_dir, capsys):
    from inference.cli import main

    routes = ROUTES["llama.cpp"](tokenizer_dir)
    fake = Fake(edited(routes, COMPLETION, put(*TOP_LLAMA, 0, "logprob", 0.7)))
    try:
        code = main(["trace", "--model", fake.url, "--tokenizer", str(tokenizer_dir), "--greedy",
                     "--max-new-tokens", "2", "--prompt", "the tin"])
    finally:
        fake.stop()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith("error: ") and fake.url in err[-1] and "log-probability" in err[-1]
    assert not any("Traceback" in line for line in err)
