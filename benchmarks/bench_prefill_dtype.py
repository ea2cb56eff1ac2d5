"""bfloat16 prefill (inference/model/prefill_dtype.py) against float32 prefill: speed, memory and quality.

    PYTHONPATH=. python benchmarks/bench_prefill_dtype.py [--repeats 7] [--threads N]
        [--json benchmarks/results/prefill_dtype/<machine>_<date>.json]

One float32 model is loaded; the mixed mode attaches the bfloat16 copies of its layer matrices, and the
two modes alternate on the same weights in one process. Here the copies serve every forward of 2 rows
or more (the app's threshold, prefill_dtype.PREFILL_ROWS = 18, would leave the short test prompts in
float32 and so measure nothing):
- speed: a prefill of 16/128/512 tokens (tests/support/paragraph.py repeated), the modes alternating every
  repeat; medians and minimums (on a shared machine the minimum is the least disturbed run);
- memory: the copies' bytes, and the peak RSS of a child process that loads the model and prefills 512
  tokens in each mode;
- quality, on benchmarks/int8_quality.py's 25 prompts and two paragraph prompts of 128 and 512 tokens:
  the prefill's last-position logits (max |dlogit|, top-1 equal, |dp| of float32's top token, the largest
  |dp| over the vocabulary), the K/V it writes (max |dK|, |dV| relative to the largest value), and 64
  greedy decode steps after it, teacher-forced (float32 writes the tokens, both read them; the argmax
  compared at every step; |dp| over the first and the last 16 steps shows whether decode drifts),
  and free-running (the length of the common prefix of the two greedy continuations).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support"), str(ROOT / "benchmarks")]

from inference.model import prefill_dtype  # noqa: E402
from inference.store.loading import load_model  # noqa: E402
from int8_quality import PROMPTS  # noqa: E402
from paragraph import PARAGRAPH  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)

LENGTHS = (16, 128, 512)
STEPS = 64


def paragraph_ids(tokenizer, n: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < n:
        ids += tokenizer.encode(PARAGRAPH + " ")
    return ids[:n]


def set_mode(decoder, copies, mode: str) -> None:
    decoder.prefill_weights = copies if mode == "bfloat16" else None


def prefill(decoder, ids: list[int], capacity: int | None = None):
    cache = decoder.new_cache(capacity or len(ids))
    with torch.inference_mode():
        logits = decoder.forward(torch.tensor(ids), 0, cache)[0]
    return logits, cache


def timing(model, copies, repeats: int) -> dict:
    decoder, out = model.decoder, {}
    for n in LENGTHS:
        ids = paragraph_ids(model.tokenizer, n)
        runs = {"float32": [], "bfloat16": []}
        for r in range(repeats + 1):  # the first round warms up and is dropped
            for mode in (("float32", "bfloat16") if r % 2 else ("bfloat16", "float32")):
                set_mode(decoder, copies, mode)
                started = time.perf_counter()
                prefill(decoder, ids)
                if r:
                    runs[mode].append((time.perf_counter() - started) * 1e3)
        med = {m: statistics.median(v) for m, v in runs.items()}
        low = {m: min(v) for m, v in runs.items()}
        out[n] = {"ms": runs, "median_ms": med, "min_ms": low,
                  "ratio_median": med["bfloat16"] / med["float32"], "ratio_min": low["bfloat16"] / low["float32"]}
        print(f"prefill {n:4d}: float32 median {med['float32']:7.1f} ms (min {low['float32']:7.1f}), bfloat16 "
              f"median {med['bfloat16']:7.1f} (min {low['bfloat16']:7.1f}); ratio {out[n]['ratio_median']:.2f}x "
              f"(of minimums {out[n]['ratio_min']:.2f}x)", flush=True)
    set_mode(decoder, copies, "float32")
    return out


def compare_prefill(model, copies, ids: list[int]) -> dict:
    decoder = model.decoder
    results = {}
    for mode in ("float32", "bfloat16"):
        set_mode(decoder, copies, mode)
        results[mode] = prefill(decoder, ids, len(ids) + STEPS)
    (ref, ref_cache), (mix, mix_cache) = results["float32"], results["bfloat16"]
    p_ref, p_mix = torch.softmax(ref.double(), 0), torch.softmax(mix.double(), 0)
    top = int(torch.argmax(ref))
    n = len(ids)
    k_ref, v_ref = ref_cache.data[:, 0, :, :n], ref_cache.data[:, 1, :, :n]
    k_mix, v_mix = mix_cache.data[:, 0, :, :n], mix_cache.data[:, 1, :, :n]
    report = {
        "tokens": n, "top1_equal": top == int(torch.argmax(mix)), "max_abs_logit": float((ref - mix).abs().max()),
        "p_top": float(p_ref[top]), "abs_dp_top": float((p_ref[top] - p_mix[top]).abs()),
        "max_abs_dp": float((p_ref - p_mix).abs().max()), "kv_dtype": str(mix_cache.data.dtype),
        "max_rel_dk": float((k_ref - k_mix).abs().max() / k_ref.abs().max()),
        "max_rel_dv": float((v_ref - v_mix).abs().max() / v_ref.abs().max())}
    report.update(decode_after(model, results, ids))
    set_mode(decoder, copies, "float32")
    return report


def decode_after(model, results: dict, ids: list[int]) -> dict:
    """Float32 decode after each prefill: teacher-forced by float32's greedy tokens, then free-running."""
    decoder = model.decoder
    (ref, ref_cache), (mix, mix_cache) = results["float32"], results["bfloat16"]
    n, agree, gaps = len(ids), 0, []
    own = [[int(torch.argmax(ref))], [int(torch.argmax(mix))]]  # free-running continuations
    with torch.inference_mode():
        for step in range(STEPS):
            token = int(torch.argmax(ref))
            agree += token == int(torch.argmax(mix))
            gaps.append(float((torch.softmax(ref.double(), 0) - torch.softmax(mix.double(), 0)).abs().max()))
            if step == STEPS - 1:
                break
            ref, mix = (decoder.forward(torch.tensor([token]), n + step, cache)[0]
                        for cache in (ref_cache, mix_cache))
        # free-running: each mode continues from its own prefill with its own greedy choices
        for mode_cache, seq in zip(fresh_caches(model, results, ids), own):
            for step in range(STEPS - 1):
                seq.append(int(torch.argmax(decoder.forward(torch.tensor([seq[-1]]), n + step, mode_cache)[0])))
    common = next((i for i, (a, b) in enumerate(zip(*own)) if a != b), STEPS)
    return {"greedy_agreement": agree / STEPS, "max_abs_dp_first16": max(gaps[:16]),
            "max_abs_dp_last16": max(gaps[-16:]), "free_running_common_prefix": common}


