"""The int8 mode on stock ops (CPU without the own kernels: TOKENSTEP_KERNELS=0, macOS, ARM, Windows) against
float32 on stock ops, and against the stock int8 path it replaced, side by side in one process.

    PYTHONPATH=. python benchmarks/bench_int8_stock.py [--threads 2] [--repeats 9] [--json [PATH]]

Three builds of the default model, every one on the stock CPU backend (select_backend(allow_own_kernels=False)):
- "int8": quant.NibbleInt8Linear, quantize_rows's int8 weights and group scales as 4-bit halves on torch's
  int4 kernel (what load_model builds for int8 without the kernels);
- "int8 row-scaled": the stock path before it, one scale per row on torch's int8 kernel (rebuilt here);
- "float32": RowBlockLinear.
Every repeat runs each build's decode (greedy steps after a 16-token prompt) and prefills, in an order that
alternates between repeats; medians of the per-repeat ms and of the per-repeat ratios are reported (on a
shared machine the fastest repeat too). Quality: on benchmarks/int8_quality.py's 25 prompts (which hold
tests/kernels/test_low_precision.py's five), the first step of each int8 build against float32's: top-1 equal, and
the change of float32's top token's probability (the test's bound: |dp| <= 0.03).
Without --json the result goes to benchmarks/results/int8_stock/<machine>_<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from benchmarks.bench_decode import cpu_facts  # noqa: E402
from benchmarks.int8_quality import PROMPTS  # noqa: E402
from inference.model import quant  # noqa: E402
from inference.model.layers import select_backend  # noqa: E402
from inference.store.loading import resolve_folder  # noqa: E402
from inference.model.packing import weights_bytes  # noqa: E402
from inference.text.tokenizer import Tokenizer  # noqa: E402
from tiny import build_decoder  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)

PROMPT_TOKENS = 16


@dataclass
class RowScaledInt8Linear(quant.NibbleInt8Linear):
    """The stock int8 product this benchmark compares against: one scale per row, torch's int8 kernel on bfloat16
    activations (what quant.py built before NibbleInt8Linear, whose calls around `product` it shares)."""

    scale: torch.Tensor | None = None  # (out,) bfloat16

    def product(self, x: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(x.to(torch.bfloat16), self.weight, self.scale).float()


def row_scaled_int8_linear(weight, bias, backend) -> RowScaledInt8Linear:
    q, scale = quant.quantize_rows(weight.float(), weight.shape[1])
    return RowScaledInt8Linear(q.contiguous(), bias, scale=scale.view(-1))


def stock_builds(folder: Path) -> dict:
    """name -> the default model's Decoder on stock CPU ops."""
    int8 = select_backend("cpu", torch.int8, allow_own_kernels=False)
    builds = {"int8": build_decoder(folder, int8)}
    with mock.patch.object(quant, "int8_linear", row_scaled_int8_linear):  # int8_head's product too
        builds["int8 row-scaled"] = build_decoder(folder, int8)
    builds["float32"] = build_decoder(folder, select_backend("cpu", torch.float32, allow_own_kernels=False))
    return builds


def decode_ms(decoder, tokens: int) -> float:
    """ms per greedy step after a PROMPT_TOKENS-token prompt."""
    cache = decoder.new_cache(PROMPT_TOKENS + tokens + 1)
    with torch.inference_mode():
        logits = decoder.forward(torch.arange(5, 5 + PROMPT_TOKENS), 0, cache)
        started = time.perf_counter()
        for i in range(tokens):
            logits = decoder.forward(torch.tensor([int(torch.argmax(logits[0]))]), PROMPT_TOKENS + i, cache)
    return (time.perf_counter() - started) / tokens * 1000


def prefill_ms(decoder, tokens: int) -> float:
    cache = decoder.new_cache(tokens)
    with torch.inference_mode():
        started = time.perf_counter()
        decoder.forward(torch.arange(5, 5 + tokens), 0, cache)
    return (time.perf_counter() - started) * 1000


