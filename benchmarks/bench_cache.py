"""Decode with the KV cache against decode without it, at several context lengths, in one run.

    PYTHONPATH=. python benchmarks/bench_cache.py [--contexts 16,128,512] [--steps 8] [--repeats 3]
        [--json benchmarks/results/cache/<machine>_<date>.json]

For each context length L: read a prompt of L tokens, then time `--steps` decode steps (each step's
forward_ms as the session reports it: the pass that produced that step's distribution), once with the
cache and once without (every pass re-reads the whole prefix). The two modes alternate within every
repeat; medians are reported, with the ratio. Beside the times, what one step computes in each mode from
the model's shapes: the K/V projections of the new position only (cached) or of every position (no
cache), and the K/V bytes the cached step reads back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from benchmarks.bench_decode import cpu_facts  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)


def step_ms(model, ids: list[int], steps: int, kv_cache: bool) -> float:
    from inference.events import StepDone
    from inference.session.session import Session
    from inference.settings import GenerationSettings, SamplerSettings

    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=steps + 2))
    session.use_kv_cache(kv_cache)
    session.prefill(ids)
    times = [e.forward_ms for _ in range(steps + 1) for e in session.step() if isinstance(e, StepDone)]
    return statistics.median(times[1:])  # step 1 is drawn from the prefill's logits


def per_step_work(config, n_context: int, kv_bytes_per_token: int) -> dict:
    """Multiply-adds of the K and V projections, and the cache bytes read, in one decode step."""
    kv_proj = 2 * config.n_layers * config.hidden * config.n_kv_heads * config.head_dim
    return {"kv_projection_macs_cached": kv_proj, "kv_projection_macs_no_cache": kv_proj * (n_context + 1),
            "kv_bytes_read_cached": kv_bytes_per_token * n_context}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--contexts", default="16,128,512")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    results.json_option(parser, "cache")
    args = parser.parse_args(argv)

    from inference.store.loading import load_model
    from paragraph import PARAGRAPH

    loaded = load_model(args.model, device="cpu", dtype="float32")
    model = replace(loaded, config=replace(loaded.config, eos_ids=()))
    text_ids = model.tokenizer.encode(PARAGRAPH + " ")
    rows = []
    for n in (int(c) for c in args.contexts.split(",")):
        ids = (text_ids * (n // len(text_ids) + 1))[:n]
        times = {True: [], False: []}
        for r in range(args.repeats):
            for kv_cache in ((True, False) if r % 2 == 0 else (False, True)):
                times[kv_cache].append(step_ms(model, ids, args.steps, kv_cache))
        cached, plain = statistics.median(times[True]), statistics.median(times[False])
        rows.append({"context": n, "cached_ms": cached, "no_cache_ms": plain, "ratio": plain / cached,
                     **per_step_work(model.config, n, model.info().kv_bytes_per_token)})
        print(f"[bench] context {n} done", file=sys.stderr)
    cpu = cpu_facts()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {cpu['model']}  {cpu['cores']} cores  "
          f"{model.name} float32  medians of {args.repeats} alternating repeats × {args.steps} steps")
    print(f"{'context':>8} {'cached ms/step':>15} {'no cache ms/step':>17} {'ratio':>7} "
          f"{'K/V proj MACs cached':>21} {'no cache':>14} {'KV read cached':>15}")
    for r in rows:
        print(f"{r['context']:>8} {r['cached_ms']:>15.1f} {r['no_cache_ms']:>17.1f} {r['ratio']:>6.1f}x "
              f"{r['kv_projection_macs_cached']:>21,} {r['kv_projection_macs_no_cache']:>14,} "
              f"{r['kv_bytes_read_cached'] / 1e6:>12.1f} MB")
    results.write(args.json, "cache", {"cpu": cpu, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
