"""int8 decode's two paths and llama.cpp Q4_1 by CPU time at one thread: a measure that a busy machine
(other processes on the same cores) disturbs far less than wall time.

    python benchmarks/bench_int8_cputime.py [--json [PATH]]

One thread each: the 121 one-row products on each path and a read of the same bytes (time.thread_time,
best of 3), whole decode steps after a 16-token prompt (best of 2 runs of 16 steps), and llama-server
-t 1 on the default model's Q4_1 GGUF: its process CPU time (/proc/<pid>/stat) for 33 tokens minus that
for 1, per token. Three interleaved repeats; min, median and all values printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

import llama_server  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)
from bench_decode import decode_read_bytes  # noqa: E402  (benchmarks/ is this script's folder)
from bench_int8_path import products, read_same_bytes, set_path  # noqa: E402
from inference.store.loading import load_model  # noqa: E402


def cpu(fn, n=3):
    best = 1e9
    for _ in range(n):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best * 1000


def steps(d, path, tokens=16):
    set_path(d, path)
    cache = d.new_cache(16 + tokens + 1)
    with torch.inference_mode():
        logits = d.forward(torch.arange(5, 21), 0, cache)
        t = time.thread_time()
        for i in range(tokens):
            logits = d.forward(torch.tensor([int(torch.argmax(logits[0]))]), 16 + i, cache)
        return (time.thread_time() - t) / tokens * 1000


def start_server():
    srv = llama_server.LlamaServer(llama_server.binary_path(llama_server.isa_options()), llama_server.model_gguf())
    cmd = [str(srv.binary), "-m", str(srv.model), "--host", "127.0.0.1", "--port", str(srv.port), "-t", "1", "-tb",
           "1", "-np", "1", "-c", "512", "--no-webui"]
    srv.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            srv.post("/completion", {"prompt": "a", "n_predict": 1})
            break
        except OSError:
            time.sleep(0.2)
    return srv


def llama_cpu(srv, n):
    def ticks():
        f = Path(f"/proc/{srv.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    t = ticks()
    r = srv.post("/completion", {"prompt": list(range(5, 21)), "n_predict": n, "ignore_eos": True,
                                 "cache_prompt": False, "top_k": 1})
    return (ticks() - t) / os.sysconf("SC_CLK_TCK") * 1000, r["timings"]["predicted_per_token_ms"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    results.json_option(parser, "int8_cputime")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    m = load_model("default", device="cpu", dtype="int8")
    d = m.decoder
    srv = start_server()
    res = {}
    rd = read_same_bytes(d)
    for _rep in range(3):
        for p in ("float", "integer"):
            res.setdefault(f"products_cpu_ms:{p}", []).append(cpu(products(d, p)))
        res.setdefault("read_cpu_ms", []).append(cpu(rd))
        for p in ("float", "integer"):
            res.setdefault(f"step_cpu_ms:{p}", []).append(min(steps(d, p) for _ in range(2)))
        a, _ = llama_cpu(srv, 1)
        b, wall = llama_cpu(srv, 33)
        res.setdefault("llama_cpu_ms_per_token", []).append((b - a) / 32)
        res.setdefault("llama_wall_ms_per_token", []).append(wall)
    srv.stop()
    for k, v in res.items():
        print(f"{k:28s} min {min(v):8.3f}  median {statistics.median(v):8.3f}  {[round(x, 2) for x in v]}")
    read_bytes = decode_read_bytes(d.weights, m.config)
    print("decode_read_bytes", read_bytes)
    results.write(args.json, "int8_cputime", {"cpu_ms": res, "decode_read_bytes": read_bytes})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
