"""A pass over M positions against a one-position step, this tree against a reference commit, side by side in one run.

Two processes, one per tree (each builds its own kernels from its own csrc/ and loads the default model), take
turns: at each turn one times a one-position step and a verify pass of each M (--sizes; every row's logits, at
position --context of a prompt's cache, then cropped back), the fastest of --reps each, while the other waits.
These machines' memory speed drifts by 10-30 % within a minute (the VM's two states); taking turns, both trees see
the same drift, so the per-turn ratio pass / step and the ratio of the two trees' passes hold where absolute
figures do not. `--peak` also measures this machine's float32 fma rate (an L1-resident loop of 12 independent
AVX-512 or AVX2 fmas per thread, built with torch.utils.cpp_extension), the ceiling an M-row pass's arithmetic
meets: M positions need M x 2 x (the model's parameters) flops. TOKENSTEP_KERNELS_FLAGS (inference/kernels) builds
both sides for another instruction set, e.g. "-mavx2 -mfma": the AVX2 code on this CPU; the report records it.

    PYTHONPATH=. python benchmarks/pass_ab.py --ref 5944d51 [--turns 6] [--reps 5] [--context 128]
        [--sizes 2 3 4 5 8 16] [--peak] [--json benchmarks/results/small_m/<machine>_<date>_ab.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import results  # noqa: E402  (benchmarks/results/: where --json writes)
import turns  # noqa: E402

_PEAK_SOURCE = r"""
#include <torch/extension.h>
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#ifdef __AVX512F__
typedef __m512 V;
#define SET(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define ADD(a, b) _mm512_add_ps(a, b)
#define STORE(p, v) _mm512_storeu_ps(p, v)
constexpr int kLanes = 16;
#else
typedef __m256 V;
#define SET(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define ADD(a, b) _mm256_add_ps(a, b)
#define STORE(p, v) _mm256_storeu_ps(p, v)
constexpr int kLanes = 8;
#endif
// GFLOP/s of `threads` threads each running `iters` rounds of 12 independent fmas (distinct starting values, so
// that the compiler keeps 12 chains: 12 x 4 cycles of latency covers two fma pipes).
double fma_rate(int64_t threads, int64_t iters) {
  auto start = std::chrono::steady_clock::now();
  float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    V a[12];
    for (int i = 0; i < 12; ++i) a[i] = SET(1.0f + 0.1f * i);
    const V b = SET(0.999999f), c = SET(1e-7f);
    for (int64_t n = 0; n < iters; ++n) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) a[i] = FMA(a[i], b, c);
    }
    V s = a[0];
    for (int i = 1; i < 12; ++i) s = ADD(s, a[i]);
    float out[kLanes];
    STORE(out, s);
    for (int i = 0; i < kLanes; ++i) sink += out[i];
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sink == 0 ? 0.0 : double(threads) * iters * 12 * kLanes * 2 / seconds / 1e9;
}
"""


def fma_peak(threads: int) -> dict:
    """This machine's float32 fma rate, GFLOP/s: the fastest of 5 runs on 1 thread and on `threads`."""
    from torch.utils.cpp_extension import load_inline

    sys.path.insert(0, str(ROOT))
    from inference.kernels import _isa_flags

    flags = ["-O2", "-fopenmp"] + _isa_flags()
    module = load_inline("tokenstep_fma_peak", cpp_sources=_PEAK_SOURCE, functions=["fma_rate"],
                         extra_cflags=flags, extra_ldflags=["-fopenmp"], verbose=False)
    rates = {n: max(module.fma_rate(n, 20_000_000) for _ in range(5)) for n in sorted({1, threads})}
    return {"flags": [f for f in flags if f.startswith("-m")], "gflops_by_threads": rates}


def child(side: turns.Side, n_turns: int, reps: int, context: int, sizes: list[int], dtype: str) -> None:
    """One tree's side: the model loaded, then at each of its turns the fastest of `reps` for a step and each M."""
    sys.path.insert(0, side.tree)
    import torch

    from inference.store.loading import load_model

    decoder = load_model("default", device="cpu", dtype=dtype).decoder
    cache = decoder.new_cache(context + max(sizes) + 8)
    with torch.inference_mode():
        decoder.forward(torch.arange(100, 100 + context) % 1000, 0, cache)

        def fastest(m: int) -> float:
            each = []
            for _ in range(reps):
                started = time.perf_counter()
                decoder.forward(torch.arange(200, 200 + m), context, cache, all_logits=True)
                each.append((time.perf_counter() - started) * 1000)
                cache.crop(context)
            return min(each)

        for m in [1] + sizes:  # a first pass: every path warm in both trees alike
            fastest(m)
        side.ready()
        rounds = [{str(m): fastest(m) for m in [1] + sizes} for _ in side.turns(n_turns)]
    print(json.dumps({"rounds": rounds, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)


def table(sides: dict, sizes: list[int]) -> dict:
    """Per M: each side's median ms and median per-turn ratio to its own step, and this tree / the reference."""
    out = {}
    for m in [1] + sizes:
        row = {}
        for name, rounds in sides.items():
            row[name] = {"ms_median": statistics.median(r[str(m)] for r in rounds),
                         "x_step_median": statistics.median(r[str(m)] / r["1"] for r in rounds),
                         "x_step_range": [min(r[str(m)] / r["1"] for r in rounds),
                                          max(r[str(m)] / r["1"] for r in rounds)]}
        row["this_vs_reference"] = statistics.median(
            a[str(m)] / b[str(m)] for a, b in zip(sides["this"], sides["reference"]))
        out[str(m)] = row
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", help="the reference commit (checked out in a temporary worktree)")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 3, 4, 5, 8, 16])
    parser.add_argument("--dtype", default="float32", choices=["float32", "int8"])
    parser.add_argument("--peak", action="store_true", help="also measure this machine's fma rate")
    turns.child_option(parser)
    results.json_option(parser, "small_m")
    args = parser.parse_args()
    if args.child:
        child(turns.Side(*args.child), args.turns, args.reps, args.context, args.sizes, args.dtype)
        return 0
    if not args.ref:
        parser.error("--ref is needed")
    out = turns.run(__file__, args.ref, ["--turns", str(args.turns), "--reps", str(args.reps), "--context",
                                         str(args.context), "--dtype", args.dtype, "--sizes", *map(str, args.sizes)])
    sides = {name: report["rounds"] for name, report in out.items()}
    import torch

    report = {"machine": results.cpu(), "kernels_flags": os.environ.get("TOKENSTEP_KERNELS_FLAGS"),
              "ref": args.ref, "context": args.context, "dtype": args.dtype,
              "turns": args.turns, "reps": args.reps, "torch": torch.__version__, "sides": sides,
              "table": table(sides, args.sizes)}
    if args.peak:
        report["fma_peak"] = fma_peak(torch.get_num_threads())
    print(f"context {args.context}, {args.dtype}, {args.turns} turns, fastest of {args.reps}; "
          f"ms (x the same side's step, median of turns)")
    print(f"{'M':>3} {'this ms':>8} {'x step':>7} {'ref ms':>8} {'x step':>7} {'this/ref':>9}")
    for m, row in report["table"].items():
        a, b = row["this"], row["reference"]
        print(f"{m:>3} {a['ms_median']:8.1f} {a['x_step_median']:7.2f} {b['ms_median']:8.1f} "
              f"{b['x_step_median']:7.2f} {row['this_vs_reference']:9.3f}")
    if args.peak:
        print("fma peak GFLOP/s by threads:", report["fma_peak"]["gflops_by_threads"])
    results.write(args.json, "small_m", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
