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

What a server sends is read as untrusted: every field used is checked for its type and range where it is
read (http.py has already refused what is not plain finite JSON), and a wrong one is a one-line ServerError
naming the server and the field, never a traceback, nor a NaN blamed on the weights, nor a listing that
hides the tail: a step's token ids are whole and distinct, its log-probabilities at most 0 and their
probabilities sum to at most 1.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from inference.messages import ENGLISH, Message, say
from inference.sources.http import Http, NotFound, ServerError

MAX_CONTEXT = 1 << 24  # the longest window believed (the longest served today are ~10M tokens)
MAX_VOCAB = 1 << 24  # likewise for a vocabulary (the largest today are ~260k tokens)
MAX_PARAMS = 10 ** 15
LOGPROB_ROUNDING = 1e-4  # a float32 log-softmax may give a token at p ~ 1 a hair above 0
SUM_ROUNDING = 1e-3  # and the listed probabilities a little more than 1 in all (float32 over up to 1280)


Server = Message | str  # a server as a message names it: say("remote.server", ...), or its address
Field = Message | str  # a field of its reply: its JSON name ("n_ctx"), or a Message ("an entry of top_logprobs")


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


class Dialect:
    """What the three dialects share: the server's address, and how a message names the server."""

    name = label = ""  # the dialect's key ("vllm"), and its name in a message ("vLLM")
    max_top: int | None = None  # the most top-N one request may ask for (None: no cap; vLLM learns its own)

    def __init__(self, http: Http):
        self.http = http

    @property
    def server(self) -> Message:
        return say("remote.server", label=self.label, url=self.http.base)

    def tokenized(self, reply) -> list[int]:
        """The ids of a /tokenize reply (every dialect names them `tokens`), checked."""
        return token_ids(mapping(reply, self.server, "/tokenize").get("tokens"), self.server, "/tokenize tokens")


class LlamaCpp(Dialect):
    name, label = "llama.cpp", "llama-server"

    def __init__(self, http: Http, props: dict):
        super().__init__(http)
        self.props = props

    def facts(self) -> ServerFacts:
        server = self.server
        try:
            model = first_model(self.http.get("/v1/models"), server)
        except NotFound:
            model = {}
        meta = mapping(model.get("meta"), server, "meta")
        settings = mapping(self.props.get("default_generation_settings"), server, "default_generation_settings")
        context = whole(settings.get("n_ctx") or meta.get("n_ctx"), server, "n_ctx", 1, MAX_CONTEXT)
        name = (string(model.get("id"), server, say("reply.model_id"))
                or string(self.props.get("model_alias"), server, "model_alias") or "llama-server")
        return ServerFacts("llama.cpp", name.replace("\\", "/").rsplit("/", 1)[-1],  # a path: its file name
                           string(self.props.get("model_path"), server, "model_path") or "",
                           whole(meta.get("n_vocab"), server, "n_vocab", 1, MAX_VOCAB), context,
                           whole(meta.get("n_params"), server, "n_params", 0, MAX_PARAMS),
                           string(self.props.get("bos_token"), server, "bos_token"),
                           string(self.props.get("eos_token"), server, "eos_token"))

    def tokenize(self, text: str) -> list[int] | None:
        reply = self.http.post("/tokenize", {"content": text, "add_special": False})
        return self.tokenized(reply)

    def top(self, tokens: list[int], n: int) -> TopReply:
        reply = self.http.post("/completion", {
            "prompt": tokens, "n_predict": 1, "n_probs": n, "temperature": 0.0, "cache_prompt": True,
            "post_sampling_probs": False, "stream": False})
        return parse_llama_cpp(reply, self.server)

    def kv_usage(self) -> float | None:
        return None


