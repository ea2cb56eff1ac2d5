"""int8 decode on its paths (quant.INT8_PATHS: float activations, int16 activations, or int8 activations on
AVX-512 VNNI or AVX2), side by side in one process, and against llama.cpp's Q4_1 of the same model
(llama-server, when built).

    PYTHONPATH=. python benchmarks/bench_int8_path.py [--repeats 7] [--threads 2] [--no-llama]
        [--json benchmarks/results/int8_path/<machine>_<date>.json]

Each path is first given its own fastest int8 kernel shape (measured as kernel_shape does at first use), and
runs in it. Every repeat runs, in an order that alternates: a streaming read of 1 GiB (the bandwidth); the
model's one-row int8 products (every layer's four and the head's, scheduled as a decode step runs them) on
each path, with a read of the same weight bytes right beside them; whole decode steps on each path (the same
loaded model, its linears switched); and llama-server /completions, whose `timings.predicted_per_token_ms` is
llama.cpp's decode. Medians of the per-repeat numbers and of the ratios are reported; the floor is int8
decode's bytes (as bench_decode.decode_read_bytes counts them) over the bandwidth of the same repeat. On a busy
machine the 10th percentile of single steps (llama.cpp: of 8-token runs) is reported too ("p10").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from benchmarks.bench_decode import cpu_facts, decode_read_bytes  # noqa: E402
from inference.store.loading import load_model  # noqa: E402
from inference.model import kernel_shape, quant  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)

STREAM = torch.ones((1 << 30) // 4, dtype=torch.float32)
PATHS = ("float", "int16", "integer")  # "integer" where the CPU has integer code (main() drops it elsewhere)


def best_of(fn, n: int) -> float:
    """The fastest of n runs of fn(), in ms (a repeat's own noise floor)."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def set_path(decoder, path: str) -> None:
    quant.use_int8_path(decoder.weights, path)


def products(decoder, path: str):
    """A closure that runs the 121 one-row products of the model on `path`, scheduled as a decode step runs
    them (kernel_shape.run_products: one parallel region, barriers between products)."""
    ops = decoder.backend.kernels
    set_path(decoder, path)
    mats = kernel_shape.products(decoder.weights, "int8", limit=1 << 62)
    return lambda: kernel_shape.run_products(ops, mats)


def own_shapes(decoder, paths) -> dict[str, kernel_shape.Shape]:
    """Each path's fastest int8 shape, measured on its own products as kernel_shape does at first use (the
    cache holds only the default path's): every path is compared in its best shape."""
    ops, shapes = decoder.backend.kernels, {}
    for path in paths:
        set_path(decoder, path)
        mats = kernel_shape.products(decoder.weights, "int8")
        shapes[path] = kernel_shape.fastest(kernel_shape.measure(ops, mats, "int8"))
    return shapes


def read_same_bytes(decoder):
    """A streaming read (torch.sum) of the weight and scale bytes of the products `products` times (the int8
    ones: the 4-bit head, not among them, is left out here too), viewed as float32."""
    views = [t.view(-1).view(torch.float32) for w, scale, *_ in kernel_shape.products(decoder.weights, "int8", 1 << 62)
             for t in (w, scale) if (t.numel() * t.element_size()) % 4 == 0]
    return lambda: [v.sum() for v in views]


def decode_steps(decoder, tokens: int, context: int):
    """Greedy decode of `tokens` steps after a `context`-token prompt; returns each step's ms."""
    def run() -> list[float]:
        cache = decoder.new_cache(context + tokens + 1)
        each = []
        with torch.inference_mode():
            logits = decoder.forward(torch.arange(5, 5 + context), 0, cache)
            for i in range(tokens):
                started = time.perf_counter()
                token = int(torch.argmax(logits[0]))
                logits = decoder.forward(torch.tensor([token]), context + i, cache)
                each.append((time.perf_counter() - started) * 1000)
        return each
    return run


class LlamaCpp:
    """llama-server on the default model's own Q4_1 GGUF, `threads` threads; decode ms per token."""

    def __init__(self, threads: int, context: int):
        import llama_server

        binary = llama_server.binary_path(llama_server.isa_options())
        if binary is None:
            raise RuntimeError("llama-server is not built (python tests/support/llama_server.py builds it)")
        self.server = llama_server.LlamaServer(binary, llama_server.model_gguf())
        self._start(threads)
        self.prompt = list(range(5, 5 + context))

    def _start(self, threads: int) -> None:
        import subprocess

        import local_server

        s = self.server
        command = [str(s.binary), "-m", str(s.model), "--host", "127.0.0.1", "--port", str(s.port), "-t",
                   str(threads), "-tb", str(threads), "-np", "1", "-c", "1024", "--no-webui"]
        log = open(s.log_path, "ab")
        s.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=local_server.die_with_parent)
        for _ in range(600):
            try:
                if s.post("/completion", {"prompt": "a", "n_predict": 1}).get("content") is not None:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"llama-server did not answer; log: {s.log_path}")

    def decode_ms(self, tokens: int) -> float:
        reply = self.server.post("/completion", {"prompt": self.prompt, "n_predict": tokens, "temperature": 0,
                                                 "ignore_eos": True, "cache_prompt": False, "top_k": 1})
        return reply["timings"]["predicted_per_token_ms"]

    def close(self) -> None:
        self.server.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--context", type=int, default=16)
    parser.add_argument("--no-llama", action="store_true")
    results.json_option(parser, "int8_path")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_model("default", device="cpu", dtype="int8")
    decoder = model.decoder
    read_bytes = decode_read_bytes(decoder.weights, model.config)
    llama = None if args.no_llama else LlamaCpp(args.threads, args.context)
    paths = PATHS if decoder.backend.kernels.integer_code() else PATHS[:2]
    if paths != PATHS:
        print("[bench] no integer int8 code for this CPU (AVX-512 without VNNI): the float and int16 paths only")
    shapes = own_shapes(decoder, paths)
    print("[bench] int8 shapes: " + ", ".join(f"{p} {shape.describe()}" for p, shape in shapes.items()))

    def use(path: str) -> None:  # the path's products in its own shape
        set_path(decoder, path)
        kernel_shape.apply(decoder.backend.kernels, "int8", shapes[path])

    sides = {f"products:{p}": products(decoder, p) for p in paths}
    read = read_same_bytes(decoder)
    samples: dict[str, list[float]] = {}

    def record(name, value):
        samples.setdefault(name, []).append(value)

    steps = decode_steps(decoder, args.tokens, args.context)
    for repeat in range(args.repeats):
        order = paths if repeat % 2 == 0 else paths[::-1]
        record("gb_per_s", STREAM.numel() * 4 / best_of(STREAM.sum, 3) * 1000 / 1e9)
        for path in order:
            use(path)
            record(f"products_ms:{path}", best_of(sides[f"products:{path}"], 5))
            record(f"products_vs_read:{path}", samples[f"products_ms:{path}"][-1] / best_of(read, 5))
        for path in order:
            use(path)
            each = steps()
            samples.setdefault(f"each_step_ms:{path}", []).extend(each)
            record(f"step_ms:{path}", statistics.mean(each))
            record(f"step_vs_floor:{path}", samples[f"step_ms:{path}"][-1]
                   / (read_bytes / (samples["gb_per_s"][-1] * 1e9) * 1000))
        if llama is not None:
            short = [llama.decode_ms(8) for _ in range(4)]  # short runs: a low percentile of them too
            samples.setdefault("each_step_ms:llama.cpp Q4_1", []).extend(short)
            record("step_ms:llama.cpp Q4_1", llama.decode_ms(args.tokens))
            for path in paths:
                record(f"step_vs_llama:{path}", samples[f"step_ms:{path}"][-1] / samples["step_ms:llama.cpp Q4_1"][-1])
        for path in paths[1:]:
            record(f"step_ratio:{path}/float", samples[f"step_ms:{path}"][-1] / samples["step_ms:float"][-1])
            record(f"products_ratio:{path}/float",
                   samples[f"products_ms:{path}"][-1] / samples["products_ms:float"][-1])
    if llama is not None:
        llama.close()
    # On a busy machine the low percentile of single steps is the nearest to a quiet one's time.
    low = {k.removeprefix("each_"): sorted(v)[len(v) // 10] for k, v in samples.items() if k.startswith("each_")}
    if llama is not None:
        low.update({f"step_vs_llama:{p}": low[f"step_ms:{p}"] / low["step_ms:llama.cpp Q4_1"] for p in paths})
    samples = {k: v for k, v in samples.items() if not k.startswith("each_")}
    report = {"cpu": cpu_facts(), "shapes": {p: shape.key for p, shape in shapes.items()}, "p10": low,
              "threads": args.threads, "tokens": args.tokens, "context": args.context,
              "decode_read_bytes": read_bytes, "repeats": args.repeats,
              "median": {k: statistics.median(v) for k, v in samples.items()},
              "spread": {k: [min(v), max(v)] for k, v in samples.items()}}
    for k, v in report["median"].items():
        lo, hi = report["spread"][k]
        print(f"{k:32s} {v:9.3f}   [{lo:.3f} .. {hi:.3f}]")
    for k, v in low.items():
        print(f"p10 {k:28s} {v:9.3f}")
    results.write(args.json, "int8_path", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
