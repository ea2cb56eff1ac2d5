"""The three server dialects TokenStep speaks: one request = the next token's top-N, keyed by token id.

Every request sends the whole context as token ids and asks for ONE new token at temperature 0 (the
server's own pick is ignored: TokenStep draws), with the top-N log-probabilities of the *raw*
distribution:
  - llama.cpp `llama-server` `/completion`: `"prompt": [ids]`, `n_probs` N (no cap), no
    `post_sampling_probs`; replies carry ids, `tokens_cached` and `timings`.
  - vLLM `/v1/completions`: an id prompt, `logprobs` N (at most the server's `--max-logprobs`, 20 by
    default), `return_tokens_as_token_ids` (keys "token_id:123"); raw log-probs are vLLM's default
    `--logprobs-mode raw_logprobs`.
  - SGLang `/generate`: `input_ids`, `return_logprob`, `top_logprobs_num` N; at temperature 0 its greedy path
    returns the untempered log-softmax.
A server that keys its log-probabilities by token text only (llama-cpp-python's OpenAI server: many
tokens share a text, EOS reads "") is refused at connect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .http import Http, NotFound, ServerError


@dataclass
class ServerFacts:
    dialect: str  # "llama.cpp", "vllm", "sglang"
    model: str  # the name the server serves it under
    model_path: str = ""  # where the server read it (usable here when the server runs on this machine)
    vocab: int | None = None
    context: int | None = None
    n_params: int | None = None
    bos_text: str | None = None
    eos_text: str | None = None
    max_top: int | None = None  # the most top-N one request may ask for (None: no cap)


@dataclass
class TopReply:
    ids: list[int]  # the top-N token ids, most likely first
    logprobs: list[float]  # their raw log-probabilities over the whole vocabulary
    cached: int | None = None  # context tokens the server took from its cache (None: not reported)
    server_ms: float | None = None  # the server's own compute time for this request (None: not reported)


class LlamaCpp:
    name = "llama.cpp"

    def __init__(self, http: Http, props: dict):
        self.http, self.props = http, props

    def facts(self) -> ServerFacts:
        meta: dict = {}
        try:
            models = self.http.get("/v1/models").get("data") or [{}]
            meta = models[0].get("meta") or {}
            name = models[0].get("id") or ""
        except (NotFound, AttributeError):
            name = ""
        context = (self.props.get("default_generation_settings") or {}).get("n_ctx") or meta.get("n_ctx")
        name = name or self.props.get("model_alias") or "llama-server"
        return ServerFacts("llama.cpp", name.replace("\\", "/").rsplit("/", 1)[-1],  # a path: its file name
                           self.props.get("model_path") or "", meta.get("n_vocab"), context,
                           meta.get("n_params"), self.props.get("bos_token"), self.props.get("eos_token"))

    def tokenize(self, text: str) -> list[int] | None:
        return list(self.http.post("/tokenize", {"content": text, "add_special": False})["tokens"])

    def top(self, tokens: list[int], n: int) -> TopReply:
        reply = self.http.post("/completion", {
            "prompt": tokens, "n_predict": 1, "n_probs": n, "temperature": 0.0, "cache_prompt": True,
            "post_sampling_probs": False, "stream": False})
        return parse_llama_cpp(reply)

    def kv_usage(self) -> float | None:
        return None


def parse_llama_cpp(reply: dict) -> TopReply:
    try:
        top = reply["completion_probabilities"][0]["top_logprobs"]
        ids, logprobs = [int(t["id"]) for t in top], [float(t["logprob"]) for t in top]
    except (KeyError, IndexError, TypeError, ValueError):
        raise ServerError("llama-server's reply has no top_logprobs with token ids "
                          "(is it llama.cpp's llama-server, and recent?)") from None
    timings = reply.get("timings") or {}
    cached = timings.get("cache_n", reply.get("tokens_cached"))
    ms = [timings.get(k) for k in ("prompt_ms", "predicted_ms") if isinstance(timings.get(k), (int, float))]
    return TopReply(ids, logprobs, int(cached) if cached is not None else None, sum(ms) if ms else None)


class Vllm:
    name = "vllm"

    def __init__(self, http: Http, model: dict):
        self.http, self.model = http, model
        self.max_top: int | None = None  # learnt from the first refusal

    def facts(self) -> ServerFacts:
        return ServerFacts("vllm", self.model.get("id", ""), self.model.get("root") or "",
                           None, self.model.get("max_model_len"))

    def tokenize(self, text: str) -> list[int] | None:
        reply = self.http.post("/tokenize", {"model": self.model.get("id", ""), "prompt": text,
                                             "add_special_tokens": False})
        return list(reply["tokens"])

    def top(self, tokens: list[int], n: int) -> TopReply:
        n = min(n, self.max_top or n)
        body = {"model": self.model.get("id", ""), "prompt": tokens, "max_tokens": 1, "temperature": 0.0,
                "logprobs": n, "return_tokens_as_token_ids": True}
        try:
            reply = self.http.post("/v1/completions", body)
        except ServerError as e:
            cap = re.search(r"max(?:imum)?[ _]?(?:allowed|logprobs)\D{0,20}(\d+)", str(e), re.I)
            if cap is None or self.max_top is not None:
                raise
            self.max_top = int(cap.group(1))  # the server's --max-logprobs: ask again within it
            reply = self.http.post("/v1/completions", {**body, "logprobs": min(n, self.max_top)})
        return parse_vllm(reply)

    def kv_usage(self) -> float | None:
        """The fraction of the server's KV cache in use, from its Prometheus `/metrics`."""
        try:
            text = self.http.get_text("/metrics", timeout=5)
        except ServerError:
            return None
        found = re.search(r"^vllm:(?:kv|gpu)_cache_usage_perc(?:\{[^}]*\})?\s+([0-9.eE+-]+)", text, re.M)
        return float(found.group(1)) if found else None


