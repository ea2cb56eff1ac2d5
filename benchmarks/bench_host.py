"""A/B of a decode step's host work (the draw and the report), side by side in one process.

    PYTHONPATH=. python benchmarks/bench_host.py [--dtypes float32,int8] [--rounds 20] [--steps 32]
        [--json benchmarks/results/host/<machine>_<date>.json]

A step is the forward plus the host work on its logits: the softmax, entropy, top-n candidates, the draw,
the candidates' texts, the event. Side `kernel` is the app as it is (csrc/vocab.h's vocab_stats, the
tokenizer's cached texts); side `torch` takes the torch ops of sampling._by_torch and reads each
candidate's text with its own `peek` (what a step did before). Every round runs a greedy session of
`--steps` steps on each side, in alternating order, on the same loaded model, after a 128-token prompt;
reported: medians over rounds of the whole step (ms), of the host part alone (Session._draw, ms), and
of the per-round ratio kernel / torch. The tokens must be the same on both sides.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inference.session import sampling  # noqa: E402
from inference.text import tokenizer
from inference.store.loading import load_model  # noqa: E402
from inference.session.sampling import SamplerSettings  # noqa: E402
from inference.session.session import GenerationSettings, Session  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


class Side:
    """Patches the module functions for one side while a round of it runs."""

    def __init__(self, name: str):
        self.name = name
        self.saved = (sampling._by_kernel, tokenizer.TextStream.peek_many)

    def __enter__(self):
        if self.name == "torch":
            sampling._by_kernel = lambda logits, top_n, greedy: None
            tokenizer.TextStream.peek_many = lambda stream, ids: tuple(stream.peek(int(i)) for i in ids)
        return self

    def __exit__(self, *exc):
        sampling._by_kernel, tokenizer.TextStream.peek_many = self.saved


def one_round(model, steps: int) -> dict:
    draws: list[float] = []
    original = Session._draw

    def timed(self, *args, **kwargs):
        started = time.perf_counter()
        result = original(self, *args, **kwargs)
        draws.append(time.perf_counter() - started)
        return result

    Session._draw = timed
    try:
        session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=steps + 1))
        session.prefill(list(range(100, 228)))
        stamps, tokens = [], []
        for event in session.run():
            if hasattr(event, "token"):
                stamps.append(time.perf_counter())
                tokens.append(event.token.id)
    finally:
        Session._draw = original
    return {"step_ms": (stamps[-1] - stamps[0]) / (len(stamps) - 1) * 1000,
            "draw_ms": statistics.median(draws) * 1000, "tokens": tokens}


def measure(dtype: str, rounds: int, steps: int) -> dict:
    loaded = load_model("default", device="cpu", dtype=dtype)
    model = replace(loaded, config=replace(loaded.config, eos_ids=()))
    runs = {"kernel": [], "torch": []}
    with torch.inference_mode():
        for side in runs:  # warm-up
            with Side(side):
                one_round(model, 4)
        for r in range(rounds):
            for side in (("kernel", "torch") if r % 2 == 0 else ("torch", "kernel")):
                with Side(side):
                    runs[side].append(one_round(model, steps))
    assert all(run["tokens"] == runs["kernel"][0]["tokens"] for side in runs for run in runs[side]), "tokens differ"
    out = {"decode_path": loaded.decoder.decode_path}
    for key in ("step_ms", "draw_ms"):
        for side in runs:
            out[f"{side}_{key}"] = statistics.median(run[key] for run in runs[side])
        out[f"ratio_{key}"] = statistics.median(a[key] / b[key] for a, b in zip(runs["kernel"], runs["torch"]))
    out["rounds"] = {side: [{k: round(v, 4) for k, v in run.items() if k != "tokens"} for run in rs]
                     for side, rs in runs.items()}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtypes", default="float32,int8")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=32)
    results.json_option(parser, "host")
    args = parser.parse_args(argv)
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": {}}
    print("| dtype | step ms, kernel / torch | ratio | host ms, kernel / torch | ratio |\n|---|---|---:|---|---:|")
    for dtype in args.dtypes.split(","):
        r = report["results"][dtype] = measure(dtype, args.rounds, args.steps)
        print(f"| {dtype} | {r['kernel_step_ms']:.2f} / {r['torch_step_ms']:.2f} | {r['ratio_step_ms']:.3f} | "
              f"{r['kernel_draw_ms']:.3f} / {r['torch_draw_ms']:.3f} | {r['ratio_draw_ms']:.3f} |", flush=True)
    results.write(args.json, "host", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
