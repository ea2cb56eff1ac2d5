"""Speculative decoding by prompt lookup (issue 16): decode speed with and without it, greedy, default model.

    PYTHONPATH=. python benchmarks/bench_speculate.py [--speculate 0,4,8] [--repeats 5] [--before-after]
        [--json benchmarks/results/speculate/<machine>_<date>.json]

Three chat tasks: (a) repeat a paragraph exactly (the text to write is in the prompt: drafts should be
accepted), (b) a code edit (rename a variable in a short function), (c) a free-form story. Each is run with
every `--speculate` value in the same process on the same loaded model, the values' order alternating every
repeat, and medians are reported. A run prefills the prompt, then generates up to `--max-new-tokens` (EOS may
end it: greedy decoding takes the same tokens whatever the setting, which the benchmark checks).

Timing: decode = from the end of the prefill to the last token's event, so it covers every forward pass
after the prefill (verify passes, plain steps) and every draw; tokens/s = generated tokens / decode time.
Also reported: forward passes per generated token (Session.forward_count), acceptance = accepted / drafted
tokens over the run's verify passes, tokens a verify pass decided, and the median ms of a verify pass and of
a plain one-token pass (a verify pass reads up to 1 + N positions). `--before-after` runs every draft length
N > 0 twice, alternating: "N" with a verify pass's products on the small-M kernels (issue 38) and "N blas" with
them on BLAS, as before (KernelLinear.most_rows = 1).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

from bench_decode import cpu_facts  # noqa: E402  (benchmarks/ is this script's folder)
from paragraph import PARAGRAPH  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)

CODE = ("def average_price(items):\n    s = 0\n    for item in items:\n        s += item.price * item.quantity\n"
        "    count = len(items)\n    return s / count if count else 0.0\n")
TASKS = {
    "repeat": "Repeat this paragraph exactly: " + PARAGRAPH[:PARAGRAPH.index("Ice is")].strip(),
    "code": "In this Python function, rename the variable s to total. Reply with the complete updated function "
            "only.\n\n```python\n" + CODE + "```",
    "free": "Write a short story about a cat who learns to fly.",
}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def run_once(model, ids: list[int], value: str, max_new_tokens: int) -> dict:
    """One generation with `value` ("N", or "N blas": products of several rows on BLAS): decode time, tokens, passes
    and what the verify passes did."""
    from inference.events import StepDone, Verified
    from inference.model.layers import SMALL_M_ROWS, KernelLinear
    from inference.session.session import GenerationSettings, Session
    from inference.settings import SamplerSettings

    speculate = int(value.split()[0])
    KernelLinear.most_rows = 1 if value.endswith("blas") else SMALL_M_ROWS
    settings = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=max_new_tokens, top_n=1,
                                  speculate=speculate)
    session = Session(model, settings)
    session.prefill(ids)
    passes_before, started = session.forward_count, time.perf_counter()
    tokens, verifies, plain_ms, last = [], [], [], started
    for event in session.run():
        if isinstance(event, StepDone):
            tokens.append(event.token.id)
            last = time.perf_counter()
            if not event.verified_by and len(tokens) > 1:  # step 1's distribution came from the prefill
                plain_ms.append(event.forward_ms)
        elif isinstance(event, Verified):
            verifies.append(event)
    return {"tokens": tokens, "decode_s": last - started, "passes": session.forward_count - passes_before,
            "drafted": sum(len(v.drafted) for v in verifies), "accepted": sum(v.accepted for v in verifies),
            "verify_passes": len(verifies), "verify_emitted": sum(v.emitted for v in verifies),
            "verify_ms": [v.forward_ms for v in verifies], "plain_ms": plain_ms}


def measure(model, prompts: dict[str, list[int]], values: list[str], args) -> dict:
    runs = {task: {n: [] for n in values} for task in prompts}
    for task, ids in prompts.items():  # warm-up: first calls pay one-off set-up costs
        for n in values:
            run_once(model, ids, n, 8)
    for repeat in range(args.repeats):
        order = values if repeat % 2 == 0 else values[::-1]
        for task, ids in prompts.items():
            for n in order:
                runs[task][n].append(run_once(model, ids, n, args.max_new_tokens))
        print(f"[bench] repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
    return runs


def summarise(task_runs: dict[int, list[dict]]) -> dict:
    """Per speculate value: medians over repeats, and the ratio of tokens/s to speculate 0's."""
    out = {}
    for n, runs in task_runs.items():
        first = runs[0]
        rates = [len(r["tokens"]) / r["decode_s"] for r in runs]
        out[n] = {"tokens": len(first["tokens"]), "tokens_per_s": median(rates), "samples_tokens_per_s": rates,
                  "passes_per_token": first["passes"] / len(first["tokens"]),
                  "acceptance": first["accepted"] / first["drafted"] if first["drafted"] else None,
                  "tokens_per_verify": first["verify_emitted"] / first["verify_passes"]
                  if first["verify_passes"] else None,
                  "verify_ms": median([ms for r in runs for ms in r["verify_ms"]]),
                  "plain_pass_ms": median([ms for r in runs for ms in r["plain_ms"]]),
                  "same_tokens_as_0": all(r["tokens"] == task_runs["0"][0]["tokens"] for r in runs)}
    base = out["0"]["tokens_per_s"]
    for entry in out.values():
        entry["ratio"] = entry["tokens_per_s"] / base
    return out