def parse_llama_cpp(reply, server: Server) -> TopReply:
    try:
        top = reply["completion_probabilities"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise ServerError(say("reply.no_top_llama_cpp", server=server)) from None
    entries = [mapping(e, server, say("reply.entry_of", field="top_logprobs"))
               for e in listing(top, server, "top_logprobs")]
    ids, logprobs = ranked([(e.get("id"), e.get("logprob")) for e in entries], server, "top_logprobs")
    timings = mapping(reply.get("timings"), server, "timings")
    cached = (whole(timings["cache_n"], server, "timings.cache_n", 0, MAX_CONTEXT) if "cache_n" in timings
              else whole(reply.get("tokens_cached"), server, "tokens_cached", 0, MAX_CONTEXT))
    ms = [number(timings.get(k), server, f"timings.{k}", 0.0, math.inf) for k in ("prompt_ms", "predicted_ms")]
    ms = [m for m in ms if m is not None]
    return TopReply(ids, logprobs, cached, sum(ms) if ms else None)


class Vllm(Dialect):
    name, label = "vllm", "vLLM"

    def __init__(self, http: Http, model: dict):
        super().__init__(http)
        self.model = model
        self.max_top: int | None = None  # learnt from the first refusal
        self.metrics: VllmMetrics | None = None  # the last scrape of /metrics (after the last request)

    def facts(self) -> ServerFacts:
        server = self.server
        return ServerFacts("vllm", string(self.model.get("id"), server, say("reply.model_id")) or "",
                           string(self.model.get("root"), server, "root") or "", None,
                           whole(self.model.get("max_model_len"), server, "max_model_len", 1, MAX_CONTEXT))

    def tokenize(self, text: str) -> list[int] | None:
        reply = self.http.post("/tokenize", {"model": self.model.get("id", ""), "prompt": text,
                                             "add_special_tokens": False})
        return self.tokenized(reply)

    def top(self, tokens: list[int], n: int) -> TopReply:
        n = min(n, self.max_top or n)
        if self.metrics is None:  # a first scrape, so that the first request's own time is a difference too
            self.metrics = self.scrape()
        body = {"model": self.model.get("id", ""), "prompt": tokens, "max_tokens": 1, "temperature": 0.0,
                "logprobs": n, "return_tokens_as_token_ids": True}
        try:
            reply = self.http.post("/v1/completions", body)
        except ServerError as e:
            cap = re.search(r"max(?:imum)?[ _]?(?:allowed|logprobs)\D{0,20}(\d+)", str(e), re.I)
            if cap is None or not 1 <= int(cap.group(1)) < n:
                raise
            # the server's --max-logprobs (learnt again when a restarted server has a lower one): ask within it
            self.max_top = int(cap.group(1))
            reply = self.http.post("/v1/completions", {**body, "logprobs": min(n, self.max_top)})
        said = parse_vllm(reply, self.server)
        before, self.metrics = self.metrics, self.scrape()
        said.server_ms = before.inference_ms(self.metrics) if before is not None else None
        return said

    def scrape(self) -> "VllmMetrics":
        """What the server's Prometheus `/metrics` says now (extras shown beside a step: a value that is not a
        fraction, or not a time, is left out rather than refused)."""
        try:
            text = self.http.get_text("/metrics", timeout=5)
        except ServerError:
            return VllmMetrics(None, None, None)
        usage, spent, count = (_metric(text, name) for name in (
            r"(?:kv|gpu)_cache_usage_perc", r"request_inference_time_seconds_sum",
            r"request_inference_time_seconds_count"))
        return VllmMetrics(usage if usage is not None and 0.0 <= usage <= 1.0 else None,
                           spent if spent is not None and spent >= 0 else None, count)

    def kv_usage(self) -> float | None:
        """The fraction of the server's KV cache in use after the last request (all requests), from `/metrics`."""
        return self.metrics.kv_usage if self.metrics is not None else None


@dataclass
class VllmMetrics:
    kv_usage: float | None  # vllm:kv_cache_usage_perc
    inference_s: float | None  # vllm:request_inference_time_seconds_sum: prefill and decode, all requests so far
    requests: float | None  # its _count: requests finished so far

    def inference_ms(self, after: "VllmMetrics") -> float | None:
        """The one request finished between this scrape and `after`: its prefill + decode time on the server (ms).
        None where another client's request finished too (the sum would hold both), or either scrape lacks it."""
        if None in (self.inference_s, self.requests, after.inference_s, after.requests):
            return None
        if after.requests - self.requests != 1 or after.inference_s < self.inference_s:
            return None
        return (after.inference_s - self.inference_s) * 1000


def _metric(text: str, name: str) -> float | None:
    """The value of the first sample of `vllm:<name>` in a Prometheus text page (None: absent, or not a number)."""
    found = re.search(rf"^vllm:{name}(?:\{{[^}}]*\}})?\s+(\S+)", text, re.M)
    try:
        value = float(found.group(1)) if found else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def parse_vllm(reply, server: Server) -> TopReply:
    try:
        top = reply["choices"][0]["logprobs"]["top_logprobs"][0]
    except (KeyError, IndexError, TypeError):
        raise ServerError(say("reply.no_top_vllm", server=server)) from None
    listed = mapping(top, server, "top_logprobs[0]").items()
    ids, logprobs = ranked([(_vllm_id(k, server), v) for k, v in listed], server, "top_logprobs")
    usage = mapping(reply.get("usage"), server, "usage")
    details = mapping(usage.get("prompt_tokens_details"), server, "prompt_tokens_details")
    return TopReply(ids, logprobs, whole(details.get("cached_tokens"), server, "cached_tokens", 0, MAX_CONTEXT), None)


def _vllm_id(key: str, server: Server) -> int:
    found = re.fullmatch(r"token_id:([0-9]{1,9})", key)
    if found is None:
        raise refused(server, say("reply.key_of", field="top_logprobs"), key, say("reply.token_id_key"))
    return int(found.group(1))


class Sglang(Dialect):
    name, label = "sglang", "SGLang"

    def __init__(self, http: Http, info: dict):
        super().__init__(http)
        self.info = info

    def facts(self) -> ServerFacts:
        server, context = self.server, None
        for path in ("/server_info", "/get_server_info"):  # the newer name, then the older
            try:
                said = mapping(self.http.get(path), server, path)
            except ServerError:  # the reply's fields are checked below, outside this try
                continue
            context = said.get("context_length") or mapping(said.get("server_args"), server,
                                                            "server_args").get("context_length")
            break
        context = whole(context or None, server, "context_length", 1, MAX_CONTEXT)  # 0: not said
        if context is None:  # SGLang's /tokenize says the window too
            try:
                said = self.http.post("/tokenize", {"prompt": "a", "add_special_tokens": False})
            except ServerError:
                said = None
            context = whole(mapping(said, server, "/tokenize").get("max_model_len"), server, "max_model_len",
                            1, MAX_CONTEXT)
        model_path = string(self.info.get("model_path"), server, "model_path") or ""
        return ServerFacts("sglang", model_path, string(self.info.get("tokenizer_path"), server, "tokenizer_path")
                           or model_path, None, context)

    def tokenize(self, text: str) -> list[int] | None:
        try:
            reply = self.http.post("/tokenize", {"prompt": text, "add_special_tokens": False})
        except NotFound:
            return None  # an older SGLang: no /tokenize
        return self.tokenized(reply)

    def top(self, tokens: list[int], n: int) -> TopReply:
        reply = self.http.post("/generate", {
            "input_ids": tokens, "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
            "return_logprob": True, "top_logprobs_num": n, "logprob_start_len": -1, "stream": False})
        return parse_sglang(reply, self.server)

    def kv_usage(self) -> float | None:
        return None


def parse_sglang(reply, server: Server) -> TopReply:
    if isinstance(reply, list):  # a batch of one
        if not reply:
            raise ServerError(say("reply.empty_list", server=server))
        reply = reply[0]
    if not isinstance(reply, dict):
        raise refused(server, say("reply.reply_to", path="/generate"), reply, say("reply.meta_info"))
    try:
        meta = reply["meta_info"]
        top = meta["output_top_logprobs"][0]
    except (KeyError, IndexError, TypeError):
        raise ServerError(say("reply.no_top_sglang", server=server)) from None
    pairs = []
    for entry in listing(top, server, "output_top_logprobs"):
        if not isinstance(entry, list) or len(entry) < 2:
            raise refused(server, say("reply.entry_of", field="output_top_logprobs"), entry,
                          say("reply.sglang_entry"))
        pairs.append((entry[1], entry[0]))
    ids, logprobs = ranked(pairs, server, "output_top_logprobs")
    latency = number(meta.get("e2e_latency"), server, "e2e_latency", 0.0, math.inf)
    return TopReply(ids, logprobs, whole(meta.get("cached_tokens"), server, "cached_tokens", 0, MAX_CONTEXT),
                    latency * 1000 if latency is not None else None)


def refused(server: Server, field: Field, value, wanted: Message) -> ServerError:
    """The one line for a field of `server`'s reply that is not what `wanted` says (the value as sent, cut short)."""
    shown = repr(value)
    return ServerError(say("reply.refused", server=server, field=field,
                           value=shown if len(shown) <= 40 else shown[:37] + "...", wanted=wanted))


def whole(value, server: Server, field: Field, low: int, high: int, optional: bool = True) -> int | None:
    """`value` as an integer from `low` to `high` (None when absent and `optional`)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and not value.is_integer()) or not low <= value <= high:
        raise refused(server, field, value, say("reply.whole", low=low, high=high))
    return int(value)


def number(value, server: Server, field: Field, low: float, high: float, optional: bool = True,
           wanted: Message | None = None) -> float | None:
    """`value` as a float from `low` to `high` (None when absent and `optional`)."""
    if value is None and optional:
        return None
    try:
        x = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer beyond float range
        x = math.nan
    if not low <= x <= high:  # NaN: never
        span = (say("reply.number_from", low=low) if high == math.inf
                else say("reply.number_between", low=low, high=high))
        raise refused(server, field, value, wanted or span)
    return x


def string(value, server: Server, field: Field) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise refused(server, field, value, say("reply.string"))


def mapping(value, server: Server, field: Field) -> dict:
    """`value` as a JSON object ({} when absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise refused(server, field, value, say("reply.object"))
    return value


def listing(value, server: Server, field: Field) -> list:
    if not isinstance(value, list):
        raise refused(server, field, value, say("reply.list"))
    return value


def token_ids(value, server: Server, field: Field) -> list[int]:
    return [whole(i, server, say("reply.token_id_in", field=field), 0, MAX_VOCAB, optional=False)
            for i in listing(value, server, field)]


def first_model(models, server: Server) -> dict:
    """The first model a `/v1/models` reply lists ({} when it lists none)."""
    data = listing(mapping(models, server, "/v1/models").get("data") or [{}], server, "/v1/models data")
    return mapping(data[0], server, "/v1/models data[0]")


def ranked(pairs: list[tuple], server: Server, field: Field) -> tuple[list[int], list[float]]:
    """(ids, log-probabilities), most likely first, from the (id, log-probability) pairs `server` listed in
    `field`: one distribution's top-N, so ids whole and distinct (a token listed twice would count its mass
    twice and hide the tail), log-probabilities at most 0, their probabilities summing to at most 1."""
    if not pairs:
        raise ServerError(say("reply.no_tokens", server=server, field=field))
    ids = [whole(i, server, say("reply.token_id_in", field=field), 0, MAX_VOCAB, optional=False) for i, _ in pairs]
    logprobs = [number(lp, server, say("reply.logprob_in", field=field), -math.inf, LOGPROB_ROUNDING,
                       optional=False, wanted=say("reply.logprob")) for _, lp in pairs]
    seen: set[int] = set()
    for i in ids:
        if i in seen:
            raise ServerError(say("reply.twice", server=server, id=i, field=field))
        seen.add(i)
    total = math.fsum(math.exp(lp) for lp in logprobs)
    if total > 1.0 + SUM_ROUNDING:
        raise ServerError(say("reply.sum", server=server, field=field, total=total))
    order = sorted(range(len(ids)), key=lambda k: -logprobs[k])
    return [ids[k] for k in order], [logprobs[k] for k in order]


TEXT_KEYED = ENGLISH["reply.text_keyed"]  # what a text-keyed server is refused with (a test reads it)


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
        model = first_model(http.get("/v1/models"), http.base)
    except NotFound:
        raise ServerError(say("reply.unknown_server", url=http.base)) from None
    try:
        http.get("/version")
        if model.get("owned_by") == "vllm" or "max_model_len" in model:
            return Vllm(http, model)
    except NotFound:
        pass
    raise ServerError(say("reply.text_keyed"))
