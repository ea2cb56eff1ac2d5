"""Stepping through a real llama.cpp `llama-server`: per-step latency at short and long context.

    PYTHONPATH=. python benchmarks/bench_remote.py [--contexts 16,512] [--steps 32] [--repeats 3]
        [--json benchmarks/results/remote/<machine>_<date>.json]

The server (tests/support/llama_server.py: built once per machine, `-t 1 -np 1 -fa off`, the default model's
Q4_1 GGUF) runs on 127.0.0.1. For each context length L a prompt of exactly L tokens (the paragraph of
tests/support/paragraph.py, repeated) is prefilled, then `--steps` greedy steps are taken, each ONE request with
the whole context as token ids. Reported per L (medians over steps and repeats):
  - step ms: the wall time of `Session.step()` here (draw + one HTTP request + reading the top-20);
  - request ms: the HTTP round trip of that request (the rest of a step is the draw and the report);
  - server ms: the server's own time for that request (its `timings`: prompt_ms + predicted_ms);
  - cached: the context tokens (median) the server took from its prefix cache (`timings.cache_n`);
  - llama.cpp decode ms/token: the same prompt sent once with `n_predict` = steps, the server's own
    `predicted_per_token_ms` (its decode loop, no HTTP per token);
  - re-prefill ms: the same L tokens read with the cache off (`cache_prompt: false`): what a step would
    cost if the server re-read the context each time.
A step that rides the prefix cache stays near the decode time at both lengths; a re-prefill would grow
with L.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

import llama_server  # noqa: E402
from paragraph import PARAGRAPH  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


def prompt_of(tokenizer, n: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < n:
        ids += tokenizer.encode(PARAGRAPH + " ", add_special_tokens=False)
    return ids[:n]


def measure(server, model, n_context: int, steps: int) -> dict:
    from inference.session.session import Session
    from inference.settings import GenerationSettings, SamplerSettings

    ids = prompt_of(model.tokenizer, n_context)
    request_ms: list[float] = []
    top = type(model.dialect).top

    def timed_top(dialect, tokens, n):  # the HTTP round trip of each request, as this process sees it
        started = time.perf_counter()
        try:
            return top(dialect, tokens, n)
        finally:
            request_ms.append((time.perf_counter() - started) * 1000)

    model.dialect.top = timed_top.__get__(model.dialect)
    session = Session(model, GenerationSettings(sampler=SamplerSettings(greedy=True), max_new_tokens=steps + 1))
    session.prefill(ids)
    step_ms, server_ms, cached = [], [], []
    for _ in range(steps):
        started = time.perf_counter()
        events = [e for e in session.step() if hasattr(e, "token")]
        step_ms.append((time.perf_counter() - started) * 1000)
        note = events[-1].dist.server
        server_ms.append(note.server_ms)
        cached.append(note.cached_tokens)
        if session.stopped is not None:
            break
    del model.dialect.top
    own = server.post("/completion", {"prompt": ids, "n_predict": steps, "temperature": 0, "ignore_eos": True})
    cold = server.post("/completion", {"prompt": ids, "n_predict": 1, "temperature": 0, "cache_prompt": False})
    return {"context": n_context, "steps": len(step_ms), "step_ms": statistics.median(step_ms),
            "request_ms": statistics.median(request_ms[1:]),
            "server_ms": statistics.median(server_ms), "cached": statistics.median(cached),
            "llama_decode_ms_per_token": own["timings"]["predicted_per_token_ms"],
            "reprefill_ms": cold["timings"]["prompt_ms"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="16,512")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    results.json_option(parser, "remote")
    args = parser.parse_args(argv)
    from inference.store.loading import load_model
    from inference.store.remote_model import one_thread

    server = llama_server.LlamaServer(llama_server.ensure_built(log=sys.stderr), llama_server.model_gguf()).start()
    try:
        model = load_model(server.url)
        one_thread()  # as the app's engine and `trace` do once connected
        rows = []
        for n in (int(x) for x in args.contexts.split(",")):
            runs = [measure(server, model, n, args.steps) for _ in range(args.repeats)]
            row = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            rows.append(row)
            print(f"context {n:5d}: step {row['step_ms']:6.1f} ms here · request {row['request_ms']:6.1f} ms · server {row['server_ms']:6.1f} ms · "
                  f"cached {row['cached']:.0f} · llama.cpp decode {row['llama_decode_ms_per_token']:6.1f} "
                  f"ms/token · re-prefill {row['reprefill_ms']:7.1f} ms", flush=True)
    finally:
        server.stop()
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor()
              or platform.machine(), "server": f"llama-server (llama-cpp-python {llama_server.VERSION} sources)",
              "flags": "-t 1 -np 1 -fa off", "load_average_1min": os.getloadavg()[0], "rows": rows}
    results.write(args.json, "remote", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