def table(report: dict) -> str:
    def cell(value, fmt):
        return "-" if value is None or value != value else format(value, fmt)

    lines = [f"{report['date']}  {report['cpu']['model']}  {report['threads']} threads  "
             f"flags: {' '.join(report['cpu']['flags'])}  torch {report['torch']}",
             f"default model {report['dtype']}, greedy, chat; up to {report['max_new_tokens']} new tokens; medians "
             f"of {report['repeats']} alternating repeats", ""]
    header = ["task", "speculate", "tokens", "tok/s", "ratio", "passes/tok", "acceptance", "tok/verify",
              "verify ms", "1-tok pass ms", "same ids"]
    rows = []
    for task, per_value in report["tasks"].items():
        for n, s in per_value.items():
            rows.append([task, str(n), str(s["tokens"]), cell(s["tokens_per_s"], ".1f"), cell(s["ratio"], ".2f") + "x",
                         cell(s["passes_per_token"], ".2f"), cell(s["acceptance"], ".0%"),
                         cell(s["tokens_per_verify"], ".2f"), cell(s["verify_ms"], ".1f"),
                         cell(s["plain_pass_ms"], ".1f"), "yes" if s["same_tokens_as_0"] else "NO"])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    fmt = lambda row: "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])  # noqa: E731
                                for i, c in enumerate(row))
    return "\n".join([*lines, fmt(header), *[fmt(r) for r in rows]])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="float32", choices=("float32", "int8", "bfloat16"))
    parser.add_argument("--speculate", default="0,4,8", help="draft lengths to compare, comma-separated (0 first)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--before-after", action="store_true",
                        help="also each draft length with a verify pass's products on BLAS (before issue 38)")
    parser.add_argument("--threads", type=int, default=None, help="default: torch's default on this machine")
    results.json_option(parser, "speculate")
    args = parser.parse_args(argv)
    import torch

    from inference.store.loading import load_model
    from inference.session.session import prompt_ids

    if args.threads:
        torch.set_num_threads(args.threads)
    lengths = sorted({int(v) for v in args.speculate.split(",")} | {0})
    values = [str(n) for n in lengths] + ([f"{n} blas" for n in lengths if n] if args.before_after else [])
    loaded = load_model(args.model, device="cpu", dtype=args.dtype)
    prompts = {task: prompt_ids(loaded, text, chat=True)[0] for task, text in TASKS.items()}
    started = time.time()
    runs = measure(loaded, prompts, values, args)
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(["python", *sys.argv]),
              "seconds": round(time.time() - started, 1), "threads": torch.get_num_threads(),
              "repeats": args.repeats, "max_new_tokens": args.max_new_tokens, "dtype": loaded.dtype,
              "cpu": cpu_facts(), "torch": torch.__version__, "python": platform.python_version(),
              "prompt_tokens": {task: len(ids) for task, ids in prompts.items()},
              "tasks": {task: summarise(task_runs) for task, task_runs in runs.items()}}
    print(table(report))
    results.write(args.json, "speculate", report)
    return 0 if all(s["same_tokens_as_0"] for t in report["tasks"].values() for s in t.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
