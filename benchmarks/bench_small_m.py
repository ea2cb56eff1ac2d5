"""What a forward pass over M positions costs against a one-position step (issue 38), before and after the
small-M kernels, side by side in one process.

    PYTHONPATH=. python benchmarks/bench_small_m.py [--rounds 12] [--reps 5] [--contexts 16 128 512]
        [--sizes 1 2 4 5 8 16] [--dtype float32] [--json benchmarks/results/small_m/<machine>_<date>.json]

The default model is loaded once; for each context length c the cache holds c positions of a prompt, and a
pass of M positions (a verify pass: every row's logits, `all_logits=True`) runs at positions c..c+M-1, then
the cache is cropped back to c. Every round runs both sides, in alternating order: "before" with the
kernels' products for one row only (KernelLinear.most_rows = 1: M > 1 goes to BLAS, today's path) and
"after" with the small-M products (most_rows as the loaded model chose it). Each figure is the median of
`reps` passes; reported per (side, context, M): the median ms over the rounds, the median of the per-round
ratios to the same side's one-position step, and the spread of that ratio (min and max over the rounds).
The rows' logits of the two sides must agree within 1e-4 (they are not the same bits: BLAS sums otherwise).
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from inference.model import layers  # noqa: E402
from inference.store.loading import load_model  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


def timed_pass(decoder, cache, ids: torch.Tensor, context: int, reps: int) -> tuple[float, torch.Tensor]:
    """The median ms of `reps` passes of ids at position `context`, and the last pass's logits."""
    each = []
    for _ in range(reps):
        started = time.perf_counter()
        logits = decoder.forward(ids, context, cache, all_logits=True)
        each.append((time.perf_counter() - started) * 1000)
        cache.crop(context)
    return statistics.median(each), logits


def run(decoder, contexts, sizes, rounds: int, reps: int, most_rows: int) -> dict:
    """{side: {context: {M: [ms per round]}}} for the two sides, and the largest logit difference seen."""
    sides = {"before": 1, "after": most_rows}
    times = {side: {c: {m: [] for m in sizes} for c in contexts} for side in sides}
    worst = 0.0
    with torch.inference_mode():
        for c in contexts:
            cache = decoder.new_cache(c + max(sizes) + 8)
            decoder.forward(torch.arange(100, 100 + c) % 1000, 0, cache)
            for r in range(rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                logits = {}
                for side in order:
                    layers.KernelLinear.most_rows = sides[side]
                    for m in sizes:
                        ms, logits[(side, m)] = timed_pass(decoder, cache, torch.arange(7, 7 + m), c, reps)
                        times[side][c][m].append(ms)
                for m in sizes:
                    worst = max(worst, (logits[("before", m)] - logits[("after", m)]).abs().max().item())
    layers.KernelLinear.most_rows = most_rows
    return {"times": times, "worst_logit_difference": worst}


def summary(times: dict, sizes) -> dict:
    out = {}
    for side, per_context in times.items():
        for c, per_m in per_context.items():
            one = per_m[sizes[0]]
            for m, ms in per_m.items():
                ratios = [a / b for a, b in zip(ms, one)]
                out[f"{side} c={c} M={m}"] = {"ms": statistics.median(ms), "ratio": statistics.median(ratios),
                                              "ratio_min": min(ratios), "ratio_max": max(ratios)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--contexts", type=int, nargs="+", default=[16, 128, 512])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 5, 8, 16])
    parser.add_argument("--dtype", default="float32")
    results.json_option(parser, "small_m")
    args = parser.parse_args(argv)
    if args.sizes[0] != 1:
        sys.exit("--sizes must start with 1: the ratios are to a one-position step")
    decoder = load_model("default", device="cpu", dtype=args.dtype).decoder
    if decoder.backend.kernels is None:
        sys.exit("the decode kernels are not in use here: nothing to compare")
    most_rows = getattr(layers.KernelLinear, "most_rows", 1)
    measured = run(decoder, args.contexts, args.sizes, args.rounds, args.reps, most_rows)
    if measured["worst_logit_difference"] > 1e-4:
        sys.exit(f"the two sides' logits differ by {measured['worst_logit_difference']:.2e}")
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(["python", *sys.argv]),
              "threads": torch.get_num_threads(), "dtype": args.dtype, "most_rows": most_rows,
              "worst_logit_difference": measured["worst_logit_difference"],
              "passes": summary(measured["times"], args.sizes)}
    for name, m in report["passes"].items():
        print(f"{name:22s} {m['ms']:7.2f} ms  x{m['ratio']:.2f} of M=1  ({m['ratio_min']:.2f}-{m['ratio_max']:.2f})")
    results.write(args.json, "small_m", {**report, "raw": measured["times"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
