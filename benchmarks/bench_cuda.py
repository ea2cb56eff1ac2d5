"""Decode and prefill on a CUDA device: TokenStep's Session against transformers `generate`, side by
side in one process, as ratios; TokenStep's steps as CUDA graphs (issue 43), eager, and its forwards alone.

    PYTHONPATH=. python benchmarks/bench_cuda.py --tokenizer FOLDER [--shapes default,llama-1b]
        [--dtypes bfloat16,float32] [--json benchmarks/results/cuda/<machine>_<date>.json]

No checkpoint has to travel to the GPU machine: each shape is a real model's config (the default model's,
SmolLM2-135M, and Llama 3.2 1B's) with random weights, written once as a safetensors checkpoint with the
tokenizer of FOLDER (any tokenizer.json whose vocabulary fits the shape). Decode speed does not depend
on the weights' values; EOS is taken out of the config on both sides so that nothing stops early.

Timing points are bench_decode.py's: prefill = from the call to the first distribution; decode = (time
of the 65th distribution - time of the 1st) / 64, greedy. The sides alternate their order every
repeat; the report gives medians and each side's device memory: what its model keeps resident after the
load, and the most a run adds on top (cache, activations; both models stay loaded). The floor line is the weight
bytes a step reads over the device's copy bandwidth measured in the same run: at these sizes a step is
bound by kernel launches, not by memory, and the ratio to the floor says how far.
Five sides: "tokenstep" (the Session with its per-step report, decode steps replayed as CUDA graphs where the
family allows: inference/model/graph_step.py), "eager" (the same with graphs off), "forward" (the graph steps
alone: Decoder.forward and an argmax on the device, no report), "transformers" (`generate`, its default dynamic
cache) and "transformers static" (a static cache and, on CUDA, the forward compiled by torch.compile in
"reduce-overhead" mode, its CUDA graphs: the best configuration transformers offers; `--no-compile` leaves it out).
A side that cannot run on that machine's versions is reported with its error and left out of the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.bench_decode import timed_generate  # noqa: E402
import results  # noqa: E402  (benchmarks/results/: where --json writes)
DEVICE = "cuda"  # --device cpu checks the script itself on a machine without a GPU


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def allocated_bytes(peak_since_reset: bool = False) -> int:
    """Bytes allocated on the device now, or the most since the last call with peak_since_reset."""
    if DEVICE != "cuda":
        return 0
    if peak_since_reset:
        peak = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        return peak
    return torch.cuda.memory_allocated()

SHAPES = {
    "default": dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, rope_theta=100000.0, vocab_size=49152, tie_word_embeddings=True),
    "llama-1b": dict(model_type="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                     max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
                     rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=8192),
                     vocab_size=128256, tie_word_embeddings=True),
}


def write_checkpoint(shape: str, tokenizer: Path, folder: Path) -> Path:
    """Random weights of `shape` (initialised on the GPU, saved as float32 safetensors) + the tokenizer."""
    import transformers

    spec = dict(SHAPES[shape])
    config = transformers.AutoConfig.for_model(spec.pop("model_type"), bos_token_id=1, eos_token_id=2,
                                               **spec)
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (tokenizer / name).exists():
            shutil.copy(tokenizer / name, folder / name)
    del model
    return folder


def copy_gb_per_s() -> float:
    """Device-to-device copy of 4 GiB, bytes read + written per second (the memory's ceiling)."""
    src = torch.empty(1 << 30, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    sync()
    started = time.perf_counter()
    for _ in range(10):
        dst.copy_(src)
    sync()
    seconds = (time.perf_counter() - started) / 10
    del src, dst
    return 2 * 4 * (1 << 30) / seconds / 1e9


class TokenStepSide:
    graphs = True  # decode steps as graphs where the decoder allows (graph_step.py); EagerSide: never

    def __init__(self, folder: Path, dtype: str):
        from inference.store.loading import load_model

        loaded = load_model(folder, device=DEVICE, dtype=dtype)
        if not self.graphs:
            loaded.decoder.use_graphs(None)
        self.model = replace(loaded, config=replace(loaded.config, eos_ids=()))
        self.weights_bytes = loaded.weights_bytes
        self.info = {"dtype": loaded.dtype, "weights_bytes": loaded.weights_bytes,
                     "decode_path": loaded.decoder.decode_path, "device": loaded.info().device,
                     "graphs": loaded.decoder.graphs.replayer.name if loaded.decoder.graphs else "none"}

    def run(self, ids: list[int], n_decode: int) -> dict:
        from inference.session.sampling import SamplerSettings
        from inference.session.session import GenerationSettings, Session

        settings = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=n_decode + 1)
        session = Session(self.model, settings)
        sync()
        started = time.perf_counter()
        session.prefill(ids)
        prefill_s = time.perf_counter() - started
        stamps, tokens = [], []
        for event in session.run():
            if hasattr(event, "token"):
                stamps.append(time.perf_counter())
                tokens.append(event.token.id)
        return {"prefill_ms": prefill_s * 1000, "decode_ms": (stamps[-1] - stamps[0]) / n_decode * 1000,
                "tokens": tokens[:8]}


class EagerSide(TokenStepSide):
    graphs = False


class ForwardSide(TokenStepSide):
    """The decoder's steps alone: a prefill, then Decoder.forward of the argmax, which stays on the device."""

    def run(self, ids: list[int], n_decode: int) -> dict:
        decoder = self.model.decoder
        with torch.inference_mode():
            cache = decoder.new_cache(len(ids) + n_decode + 1)
            sync()
            started = time.perf_counter()
            logits = decoder.forward(torch.tensor(ids, device=DEVICE), 0, cache)
            token = logits.argmax(-1)
            sync()
            prefill_s, first = time.perf_counter() - started, time.perf_counter()
            for i in range(n_decode):
                token = decoder.forward(token, len(ids) + i, cache).argmax(-1)
            sync()
        return {"prefill_ms": prefill_s * 1000, "decode_ms": (time.perf_counter() - first) / n_decode * 1000,
                "tokens": []}


class TransformersSide:
    def __init__(self, folder: Path, dtype: str):
        import transformers

        torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
        self.model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype).to(DEVICE).eval()
        self.info = {"dtype": dtype, "transformers": transformers.__version__}

    def run(self, ids: list[int], n_decode: int) -> dict:
        sync()
        return timed_generate(self.model, torch.tensor([ids], device=DEVICE), n_decode)


