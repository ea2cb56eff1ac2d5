"""Fake inference servers on 127.0.0.1 that answer in each dialect's reply shape (tests of the remote source).

They serve one deterministic "model": a full distribution over the vocabulary drawn from the context's
hash, of which a request gets the top-N. The reply shapes are those of llama.cpp's `llama-server` (checked
against the real one in test_llama_server.py), vLLM's `/v1/completions` with `return_tokens_as_token_ids`,
and SGLang's `/generate` with `return_logprob`, as their documentation and sources give them.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from inference.store.remote_model import PROBE
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


class CutShort(str):
    """A reply body of which the fake server sends the first half, under the whole one's Content-Length, and
    hangs up (a server that died mid-reply)."""


class Fake:
    """A fake server: routes (method, path) -> handler(body) -> (status, JSON, or a str sent as it is);
    every request recorded."""

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
                self.wfile.write(data[:len(data) // 2] if isinstance(reply, CutShort) else data)

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


def tokenizer_folder(folder):
    """The tiny byte-level tokenizer the fake servers "serve", written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(folder)
    return folder


def probe_ids(folder) -> list[int]:
    from inference.text.tokenizer import Tokenizer

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
    done = {"requests": 0}  # each answered request adds 4 ms of inference time to /metrics

    def metrics(_):
        return 200, ("# HELP x\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.125\n"
                     f"vllm:request_inference_time_seconds_sum{{engine=\"0\"}} {0.004 * done['requests']}\n"
                     f"vllm:request_inference_time_seconds_count{{engine=\"0\"}} {float(done['requests'])}\n")

    def completions(body):
        if body["logprobs"] > cap:
            return 400, {"object": "error", "message": f"Requested sample logprobs of {body['logprobs']}, "
                                                       f"which is greater than max allowed: {cap}"}
        ids, lps = top(body["prompt"], body["logprobs"])
        done["requests"] += 1
        return 200, {"choices": [{"text": f"token_id:{ids[0]}", "logprobs": {
            "tokens": [f"token_id:{ids[0]}"], "token_logprobs": [lps[0]], "text_offset": [0],
            "top_logprobs": [{f"token_id:{i}": lp for i, lp in zip(ids, lps)}]}}],
            "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 1,
                      "prompt_tokens_details": {"cached_tokens": len(body["prompt"]) - 1}}}

    return {("GET", "/version"): lambda _: (200, {"version": "0.11.0"}),
            ("GET", "/v1/models"): lambda _: (200, {"data": [{"id": "tiny", "owned_by": "vllm", "root": "/nowhere",
                                                              "max_model_len": 80}]}),
            ("GET", "/metrics"): metrics,
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


ROUTES = {"llama.cpp": llama_cpp_routes, "vllm": vllm_routes, "sglang": sglang_routes}
