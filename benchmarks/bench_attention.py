"""Decode attention (csrc/attention.h attend_one) against a read of the same K/V bytes, side by side in one run.

    PYTHONPATH=. python benchmarks/bench_attention.py [--positions 512,2000] [--rounds 30]
        [--json benchmarks/results/attention/<machine>_<date>.json]

The shapes are the default model's unless given (30 layers, 9 query heads over 3 KV heads of 64): one
query per head over every cached position, the way a decode step attends. Two settings:
- from the caches: one layer's K/V, the same every call (a few MB: compute, not memory);
- from memory: every layer's own K/V, a 256 MB read between rounds (what a decode step sees, with the
  weights streamed between two layers' attention), against torch.sum over the same tensors right beside it.
Reported per thread count: medians of the rounds, attention's time and its ratio to the read.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inference import kernels  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def measure(ops, n: int, args, threads: int) -> dict:
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(n)
    kv = [torch.randn(2, args.kv_heads, n, args.head_dim, generator=g) for _ in range(args.layers)]
    q = [torch.randn(1, args.heads * args.head_dim, generator=g) for _ in range(args.layers)]
    scale = args.head_dim ** -0.5
    flush = torch.ones(64 << 20)  # 256 MB: the caches hold none of the K/V after it

    def attend_all():
        for layer in range(args.layers):
            ops.attend_one(q[layer], kv[layer][0], kv[layer][1], scale)

    def read_all():
        for layer in range(args.layers):
            kv[layer].sum()

    hot, cold, read = [], [], []
    for _ in range(args.rounds):
        hot.append(timed(lambda: [ops.attend_one(q[0], kv[0][0], kv[0][1], scale) for _ in range(args.layers)]))
        flush.sum()
        cold.append(timed(attend_all))
        flush.sum()
        read.append(timed(read_all))
    kv_bytes = args.layers * 2 * args.kv_heads * n * args.head_dim * 4
    return {"positions": n, "threads": threads, "kv_mb": kv_bytes / 1e6,
            "from_caches_ms": statistics.median(hot), "from_memory_ms": statistics.median(cold),
            "read_ms": statistics.median(read),
            "ratio_to_read": statistics.median(c / r for c, r in zip(cold, read))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", default="512,2000")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--kv-heads", type=int, default=3)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    results.json_option(parser, "attention")
    args = parser.parse_args()
    if args.heads % args.kv_heads:
        parser.error("--heads must be a multiple of --kv-heads")
    ops = kernels.ops()  # built here first if need be
    if ops is None:
        print("the decode kernels are not available here (no compiler?)", file=sys.stderr)
        return 1
    measured = [measure(ops, int(n), args, int(t)) for n in args.positions.split(",") for t in args.threads.split(",")]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.processor() or platform.machine()}  "
          f"{args.layers} layers, {args.heads} heads over {args.kv_heads} KV heads of {args.head_dim}")
    print(f"{'positions':>9} {'threads':>7} {'K/V MB':>7} {'caches ms':>10} {'memory ms':>10} {'read ms':>8} "
          f"{'memory/read':>11}")
    for r in measured:
        print(f"{r['positions']:>9} {r['threads']:>7} {r['kv_mb']:>7.1f} {r['from_caches_ms']:>10.2f} "
              f"{r['from_memory_ms']:>10.2f} {r['read_ms']:>8.2f} {r['ratio_to_read']:>10.2f}x")
    path = results.resolve(args.json, "attention")
    results.write(path, "attention", {"args": vars(args) | {"json": str(path)}, "results": measured})
    return 0


if __name__ == "__main__":
    sys.exit(main())
