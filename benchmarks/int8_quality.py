"""How much the int8 weight-only mode changes the default model's predictions, measured against float32.

    PYTHONPATH=. python benchmarks/int8_quality.py [--steps 200]
        [--int8-path float|int16|integer|integer-row|integer-<n>]
        [--json benchmarks/results/int8_quality/<machine>_<date>.json]

--int8-path sets TOKENSTEP_INT8_PATH (quant.py) for the int8 model: its one-row products with float32
activations, with activations quantised to int16 (a scale per weight group), or to int8 (a scale per 4, per n
or per row) on AVX-512 VNNI or AVX2.

- first step: on each prompt, int8's top-1 token must be float32's and its probability within 0.03;
- greedy agreement, teacher-forced: float32 writes a greedy continuation; both models then read that same
  sequence one decode step at a time, and at each position we compare their argmax (a fair measure: one
  early disagreement does not make every later position differ);
- perplexity of tests/support/paragraph.py's PARAGRAPH under each model, from one prefill (every row at once) and
  read one decode step at a time (the one-row products, where the int8 paths differ).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from inference.store.loading import load_model  # noqa: E402
from paragraph import PARAGRAPH  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)

PROMPTS = (
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):",
    "The three primary colours are",
    "Water boils at a temperature of",
    "In 1969, the first humans to walk on the Moon were",
    "The best way to learn a new language is",
    "The largest planet in our solar system is",
    "import numpy as np\nimport",
    "My favourite food is",
    "The chemical symbol for gold is",
    "Photosynthesis is the process by which",
    "The quick brown fox",
    "In the beginning",
    "The Eiffel Tower is located in",
    "2 + 2 =",
    "Shakespeare wrote",
    "The speed of light is",
    "Dear Sir or Madam,",
    "The mitochondria is the",
    "Paris is the capital of",
    "for i in range(",
    "The first president of the United States was",
    "Machine learning is a field of",
    "She opened the door and saw",
)


def first_step(models: dict, prompt: str) -> dict:
    out = {}
    for name, model in models.items():
        ids = model.tokenizer.encode(prompt)
        with torch.inference_mode():
            logits = model.decoder.forward(torch.tensor(ids), 0, model.decoder.new_cache(len(ids)))[0]
        p = torch.softmax(logits.double(), 0)
        two = torch.topk(p, 2)
        top, second = int(two.indices[0]), int(two.indices[1])
        # the lead over the runner-up: where it is tiny, any change in rounding may swap the two
        out[name] = {"token": top, "text": model.tokenizer.decode([top]), "p": float(p[top]),
                     "runner_up": model.tokenizer.decode([second]), "lead": float(two.values[0] - two.values[1])}
    return out


def teacher_forced(reference, other, prompt: str, steps: int) -> dict:
    """float32 (reference) writes `steps` greedy tokens; both read them step by step; compare argmax."""
    ids = reference.tokenizer.encode(prompt)
    decoders = (reference.decoder, other.decoder)
    caches = [d.new_cache(len(ids) + steps) for d in decoders]
    agree, max_p_gap = 0, 0.0
    with torch.inference_mode():
        logits = [d.forward(torch.tensor(ids), 0, cache)[0] for d, cache in zip(decoders, caches)]
        for step in range(steps):
            token = int(torch.argmax(logits[0]))
            agree += token == int(torch.argmax(logits[1]))
            p_ref, p_other = (torch.softmax(lg.double(), 0) for lg in logits)
            max_p_gap = max(max_p_gap, float((p_ref - p_other).abs().max()))
            position = len(ids) + step
            logits = [d.forward(torch.tensor([token]), position, cache)[0] for d, cache in zip(decoders, caches)]
    return {"steps": steps, "agreement": agree / steps, "max_abs_p_difference": max_p_gap}


def perplexity(model) -> float:
    ids = model.tokenizer.encode(PARAGRAPH)
    with torch.inference_mode():
        logits = model.decoder.forward(torch.tensor(ids), 0, model.decoder.new_cache(len(ids)), all_logits=True)
    return math.exp(torch.nn.functional.cross_entropy(logits[:-1].double(), torch.tensor(ids[1:])).item())


def decode_perplexity(model) -> float:
    """The same perplexity read one token at a time (decode steps): the path an int8 model's one-row
    products take (a prefill's many rows keep float activations)."""
    ids = model.tokenizer.encode(PARAGRAPH)
    cache = model.decoder.new_cache(len(ids))
    nll = 0.0
    with torch.inference_mode():
        for position in range(len(ids) - 1):
            logits = model.decoder.forward(torch.tensor(ids[position:position + 1]), position, cache)[0]
            nll -= float(torch.log_softmax(logits.double(), 0)[ids[position + 1]])
    return math.exp(nll / (len(ids) - 1))


def _int8_path(model) -> int | None:
    """The int8 model's path code on the kernels (quant.path_code), None when not on the kernels."""
    return getattr(model.decoder.weights.layers[0].qkv, "path", None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="int8", help="the mode to compare with float32")
    parser.add_argument("--steps", type=int, default=200)
    results.json_option(parser, "int8_quality")
    parser.add_argument("--int8-path", default=None, help="TOKENSTEP_INT8_PATH for the int8 model: float, int16, "
                        "integer, integer-row, integer-<n> (default: this machine's default)")
    args = parser.parse_args(argv)
    if args.int8_path:
        os.environ["TOKENSTEP_INT8_PATH"] = args.int8_path
    models = {"float32": load_model(args.model, device="cpu", dtype="float32"),
              args.dtype: load_model(args.model, device="cpu", dtype=args.dtype)}
    reference, other = models["float32"], models[args.dtype]
    report = {"dtype": args.dtype, "int8_path": _int8_path(other), "weights_bytes": {k: m.weights_bytes for k, m in models.items()},
              "first_step": {}, "teacher_forced": {}, "perplexity": {}}
    print(f"int8 path: {os.environ.get('TOKENSTEP_INT8_PATH', 'default')} (code {report['int8_path']})")
    print(f"weights: float32 {reference.weights_bytes / 1e6:.1f} MB, {args.dtype} "
          f"{other.weights_bytes / 1e6:.1f} MB")
    print(f"{'prompt':52s} {'float32 top-1':>22s} {args.dtype + ' top-1':>22s} {'|dp|':>7s} "
          f"{'agree@' + str(args.steps):>10s}")
    for prompt in PROMPTS:
        first = first_step(models, prompt)
        forced = teacher_forced(reference, other, prompt, args.steps)
        report["first_step"][prompt] = first
        report["teacher_forced"][prompt] = forced
        a, b = first["float32"], first[args.dtype]
        print(f"{prompt[:52]:52s} {a['text']!r:>14s} {a['p']:.4f} {b['text']!r:>14s} {b['p']:.4f} "
              f"{abs(a['p'] - b['p']):7.4f} {forced['agreement']:10.1%}   float32 lead over "
              f"{a['runner_up']!r}: {a['lead']:.4f}")
    report["perplexity_by_decode"] = {}
    for name, model in models.items():
        report["perplexity"][name] = perplexity(model)
        report["perplexity_by_decode"][name] = decode_perplexity(model)
    agreements = [f["agreement"] for f in report["teacher_forced"].values()]
    report["summary"] = {
        "first_step_top1_equal": all(f["float32"]["token"] == f[args.dtype]["token"]
                                     for f in report["first_step"].values()),
        "first_step_max_p_difference": max(abs(f["float32"]["p"] - f[args.dtype]["p"])
                                           for f in report["first_step"].values()),
        "teacher_forced_agreement": sum(agreements) / len(agreements),
        "teacher_forced_min_agreement": min(agreements),
        "perplexity_ratio": report["perplexity"][args.dtype] / report["perplexity"]["float32"],
        "perplexity_by_decode_ratio": report["perplexity_by_decode"][args.dtype]
        / report["perplexity_by_decode"]["float32"],
    }
    s = report["summary"]
    print(f"perplexity: float32 {report['perplexity']['float32']:.3f}, {args.dtype} "
          f"{report['perplexity'][args.dtype]:.3f} (ratio {s['perplexity_ratio']:.4f}); read by decode steps: "
          f"float32 {report['perplexity_by_decode']['float32']:.3f}, {args.dtype} "
          f"{report['perplexity_by_decode'][args.dtype]:.3f} (ratio {s['perplexity_by_decode_ratio']:.4f})")
    print(f"first step: top-1 equal on every prompt: {s['first_step_top1_equal']}, largest |dp| "
          f"{s['first_step_max_p_difference']:.4f}")
    print(f"teacher-forced greedy agreement: mean {s['teacher_forced_agreement']:.1%}, "
          f"lowest {s['teacher_forced_min_agreement']:.1%}")
    results.write(args.json, "int8_quality", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
