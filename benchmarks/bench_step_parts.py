"""A/B of the decode-step changes of issue 19's second pass, each side by side in one process.

    PYTHONPATH=. python benchmarks/bench_step_parts.py [--rounds 30] [--steps 5]
        [--json benchmarks/results/step_parts/<machine>_<date>.json]

Each pair runs whole decode forwards (one token after a 16-token prompt) in alternating order every
round, on the same loaded model; medians of the per-round times and of the per-round ratios are reported,
and the rounds are split by a read of the packed weights taken at the start of each round (these VMs
swing between ~33 and ~57 GB/s for minutes at a time, and the effects differ between the two):
- `x_offset`: float32, the one-row products reading x 16 bytes past a 64-byte boundary (the default)
  against x 64-byte aligned (csrc/f32.h "Where x sits"); the logits must be the same bits;
- `one_call`: float32 and int8, every layer in one decode_layers call against one decode_layer call per
  layer (the path a lens capture takes); the same bits;
- `int8_head`: int8, the head in one head_rescored call against the six torch ops of quant.RescoredHead;
  the logits within 1e-4.
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

from bench_shapes import span_view  # noqa: E402
from inference.model import decoder as model_module, quant  # noqa: E402
from inference.store.loading import load_model  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


def per_layer(self, x, layers, position, cache, rope, local_rope):
    for index, layer in enumerate(layers):
        x = self.decode_fused(x, layer, index, position, cache, rope, local_rope)
    return x


class NotKernelHead:  # isinstance(head.linear, quant.KernelInt8Linear) fails: RescoredHead takes the torch ops
    pass


def pair(decoder, a, b, rounds: int, steps: int, same):
    """{a, b: [ms per round], ratio: [a / b], read: [ms]}: a() / b() set a side up before its steps."""
    block = span_view(decoder.weights.tensors())
    out = {"read": [], "a": [], "b": [], "ratio": []}
    with torch.inference_mode():
        cache = decoder.new_cache(64)
        decoder.forward(torch.arange(100, 116), 0, cache)
        first = {}
        for r in range(rounds):
            started = time.perf_counter()
            block.sum()
            out["read"].append((time.perf_counter() - started) * 1000)
            times = {}
            for side, setup in ((("a", a), ("b", b)) if r % 2 == 0 else (("b", b), ("a", a))):
                setup()
                each = []
                for i in range(steps):
                    started = time.perf_counter()
                    logits = decoder.forward(torch.tensor([5]), 16 + i, cache)
                    each.append((time.perf_counter() - started) * 1000)
                times[side] = statistics.median(each)
                first.setdefault(side, logits)
            out["a"].append(times["a"])
            out["b"].append(times["b"])
            out["ratio"].append(times["a"] / times["b"])
        same(first["a"], first["b"])
    a()
    return out


def equal(x, y) -> None:
    if not torch.equal(x, y):
        sys.exit("the two sides' logits differ")


def close(x, y) -> None:
    if (x - y).abs().max().item() > 1e-4:
        sys.exit("the two heads' logits differ by more than 1e-4")


def summary(runs: dict) -> dict:
    order = sorted(range(len(runs["read"])), key=runs["read"].__getitem__)
    halves = {"faster half of the rounds": order[:len(order) // 2], "slower half": order[len(order) // 2:]}
    report = {}
    for label, picked in [("all rounds", order), *halves.items()]:
        report[label] = {key: statistics.median(runs[key][i] for i in picked) for key in ("read", "a", "b", "ratio")}
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=5)
    results.json_option(parser, "step_parts")
    args = parser.parse_args(argv)
    block = model_module.Block
    timed = {}
    for dtype in ("float32", "int8"):
        decoder = load_model("default", device="cpu", dtype=dtype).decoder
        ops = decoder.backend.kernels
        if ops is None:
            sys.exit("the decode kernels are not in use here: nothing to compare")
        one_call = block.decode_all
        if dtype == "float32":
            timed["x_offset 16 vs 0 (float32)"] = pair(
                decoder, lambda: ops.set_x_offset(16), lambda: ops.set_x_offset(0),
                args.rounds, args.steps, equal)
        timed[f"one call vs per layer ({dtype})"] = pair(
            decoder, lambda: setattr(block, "decode_all", one_call),
            lambda: setattr(block, "decode_all", per_layer), args.rounds, args.steps, equal)
        if dtype == "int8":
            kernel_class = quant.KernelInt8Linear
            timed["int8 head in one call vs torch ops"] = pair(
                decoder, lambda: setattr(quant, "KernelInt8Linear", kernel_class),
                lambda: setattr(quant, "KernelInt8Linear", NotKernelHead), args.rounds, args.steps, close)
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(["python", *sys.argv]),
              "threads": torch.get_num_threads(), "pairs": {name: summary(runs) for name, runs in timed.items()}}
    for name, parts in report["pairs"].items():
        print(name)
        for label, m in parts.items():
            print(f"  {label:26s} read {m['read']:6.2f} ms  a {m['a']:6.2f} ms  b {m['b']:6.2f} ms  a/b {m['ratio']:.3f}")
    results.write(args.json, "step_parts", {**report, "raw": timed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