def first_steps(builds: dict, tokenizer: Tokenizer) -> list[dict]:
    """Per prompt: float32's top token and its probability, and each int8 build's top-1 agreement and dp."""
    rows = []
    for prompt in PROMPTS:
        ids = torch.tensor(tokenizer.encode(prompt))
        p = {}
        for name, decoder in builds.items():
            with torch.inference_mode():
                logits = decoder.forward(ids, 0, decoder.new_cache(len(ids)))[0]
            p[name] = torch.softmax(logits.double(), 0)
        top = int(p["float32"].argmax())
        row = {"prompt": prompt, "top": top, "p_top_float32": float(p["float32"][top])}
        for name in builds:
            if name != "float32":
                row[name] = {"top1_equal": int(p[name].argmax()) == top, "dp": float(p[name][top] - p["float32"][top])}
        rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--tokens", type=int, default=32, help="decode steps per repeat")
    parser.add_argument("--prefill", default="16,128", help="prompt lengths, comma-separated")
    results.json_option(parser, "int8_stock", always=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)  # before the builds: float32's row blocks follow the thread count
    folder = resolve_folder("default")
    builds = stock_builds(folder)
    names = list(builds)
    prefills = [int(n) for n in args.prefill.split(",") if n]

    quality = first_steps(builds, Tokenizer.from_folder(folder))
    for build in builds.values():  # warm up
        decode_ms(build, 4)

    decode = {name: [] for name in names}
    prefill = {f"{name}, {n} tokens": [] for name in names for n in prefills}
    for repeat in range(args.repeats):
        for name in names if repeat % 2 == 0 else reversed(names):
            decode[name].append(decode_ms(builds[name], args.tokens))
            for n in prefills:
                prefill[f"{name}, {n} tokens"].append(prefill_ms(builds[name], n))

    def ratio(runs: dict, a: str, b: str) -> dict:
        """a over b: the median of the per-repeat ratios, and of the two fastest repeats (a burst of the
        machine's other load slows single repeats, never speeds them)."""
        each = [x / y for x, y in zip(runs[a], runs[b])]
        return {"median": statistics.median(each), "fastest": min(runs[a]) / min(runs[b]), "all": each}

    decode_ratios = {"int8 / float32": ratio(decode, "int8", "float32"),
                     "int8 row-scaled / float32": ratio(decode, "int8 row-scaled", "float32"),
                     "int8 / int8 row-scaled": ratio(decode, "int8", "int8 row-scaled")}
    prefill_ratios = {f"int8 / float32, {n} tokens": ratio(prefill, f"int8, {n} tokens", f"float32, {n} tokens")
                      for n in prefills}

    def summary(runs: dict) -> dict:
        return {k: {"median": statistics.median(v), "min": min(v), "all": v} for k, v in runs.items()}

    facts = cpu_facts()
    result = {
        "bench": "int8_stock", "date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": facts,
        "torch": torch.__version__, "threads": args.threads, "repeats": args.repeats,
        "decode_tokens": args.tokens, "prompt_tokens": PROMPT_TOKENS,
        "weights_bytes": {name: weights_bytes(build.weights) for name, build in builds.items()},
        "decode_ms": summary(decode), "decode_ratios": decode_ratios,
        "prefill_ms": summary(prefill), "prefill_ratios": prefill_ratios,
        "first_step": quality,
        "first_step_summary": {name: {"largest_abs_dp": max(abs(q[name]["dp"]) for q in quality),
                                      "top1_swaps": sum(not q[name]["top1_equal"] for q in quality)}
                               for name in names if name != "float32"},
    }
    for name, s in result["decode_ms"].items():
        print(f"decode {name:16s} median {s['median']:7.2f} ms/token  min {s['min']:7.2f}")
    for name, s in {**result["decode_ratios"], **result["prefill_ratios"]}.items():
        print(f"{name:34s} median {s['median']:.3f}  fastest repeats {s['fastest']:.3f}")
    for name, s in result["prefill_ms"].items():
        print(f"prefill {name:28s} median {s['median']:8.1f} ms")
    for name, s in result["first_step_summary"].items():
        print(f"first step, {name:16s} largest |dp| {s['largest_abs_dp']:.4f}, top-1 swaps {s['top1_swaps']} "
              f"of {len(quality)}")
    results.write(args.json, "int8_stock", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