def parse_vllm(reply: dict) -> TopReply:
    try:
        choice = reply["choices"][0]["logprobs"]
        top = choice["top_logprobs"][0]
        pairs = sorted(((float(v), _vllm_id(k)) for k, v in top.items()), key=lambda p: -p[0])
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise ServerError("vLLM's reply has no top_logprobs keyed by token id "
                          "(it needs return_tokens_as_token_ids: vLLM 0.6 or later)") from None
    usage = reply.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return TopReply([i for _, i in pairs], [lp for lp, _ in pairs], cached, None)


def _vllm_id(key: str) -> int:
    if not key.startswith("token_id:"):
        raise ValueError(key)
    return int(key.removeprefix("token_id:"))


class Sglang:
    name = "sglang"

    def __init__(self, http: Http, info: dict):
        self.http, self.info = http, info

    def facts(self) -> ServerFacts:
        context = None
        for path in ("/server_info", "/get_server_info"):  # the newer name, then the older
            try:
                server = self.http.get(path)
                context = server.get("context_length") or (server.get("server_args") or {}).get("context_length")
                break
            except (ServerError, AttributeError):
                continue
        if not context:  # SGLang's /tokenize says the window too
            try:
                context = self.http.post("/tokenize", {"prompt": "a", "add_special_tokens": False}).get("max_model_len")
            except (ServerError, AttributeError):
                context = None
        path = self.info.get("tokenizer_path") or self.info.get("model_path") or ""
        return ServerFacts("sglang", self.info.get("model_path", ""), path, None, context)

    def tokenize(self, text: str) -> list[int] | None:
        try:
            return list(self.http.post("/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"])
        except NotFound:
            return None  # an older SGLang: no /tokenize

    def top(self, tokens: list[int], n: int) -> TopReply:
        reply = self.http.post("/generate", {
            "input_ids": tokens, "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
            "return_logprob": True, "top_logprobs_num": n, "logprob_start_len": -1, "stream": False})
        return parse_sglang(reply)

    def kv_usage(self) -> float | None:
        return None


def parse_sglang(reply: dict) -> TopReply:
    if isinstance(reply, list):
        reply = reply[0]
    try:
        meta = reply["meta_info"]
        top = sorted(((float(e[0]), int(e[1])) for e in meta["output_top_logprobs"][0]), key=lambda p: -p[0])
    except (KeyError, IndexError, TypeError, ValueError):
        raise ServerError("SGLang's reply has no output_top_logprobs (send return_logprob)") from None
    latency = meta.get("e2e_latency")
    return TopReply([i for _, i in top], [lp for lp, _ in top], meta.get("cached_tokens"),
                    float(latency) * 1000 if isinstance(latency, (int, float)) else None)


TEXT_KEYED = ("this server keys its log-probabilities by token text only (llama-cpp-python's server does: "
              "many tokens share a text and EOS reads \"\"); TokenStep needs token ids: serve the model with "
              "llama.cpp's llama-server, vLLM or SGLang")


def detect(http: Http):
    """The dialect of the server at `http`: llama.cpp (`/props`), SGLang (`/get_model_info`), vLLM
    (`/version` and `/v1/models`); a server that answers none of these is refused with the reason."""
    try:
        props = http.get("/props")
        if isinstance(props, dict) and "default_generation_settings" in props:
            return LlamaCpp(http, props)
    except NotFound:
        pass
    try:
        info = http.get("/get_model_info")
        if isinstance(info, dict) and "model_path" in info:
            return Sglang(http, info)
    except NotFound:
        pass
    try:
        models = http.get("/v1/models")
    except NotFound:
        raise ServerError(f"{http.base} answers none of llama.cpp's /props, SGLang's /get_model_info or "
                          "vLLM's /v1/models: not an inference server TokenStep knows") from None
    data = (models.get("data") or [{}]) if isinstance(models, dict) else [{}]
    try:
        http.get("/version")
        if data[0].get("owned_by") == "vllm" or "max_model_len" in data[0]:
            return Vllm(http, data[0])
    except NotFound:
        pass
    raise ServerError(TEXT_KEYED)