def fresh_caches(model, results: dict, ids: list[int]):
    """The two prefills' caches again (the teacher-forced pass wrote past the prompt; crop them)."""
    for mode in ("float32", "bfloat16"):
        cache = results[mode][1]
        cache.crop(len(ids))
        yield cache


def quality(model, copies) -> dict:
    prompts = {p: model.tokenizer.encode(p) for p in PROMPTS}
    for n in (128, 512):
        prompts[f"paragraph[:{n}]"] = paragraph_ids(model.tokenizer, n)
    per_prompt = {}
    for name, ids in prompts.items():
        r = per_prompt[name] = compare_prefill(model, copies, ids)
        print(f"{name[:40]!r:44s} {r['tokens']:4d} tok  top1 {'=' if r['top1_equal'] else 'DIFF'}  "
              f"|dlogit| {r['max_abs_logit']:.4f}  |dp top| {r['abs_dp_top']:.4f}  |dp| {r['max_abs_dp']:.4f}  "
              f"dK {r['max_rel_dk']:.4f} dV {r['max_rel_dv']:.4f}  agree {r['greedy_agreement']:.0%}  "
              f"drift {r['max_abs_dp_first16']:.4f}->{r['max_abs_dp_last16']:.4f}  "
              f"same {r['free_running_common_prefix']}/{STEPS}", flush=True)
    rows = per_prompt.values()
    summary = {
        "top1_equal_every_prompt": all(r["top1_equal"] for r in rows),
        "max_abs_dp_top": max(r["abs_dp_top"] for r in rows), "max_abs_dp": max(r["max_abs_dp"] for r in rows),
        "max_abs_logit": max(r["max_abs_logit"] for r in rows),
        "mean_greedy_agreement": statistics.mean(r["greedy_agreement"] for r in rows),
        "min_greedy_agreement": min(r["greedy_agreement"] for r in rows),
        "prompts_free_running_identical": sum(r["free_running_common_prefix"] == STEPS for r in rows),
        "n_prompts": len(per_prompt)}
    summary["criteria_hold"] = (summary["top1_equal_every_prompt"] and summary["max_abs_dp_top"] <= 0.03
                                and summary["mean_greedy_agreement"] >= 0.95)
    return {"per_prompt": per_prompt, "summary": summary}


def child_peak_rss(mode: str, threads: int) -> dict:
    """Peak RSS of a fresh process that loads the model and prefills 512 tokens in `mode`."""
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--threads", str(threads)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rss_mb() -> float:
    """The resident set now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(mode: str) -> None:
    model = load_model("default", device="cpu", dtype="float32")
    loaded = {"rss_after_load_mb": rss_mb(),
              "peak_rss_after_load_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if mode == "bfloat16":
        prefill_dtype.attach(model.decoder, min_rows=2)
    prefill(model.decoder, paragraph_ids(model.tokenizer, 512))
    print(json.dumps({**loaded, "rss_after_prefill_mb": rss_mb(),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: timing, memory, quality")
    results.json_option(parser, "prefill_dtype")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args.child)
        return 0
    skip = set(filter(None, args.skip.split(",")))
    model = load_model("default", device="cpu", dtype="float32")
    prefill_dtype.attach(model.decoder, min_rows=2)
    copies = model.decoder.prefill_weights
    flags = prefill_dtype.cpu_flags()
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "threads": torch.get_num_threads(),
              "cpu_flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma"))),
              "cpu_has_bf16": prefill_dtype.cpu_has_bf16(flags), "decode_path": model.decoder.decode_path,
              "weights_bytes": model.weights_bytes, "copy_bytes": prefill_dtype.copy_bytes(copies)}
    print(f"{report['date']}  {report['threads']} threads  flags: {' '.join(report['cpu_flags'])}")
    print(f"float32 weights {report['weights_bytes'] / 1e6:.1f} MB, bfloat16 copies {report['copy_bytes'] / 1e6:.1f} MB")
    if "timing" not in skip:
        report["prefill"] = timing(model, copies, args.repeats)
    if "memory" not in skip:
        report["memory"] = {mode: child_peak_rss(mode, torch.get_num_threads()) for mode in ("float32", "bfloat16")}
        for m, r in report["memory"].items():
            print(f"{m:8s}: RSS after load {r['rss_after_load_mb']:.0f} MB, after a 512-token prefill "
                  f"{r['rss_after_prefill_mb']:.0f} MB, peak {r['peak_rss_mb']:.0f} MB")
    if "quality" not in skip:
        report["quality"] = quality(model, copies)
        print("quality:", json.dumps(report["quality"]["summary"]))
    results.write(args.json, "prefill_dtype", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
