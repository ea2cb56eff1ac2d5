"""What a forward pass over M positions costs against a one-position step (issue 38), layer by layer through Python
and in one kernels call, side by side in one process.

    PYTHONPATH=. python benchmarks/bench_small_m.py [--rounds 12] [--reps 5] [--contexts 16 128 512]
        [--sizes 1 2 4 5 8 16] [--dtype float32] [--products] [--json benchmarks/results/small_m/<machine>_<date>.json]

The default model is loaded once; for each context length c the cache holds c positions of a prompt, and a
pass of M positions (a verify pass: every row's logits, `all_logits=True`) runs at positions c..c+M-1, then
the cache is cropped back to c. Every round runs both sides, in alternating order: "before" runs the pass layer by
layer through Python, each product on the small-M kernels (Decoder.most_fused_rows = 1), "after" every layer in one
kernels call (csrc/rows.h decode_rows; most_fused_rows as the decoder has it). Each figure is the fastest
of `reps` passes (a shared machine: the fastest pass is the least disturbed one); reported per (side,
context, M): the median ms over the rounds, the median of the per-round ratios to the same side's
one-position step, and the spread of that ratio (min and max over the rounds). `--products` also times the
first layer's products and the head alone, M rows (--sizes) on the kernels against BLAS: the crossover.
The rows' logits of the two sides must agree within 1e-4 (not the same bits: "before" attends through SDPA; int8:
the ten best of each row within 1e-3 of the largest of them plus 1).
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
from inference.model.decoder import Decoder  # noqa: E402
from inference.store.loading import load_model  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


def timed_pass(decoder, cache, ids: torch.Tensor, context: int, reps: int) -> tuple[float, torch.Tensor]:
    """The fastest of `reps` passes of ids at position `context` in ms (this machine is shared: the fastest is the
    least disturbed), and the last pass's logits."""
    each = []
    for _ in range(reps):
        started = time.perf_counter()
        logits = decoder.forward(ids, context, cache, all_logits=True)
        each.append((time.perf_counter() - started) * 1000)
        cache.crop(context)
    return min(each), logits


def run(decoder, contexts, sizes, rounds: int, reps: int, most_rows: int) -> dict:
    """{side: {context: {M: [ms per round]}}} for the two sides, and the largest logit difference seen."""
    sides = {"before": 1, "after": most_rows}  # Decoder.most_fused_rows
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
                    Decoder.most_fused_rows = sides[side]
                    for m in sizes:
                        ms, logits[(side, m)] = timed_pass(decoder, cache, torch.arange(7, 7 + m), c, reps)
                        times[side][c][m].append(ms)
                for m in sizes:
                    before, after = logits[("before", m)], logits[("after", m)]
                    if decoder.backend.dtype == torch.int8:  # the int8 head's logits outside its best 64 are
                        best = after.topk(10).indices  # 8-bit estimates: the ten best of each row
                        before, after = before.gather(1, best), after.gather(1, best)
                        worst = max(worst, ((before - after).abs().max() / (before.abs().max() + 1)).item())
                        continue
                    worst = max(worst, (before - after).abs().max().item())
                print(f"[bench] context {c}: round {r + 1}/{rounds} done", file=sys.stderr)
    Decoder.most_fused_rows = most_rows
    return {"times": times, "worst_logit_difference": worst}


def products(decoder, sizes, rounds: int, reps: int) -> dict:
    """{matrix: {M: {"kernels": [us per round], "blas": [...]}}}: the first layer's four products and the head,
    M rows on the small-M kernels against the same rows through BLAS (F.linear), the two alternating every round;
    each figure the fastest of `reps` calls (shared machine: the fastest is the least disturbed)."""
    first = decoder.weights.layers[0]
    mats = {"qkv": first.qkv.weight, "o": first.o.weight, "gate+up": first.mlp_in.weight,
            "down": first.mlp_out.weight, "head": decoder.weights.lm_head.weight}
    ops = decoder.backend.kernels
    sides = {"kernels": lambda w, x: ops.gemv_f32(w, x, 1.0, None, None),
             "blas": lambda w, x: torch.nn.functional.linear(x, w)}
    out = {name: {m: {side: [] for side in sides} for m in sizes} for name in mats}
    with torch.inference_mode():
        for r in range(rounds):
            for name, w in mats.items():
                for m in sizes:
                    x = torch.randn(m, w.shape[1])
                    for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                        each = []
                        for _ in range(reps):
                            started = time.perf_counter()
                            sides[side](w, x)
                            each.append((time.perf_counter() - started) * 1e6)
                        out[name][m][side].append(min(each))
            print(f"[bench] products: round {r + 1}/{rounds} done", file=sys.stderr)
    return out


def product_summary(measured: dict) -> dict:
    return {f"{name} M={m}": {side: statistics.median(us) for side, us in per_side.items()}
            for name, per_m in measured.items() for m, per_side in per_m.items()}


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
    parser.add_argument("--products", action="store_true",
                        help="also time the first layer's products and the head alone for each M, kernels vs BLAS")
    results.json_option(parser, "small_m")
    args = parser.parse_args(argv)
    if args.sizes[0] != 1:
        sys.exit("--sizes must start with 1: the ratios are to a one-position step")
    decoder = load_model("default", device="cpu", dtype=args.dtype).decoder
    if decoder.backend.kernels is None:
        sys.exit("the decode kernels are not in use here: nothing to compare")
    most_rows = Decoder.most_fused_rows
    product_times = products(decoder, args.sizes, args.rounds, args.reps) if args.products else None
    measured = run(decoder, args.contexts, args.sizes, args.rounds, args.reps, most_rows)
    # int8: "before" runs several rows' products dequantised, "after" each row as its one-position step (int16
    # activations where that is the int8 path: 1/65534 of a group's largest): within 1e-3 of the row's largest + 1
    if measured["worst_logit_difference"] > (1e-4 if args.dtype == "float32" else 1e-3):
        sys.exit(f"the two sides' logits differ by {measured['worst_logit_difference']:.2e}")
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(["python", *sys.argv]),
              "threads": torch.get_num_threads(), "dtype": args.dtype, "most_rows": most_rows,
              "worst_logit_difference": measured["worst_logit_difference"],
              "passes": summary(measured["times"], args.sizes)}
    if product_times is not None:
        report["products_us"] = product_summary(product_times)
        for name, m in report["products_us"].items():
            print(f"{name:14s} kernels {m['kernels']:8.1f} us  blas {m['blas']:8.1f} us  "
                  f"kernels/blas {m['kernels'] / m['blas']:.2f}")
    for name, m in report["passes"].items():
        print(f"{name:22s} {m['ms']:7.2f} ms  x{m['ratio']:.2f} of M=1  ({m['ratio_min']:.2f}-{m['ratio_max']:.2f})")
    results.write(args.json, "small_m", {**report, "raw": measured["times"], "raw_products_us": product_times})
    return 0


if __name__ == "__main__":
    sys.exit(main())
