"""int8 decode's two paths and llama.cpp Q4_1 by CPU time at one thread: a measure that a busy machine
(other processes on the same cores) disturbs far less than wall time.

    PYTHONPATH=. python benchmarks/bench_int8_cputime.py

One thread each: the 121 one-row products on each path and a read of the same bytes (time.thread_time,
best of 3), whole decode steps after a 16-token prompt (best of 2 runs of 16 steps), and llama-server
-t 1 on the default model's Q4_1 GGUF: its process CPU time (/proc/<pid>/stat) for 33 tokens minus that
for 1, per token. Three interleaved repeats; min, median and all values printed.
"""
import os, sys, time, statistics, torch, subprocess  # noqa: E401
sys.path.insert(0, "."); sys.path.insert(0, "tests"); sys.path.insert(0, "benchmarks")  # noqa: E702
torch.set_num_threads(1)
from bench_int8_path import products, read_same_bytes, set_path
from bench_decode import decode_read_bytes
from inference.store.loading import load_model
m = load_model("default", device="cpu", dtype="int8"); d = m.decoder
def cpu(fn, n=3):
    best = 1e9
    for _ in range(n):
        t = time.thread_time(); fn(); best = min(best, time.thread_time() - t)
    return best * 1000
def steps(path, tokens=16):
    set_path(d, path)
    cache = d.new_cache(16 + tokens + 1)
    with torch.inference_mode():
        logits = d.forward(torch.arange(5, 21), 0, cache)
        t = time.thread_time()
        for i in range(tokens):
            logits = d.forward(torch.tensor([int(torch.argmax(logits[0]))]), 16 + i, cache)
        return (time.thread_time() - t) / tokens * 1000
import llama_server
srv = llama_server.LlamaServer(llama_server.binary_path(llama_server.isa_options()), llama_server.model_gguf())
cmd = [str(srv.binary), "-m", str(srv.model), "--host", "127.0.0.1", "--port", str(srv.port), "-t", "1", "-tb", "1", "-np", "1", "-c", "512", "--no-webui"]
srv.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(600):
    try:
        srv.post("/completion", {"prompt": "a", "n_predict": 1}); break
    except OSError: time.sleep(0.2)
def llama_cpu(n):
    def ticks():
        f = open(f"/proc/{srv.process.pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    t = ticks(); r = srv.post("/completion", {"prompt": list(range(5, 21)), "n_predict": n, "ignore_eos": True, "cache_prompt": False, "top_k": 1})
    return (ticks() - t) / os.sysconf("SC_CLK_TCK") * 1000, r["timings"]["predicted_per_token_ms"]
res = {}
rd = read_same_bytes(d)
for rep in range(3):
    for p in ("float", "integer"):
        res.setdefault(f"products_cpu_ms:{p}", []).append(cpu(products(d, p)))
    res.setdefault("read_cpu_ms", []).append(cpu(rd))
    for p in ("float", "integer"):
        res.setdefault(f"step_cpu_ms:{p}", []).append(min(steps(p) for _ in range(2)))
    a, _ = llama_cpu(1); b, wall = llama_cpu(33)
    res.setdefault("llama_cpu_ms_per_token", []).append((b - a) / 32)
    res.setdefault("llama_wall_ms_per_token", []).append(wall)
srv.stop()
for k, v in res.items(): print(f"{k:28s} min {min(v):8.3f}  median {statistics.median(v):8.3f}  {[round(x, 2) for x in v]}")
print("decode_read_bytes", decode_read_bytes(d.weights, m.config))
