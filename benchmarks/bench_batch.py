"""Many requests at once (issue 39): decode throughput and scheduler step time against the batch size.

    PYTHONPATH=. python benchmarks/bench_batch.py [--sizes 1,2,4,8,16] [--steps 16] [--rounds 2]
        [--json benchmarks/results/batch/<machine>_<date>.json]

The default model in float32, one process, one run. For each batch size N, N requests (different prompts of
PROMPT_TOKENS tokens, greedy, no end of sequence) go through the scheduler (session/batch.py); once all N are
decoding (every pass is N decode rows, no prompt chunk) the next `--steps` scheduler steps are timed: a step is
one forward pass of N rows plus every request's draw and events. Reported per N, as medians over the steps of
every round (the sizes' order alternates each round, so drift does not favour one end of the curve):
- step ms (the whole scheduler step) and pass ms (its forward pass alone: ScheduleDone.forward_ms);
- tokens/s = N / step time, the batch's decode throughput;
- both as ratios to 1 request: the curve the Serving dock draws. The issue's targets: tokens/s at 8 requests
  >= 4x one request, at 16 >= 5x; step time at 8 <= 1.6x at 1.
- the weights-read floor: the bytes a decode step reads (bench_decode.decode_read_bytes) over a streaming read's
  speed (bench_decode.BandwidthSide, measured before and after the sweep), the same for every N since a pass
  reads the weights once for all its rows. A step at N rows costs at least that, plus the rows' arithmetic and
  attention; how far above it the step time climbs with N is what the small-M kernels are for.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

import results  # noqa: E402  benchmarks/results/: where --json writes
from bench_decode import BandwidthSide, decode_read_bytes  # noqa: E402
from paragraph import PARAGRAPH  # noqa: E402

from inference.session.batch import BatchRequest  # noqa: E402
from inference.session.batch_curve import WARM_STEPS, timed_steps  # noqa: E402
from inference.settings import GenerationSettings, SamplerSettings  # noqa: E402
from inference.store.loading import load_model  # noqa: E402

PROMPT_TOKENS = 32
# A request's tokens beyond the timed steps: prompts read over several passes (16 x 32 tokens > the token budget)
# start decoding a few steps apart, and none may finish inside the timed steps.
SPARE_TOKENS = 16


def _prompts(encode, n: int) -> list[list[int]]:
    """n different prompts of PROMPT_TOKENS tokens: windows of the paragraph at different offsets (no two share
    a full block, so every request reads its own prompt)."""
    ids = encode(PARAGRAPH + " " + PARAGRAPH)
    step = max(1, (len(ids) - PROMPT_TOKENS) // max(n, 1))
    return [ids[i * step + (i % 3):i * step + (i % 3) + PROMPT_TOKENS] for i in range(n)]


def measure(model, n: int, steps: int) -> dict:
    """Time `steps` scheduler steps with n requests all decoding: each step's wall ms and its pass's ms."""
    settings = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=steps + WARM_STEPS + SPARE_TOKENS,
                                  top_n=20)
    step_ms, pass_ms = timed_steps(model, [BatchRequest(prompt, settings)
                                           for prompt in _prompts(model.tokenizer.encode, n)], steps)
    return {"step_ms": step_ms, "pass_ms": pass_ms}


def curve(rows: dict[int, dict]) -> list[dict]:
    """Per batch size: medians and ratios to one request (the smallest size measured)."""
    out = []
    base = None
    for n in sorted(rows):
        step, forward = statistics.median(rows[n]["step_ms"]), statistics.median(rows[n]["pass_ms"])
        row = {"requests": n, "step_ms": step, "pass_ms": forward, "tokens_per_s": n / (step / 1000)}
        base = base or row
        row["tokens_per_s_vs_1"] = row["tokens_per_s"] / base["tokens_per_s"]
        row["step_ms_vs_1"] = step / base["step_ms"]
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1,2,4,8,16", help="batch sizes (requests decoding together)")
    parser.add_argument("--steps", type=int, default=16, help="timed scheduler steps per size and round")
    parser.add_argument("--rounds", type=int, default=2, help="sweeps over the sizes, order alternating")
    parser.add_argument("--model", default="default")
    results.json_option(parser, "batch")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    loaded = load_model(args.model, device="cpu", dtype="float32")
    model = dataclasses.replace(loaded, config=dataclasses.replace(loaded.config, eos_ids=()))
    bandwidth = BandwidthSide()
    gb_per_s = [bandwidth.measure()["gb_per_s"]]
    rows: dict[int, dict] = {n: {"step_ms": [], "pass_ms": []} for n in sizes}
    for round_index in range(args.rounds):
        for n in sizes if round_index % 2 == 0 else sizes[::-1]:
            got = measure(model, n, args.steps)
            for key in got:
                rows[n][key] += got[key]
            print(f"[bench] round {round_index + 1}: {n} requests, step {statistics.median(got['step_ms']):.1f} ms",
                  file=sys.stderr)
    gb_per_s.append(bandwidth.measure()["gb_per_s"])
    read_bytes = decode_read_bytes(model.decoder.weights, model.config)
    floor_ms = read_bytes / (statistics.median(gb_per_s) * 1e9) * 1000
    table = curve(rows)

    print(f"{model.info().name}, float32, {model.decoder.decode_path}; prompts of {PROMPT_TOKENS} tokens, greedy; "
          f"medians of {args.steps} x {args.rounds} scheduler steps")
    print(f"weights-read floor: {read_bytes / 1e6:.0f} MB / {statistics.median(gb_per_s):.1f} GB/s = {floor_ms:.1f} ms "
          f"per pass, whatever the rows (read {', '.join(f'{g:.1f}' for g in gb_per_s)} GB/s)")
    print(f"{'requests':>8} {'step ms':>8} {'pass ms':>8} {'tokens/s':>9} {'x tok/s':>8} {'x step':>7} "
          f"{'step/floor':>10}")
    for row in table:
        print(f"{row['requests']:>8} {row['step_ms']:>8.1f} {row['pass_ms']:>8.1f} {row['tokens_per_s']:>9.1f} "
              f"{row['tokens_per_s_vs_1']:>7.2f}x {row['step_ms_vs_1']:>6.2f}x {row['step_ms'] / floor_ms:>9.2f}x")
    at = {row["requests"]: row for row in table}
    targets = {"tokens_per_s_8_vs_1 >= 4": at[8]["tokens_per_s_vs_1"] if 8 in at else None,
               "tokens_per_s_16_vs_1 >= 5": at[16]["tokens_per_s_vs_1"] if 16 in at else None,
               "step_ms_8_vs_1 <= 1.6": at[8]["step_ms_vs_1"] if 8 in at else None}
    print("targets (issue 39): " + "; ".join(f"{k}: {'-' if v is None else f'{v:.2f}'}" for k, v in targets.items()))
    results.write(args.json, "batch", {
        "bench": "batch", "cpu": results.cpu(), "machine": results.machine_name(), "model": model.info().name,
        "dtype": "float32", "decode_path": model.decoder.decode_path, "prompt_tokens": PROMPT_TOKENS,
        "steps": args.steps, "rounds": args.rounds, "floor": {"decode_read_bytes": read_bytes, "gb_per_s": gb_per_s,
                                                              "ms": floor_ms},
        "curve": table, "targets": targets, "raw": {str(n): rows[n] for n in sizes}})


if __name__ == "__main__":
    main()