class TransformersStaticSide(TransformersSide):
    compile = True  # main() clears it for --no-compile and off CUDA

    def __init__(self, folder: Path, dtype: str):
        super().__init__(folder, dtype)
        self.model.generation_config.cache_implementation = "static"
        if self.compile:
            self.model.forward = torch.compile(self.model.forward, mode="reduce-overhead", fullgraph=True)
        self.info = {**self.info, "cache": "static", "compiled": self.compile}


SIDES = (("tokenstep", TokenStepSide), ("eager", EagerSide), ("forward", ForwardSide),
         ("transformers", TransformersSide), ("transformers static", TransformersStaticSide))


def measure_shape(folder: Path, dtype: str, args) -> dict:
    """Both sides on one checkpoint and dtype: medians per prompt length, the ratio, device memory."""
    rows = {}
    sides = {}
    resident, working, failed = {}, {}, {}
    for name, cls in SIDES:
        before = allocated_bytes()
        try:
            sides[name] = cls(folder, dtype)
        except Exception as e:  # noqa: BLE001 - a side this machine's versions cannot run: said, not fatal
            failed[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        resident[name], working[name] = allocated_bytes() - before, 0
    generator = torch.Generator().manual_seed(1)
    for n in args.prefill:
        ids = torch.randint(3, 40000, (n,), generator=generator).tolist()
        for name, side in list(sides.items()):  # one warm-up each (kernel selection, allocator, a compile)
            try:
                side.run(ids, 8)
            except Exception as e:  # noqa: BLE001 - as above
                failed[name] = f"{type(e).__name__}: {e}"[:300]
                del sides[name]
        runs = {name: [] for name in sides}
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(reversed(sides))
            for name in order:
                before, _ = allocated_bytes(), allocated_bytes(peak_since_reset=True)
                runs[name].append(sides[name].run(ids, args.decode))
                working[name] = max(working[name], allocated_bytes(peak_since_reset=True) - before)
        rows[n] = {name: {"decode_ms": statistics.median(r["decode_ms"] for r in rs),
                          "prefill_ms": statistics.median(r["prefill_ms"] for r in rs),
                          "decode_ms_all": [round(r["decode_ms"], 3) for r in rs],
                          "tokens": rs[-1]["tokens"]} for name, rs in runs.items()}
        theirs = [name for name in rows[n] if name.startswith("transformers")]
        best = min(theirs, key=lambda name: rows[n][name]["decode_ms"])  # the best transformers configuration
        rows[n]["best_transformers"] = best
        rows[n]["decode_ratio"] = rows[n]["tokenstep"]["decode_ms"] / rows[n][best]["decode_ms"]
        rows[n]["prefill_ratio"] = rows[n]["tokenstep"]["prefill_ms"] / rows[n].get("transformers", rows[n][best])["prefill_ms"]
    info = {name: side.info for name, side in sides.items()}
    weights_bytes = sides["tokenstep"].weights_bytes
    del sides
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return {"rows": rows, "info": info, "weights_bytes": weights_bytes, "failed_sides": failed,
            "resident_bytes": resident, "run_peak_extra_bytes": working}


def table(report: dict) -> str:
    lines = [f"device: {report['device']}, torch {report['torch']}, copy {report['copy_gb_per_s']:.0f} GB/s",
             "| shape | dtype | prompt | TokenStep decode ms | eager ms | forward ms | transformers decode ms | "
             "static ms | ratio to the best | floor ms | prefill ratio | MB resident, ours / theirs | "
             "MB a run adds, ours / theirs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, result in report["results"].items():
        shape, dtype = key.split(":")
        floor_ms = result["weights_bytes"] / (report["copy_gb_per_s"] * 1e9) * 1000
        mb = {key: "{:.0f} / {:.0f}".format(*(result[key][side] / 2**20 for side in ("tokenstep", "transformers")))
              for key in ("resident_bytes", "run_peak_extra_bytes")}
        for n, row in result["rows"].items():
            ms = {name: f"{row[name]['decode_ms']:.2f}" if name in row else "-"
                  for name in ("eager", "forward", "transformers", "transformers static")}
            lines.append(f"| {shape} | {dtype} | {n} | {row['tokenstep']['decode_ms']:.2f} | "
                         f"{ms['eager']} | {ms['forward']} | "
                         f"{ms['transformers']} | {ms['transformers static']} | {row['decode_ratio']:.2f} | "
                         f"{floor_ms:.3f} | {row['prefill_ratio']:.2f} | {mb['resident_bytes']} | "
                         f"{mb['run_peak_extra_bytes']} |")
        lines += [f"{shape} {dtype}: {name} did not run ({why})" for name, why in result.get("failed_sides", {}).items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True, help="a folder holding tokenizer.json")
    parser.add_argument("--shapes", default="default,llama-1b")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--prefill", default="16,128,512")
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    results.json_option(parser, "cuda")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--no-compile", action="store_true", help="transformers' static-cache side without torch.compile")
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    TransformersStaticSide.compile = DEVICE == "cuda" and not args.no_compile
    args.prefill = [int(n) for n in args.prefill.split(",")]
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("bench_cuda: no CUDA device here")
        return 2
    report = {"device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", "torch": torch.__version__,
              "copy_gb_per_s": copy_gb_per_s(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "results": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for shape in args.shapes.split(","):
            started = time.perf_counter()
            folder = write_checkpoint(shape, args.tokenizer, Path(scratch) / shape)
            print(f"{shape}: checkpoint written in {time.perf_counter() - started:.1f} s", flush=True)
            for dtype in args.dtypes.split(","):
                report["results"][f"{shape}:{dtype}"] = measure_shape(folder, dtype, args)
                print(table({**report, "results": {f"{shape}:{dtype}": report["results"][f"{shape}:{dtype}"]}}),
                      flush=True)
    print(table(report))
    results.write(args.json, "cuda", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
