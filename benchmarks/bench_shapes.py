"""Each candidate kernel shape's products against a read of the same bytes, side by side in one process.

    PYTHONPATH=. python benchmarks/bench_shapes.py [--dtype float32|int8] [--rounds 9]
        [--json benchmarks/results/shapes/<machine>_<date>.json]

The model's one-row products of that dtype (every matrix a decode step reads, in decode order) run once
per shape and round, each pass followed at once by `torch.sum` over the bytes they span in the packed
weight block, so every ratio compares two reads taken a few milliseconds apart: a shared machine's drift
falls on both. Shapes are interleaved in a fresh order every round; medians and spreads of the per-pass
ratios are reported, with the shape inference/model/kernel_shape.py would choose (lowest median time) and the
one its cache holds for this machine. The shape in force is restored at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import results  # noqa: E402  (benchmarks/results/: where --json writes)

ROOT = Path(__file__).resolve().parent.parent


def span_view(tensors) -> torch.Tensor:
    """The bytes from the first of `tensors` to the end of the last, in their shared (packed) storage, as
    int64: a sum of them is a plain streaming read (not float32: int8 or bfloat16 weights' bytes read as
    float32 can be denormals, slow on some CPUs; not int32: its sum widens a copy to int64 first, 20x slower)."""
    storage = tensors[0].untyped_storage()
    assert all(t.untyped_storage().data_ptr() == storage.data_ptr() for t in tensors), "not one packed block"
    lo = min(t.data_ptr() for t in tensors)
    hi = max(t.data_ptr() + t.numel() * t.element_size() for t in tensors)
    view = torch.empty(0, dtype=torch.uint8).set_(storage, lo - storage.data_ptr(), ((hi - lo) // 8 * 8,))
    return view.view(torch.int64)


def timed_read(block: torch.Tensor) -> float:
    """Milliseconds of one streaming read (a sum) of `block`."""
    started = time.perf_counter()
    block.sum()
    return (time.perf_counter() - started) * 1000


def run(args) -> dict:
    from inference.model import kernel_shape
    from inference.store.loading import load_model

    torch.set_num_threads(args.threads or torch.get_num_threads())
    model = load_model(args.model, device="cpu", dtype=args.dtype)
    ops = model.decoder.backend.kernels
    if ops is None:
        raise SystemExit("the decode kernels are not in use here: nothing to compare")
    kind = kernel_shape.kind_of(model.decoder.backend)
    mats = kernel_shape.products(model.decoder.weights, kind, limit=1 << 62)
    block = span_view([t for w, s, *_ in mats for t in (w, s) if t is not None])
    reads: list[float] = []
    ratios = {s: [] for s in kernel_shape.CANDIDATES}

    def beside(shape, ms):  # the read of the same bytes right after each pass
        reads.append(timed_read(block))
        ratios[shape].append(ms / reads[-1])

    times = kernel_shape.measure(ops, mats, kind, rounds=args.rounds, beside=beside, budget_s=None)
    cached = kernel_shape.read_cached(kernel_shape.cache_file()).get(kind)
    rows = {s.key: {"products_ms": statistics.median(times[s]), "ratio_to_read": statistics.median(ratios[s]),
                    "ratio_min": min(ratios[s]), "ratio_max": max(ratios[s])} for s in times}
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(["python", *sys.argv]),
            "dtype": args.dtype, "threads": torch.get_num_threads(), "rounds": args.rounds,
            "cpu": kernel_shape.cpu_identity()["cpu"], "bytes": kernel_shape.nbytes(mats),
            "span_bytes": block.numel() * 8, "read_ms_median": statistics.median(reads),
            "fastest": kernel_shape.fastest(times).key, "cached": cached.key if cached else None,
            "in_force": kernel_shape.in_force(ops)[kind].key, "shapes": rows}


def table(report: dict) -> str:
    lines = [f"{report['date']}  {report['cpu']}  {report['threads']} threads  {report['dtype']}  "
             f"{len(report['shapes'])} shapes x {report['rounds']} interleaved rounds",
             f"products: {report['bytes'] / 1e6:.0f} MB of weights; read beside: torch.sum over their "
             f"{report['span_bytes'] / 1e6:.0f} MB span, median {report['read_ms_median']:.2f} ms", "",
             f"{'shape':<24}{'products ms':>12}{'/ read':>9}{'min-max':>14}"]
    for key, r in sorted(report["shapes"].items(), key=lambda kv: kv[1]["products_ms"]):
        rows, prefetch = key.split("x")
        marks = [m for m, k in (("fastest", report["fastest"]), ("cached", report["cached"]),
                                ("in force", report["in_force"])) if k == key]
        lines.append(f"{rows} rows, prefetch {prefetch:>5}  {r['products_ms']:>10.2f}{r['ratio_to_read']:>8.2f}x"
                     f"  {r['ratio_min']:.2f}-{r['ratio_max']:.2f}x  {', '.join(marks)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="float32", choices=("float32", "int8"))
    parser.add_argument("--threads", type=int, default=None, help="default: torch's default on this machine")
    parser.add_argument("--rounds", type=int, default=9)
    results.json_option(parser, "shapes")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    report = run(args)
    print(table(report))
    results.write(args.json, "shapes", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
