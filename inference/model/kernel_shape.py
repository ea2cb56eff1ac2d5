"""The shape of the decode kernels' one-row products on this machine, chosen by measurement and cached.

A shape is how the kernels read a matrix for one row of x: rows per pass (1, 2 or 4: each x load serves that
many rows, that many streams are read at once; or 2 or 4 rows far apart, "2s": rows i and i + 32 of a block of
64, not i and i + 1) and how far ahead a software prefetch goes (0 to 8 KB), float32 and int8 each (int8 timed
on the path its products take: float activations, int16 activations or the AVX2 integer path, each cached apart;
the VNNI integer products have one fixed shape and are not timed). Every shape gives the same products (bit for
bit); only the speed differs, and by machine, not vendor: one row per pass decoded 1.3x faster than four on an
AMD EPYC, four rows were fastest on an Intel Xeon. The products are timed as a decode step runs them (one
parallel region, float32 rows claimed, a barrier after each product): timed as separate calls, the float32
shapes ranked differently from whole steps on an AVX2 EPYC. So `ensure` (called once a model is loaded) times
every candidate on the model's own weights (its products in decode order, up to TUNE_BYTES), interleaved over
ROUNDS rounds, keeps the one with the lowest median, and caches the choice in the kernels folder as JSON keyed
by the CPU's model name and flags, the kernel library and the thread count (not when the machine was too busy
for the passes to agree: QUIET_SPREAD). About a second, once; reported as the stage "tune". A model whose
products are smaller than MIN_TUNE_BYTES (they would be timed from the CPU's caches, not memory) is not
measured: it uses the cached shape, else the defaults.

A float32 model's passes of several positions (csrc/f32.h's small-M tiles) ask for their next vectors into L1 or
not, also by machine: `ensure_tiles` times the model's own passes of TILE_ROWS positions both ways at first use and
caches the faster (TILES_KEY).

An int8 model's path is chosen the same way (`choose_int8_path`): its products on float and on int16
activations, which give the same quality report, each timed in its own fastest shape; the faster is used and
cached (PATH_KEY), unless TOKENSTEP_INT8_PATH names one.

TOKENSTEP_KERNEL_SHAPE forces a shape: "f32=1x8192,int8=4x0" (rows x prefetch bytes; either part alone).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from inference import cache_dir, kernels
from inference.model import quant
from inference.model.quant import INT16

ROWS = (1, 2, 4)
# Or 2 or 4 rows of a block of 64 that lie 64 / n rows apart, in one pass (each x load serving all of them, as
# with adjacent rows). On an AVX2 EPYC, float32: two adjacent rows made a step's products 1.16x one row's time,
# two rows 32 apart 0.92x (the same bits).
SPREAD_ROWS = (2, 4)
PREFETCH = (0, 1024, 2048, 4096, 8192)  # bytes; the lists csrc/shape.h's set_shape accepts
KINDS = ("f32", "int8")
CACHE_KEYS = (*KINDS, "int8-int16", "int8-integer")  # int8 on the other paths is timed and cached apart (cache_key)
# int8's products on float or int16 activations give the same quality report (quant.py); which is faster depends
# on the machine, so an int8 model takes the one measured faster here (ensure), cached under this key.
PATH_KEY = "int8-path"
MEASURED_PATHS = ("float", "int16")
ENV = "TOKENSTEP_KERNEL_SHAPE"
TUNE_BYTES = 128 << 20  # the products timed: the model's first ones in decode order, up to this many bytes
MIN_TUNE_BYTES = 64 << 20  # less than this would be read from the CPU's caches: not measured
ROUNDS = 5  # at most; after MIN_ROUNDS, no new round starts past BUDGET_S (after one, past 4 x BUDGET_S)
MIN_ROUNDS = 3
BUDGET_S = 1.5
# The choice is cached only after MIN_ROUNDS rounds whose winner's passes agree within this factor (slowest /
# fastest): on a machine busy with other work the ranking is noise, so it holds for this run only.
QUIET_SPREAD = 1.5
VERSION = 1


class KernelShapeError(ValueError):
    """A TOKENSTEP_KERNEL_SHAPE that names no candidate shape."""


@dataclass(frozen=True)
class Shape:
    rows: int
    prefetch: int  # bytes
    spread: bool = False  # the rows of a pass far apart

    @property
    def key(self) -> str:
        return f"{self.rows}{'s' if self.spread else ''}x{self.prefetch}"

    @property
    def code(self) -> int:
        """The rows as csrc/shape.h's set_shape takes them: negative when spread."""
        return -self.rows if self.spread else self.rows

    @classmethod
    def of(cls, code: int, prefetch: int) -> "Shape":
        return cls(abs(code), prefetch, code < 0)

    def describe(self) -> str:
        """'1 row/pass, prefetch 8 KB', '2 rows/pass far apart, no prefetch' (the status bar's and a trace's words)."""
        ahead = f"prefetch {self.prefetch // 1024} KB" if self.prefetch else "no prefetch"
        return f"{self.rows} row{'s' if self.rows > 1 else ''}/pass{' far apart' if self.spread else ''}, {ahead}"


CANDIDATES = (*(Shape(r, p) for r in ROWS for p in PREFETCH),
              *(Shape(r, p, True) for r in SPREAD_ROWS for p in PREFETCH))


def parse(value: str) -> dict[str, Shape]:
    """'f32=1x8192,int8=4x0' -> {kind: Shape}; anything else is a one-line KernelShapeError."""
    shapes: dict[str, Shape] = {}
    try:
        for part in value.split(","):
            kind, rows, prefetch = part.strip().replace("=", "x").split("x")
            kind = {"float32": "f32"}.get(kind.strip(), kind.strip())
            spread = rows.strip().endswith("s")
            shape = Shape(int(rows.strip().removesuffix("s")), int(prefetch), spread)
            if kind not in KINDS or kind in shapes or shape not in CANDIDATES:
                raise ValueError
            shapes[kind] = shape
    except ValueError:
        raise KernelShapeError(
            f"{ENV}={value!r}: expected e.g. 'f32=1x8192,int8=4x0' (kind f32 or int8 = rows x prefetch bytes; "
            f"rows {', '.join(map(str, ROWS))} or {', '.join(f'{r}s' for r in SPREAD_ROWS)} (far apart); "
            f"prefetch {', '.join(map(str, PREFETCH))})") from None
    return shapes


def forced() -> dict[str, Shape]:
    value = os.environ.get(ENV, "").strip()
    return parse(value) if value else {}


@functools.lru_cache(maxsize=1)
def cpu_identity() -> dict:
    """The CPU's model name and flags (what the choice is keyed by, never the vendor alone)."""
    model, flags = platform.processor(), []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not flags:
                model = value.strip()
            elif key.strip() == "flags":
                flags = sorted(value.split())
                break
    except OSError:
        pass
    return {"cpu": model, "flags": flags}


def cache_file() -> Path:
    """This CPU's, this kernel library's and this thread count's file in the kernels folder."""
    identity = {**cpu_identity(), "library": kernels._target().stem, "threads": torch.get_num_threads()}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir.cache_root() / "kernels" / f"shape-{key}.json"


def _cache_data(path: Path) -> dict:
    """A cache file's contents when readable and of this VERSION, else {}."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested deeper than the parser's stack
        return {}
    return data if isinstance(data, dict) and data.get("version") == VERSION else {}


def read_cached(path: Path) -> dict[str, Shape]:
    """The shapes a cache file holds; none from a missing, unreadable or malformed file."""
    data = _cache_data(path)
    try:
        shapes = {kind: Shape(int(data[kind]["rows"]), int(data[kind]["prefetch"]), data[kind].get("spread") is True)
                  for kind in CACHE_KEYS if kind in data}
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):  # OverflowError: int(Infinity)
        return {}
    return {kind: shape for kind, shape in shapes.items() if shape in CANDIDATES}


def read_cached_path(path: Path) -> str | None:
    """The int8 path a cache file holds (one of MEASURED_PATHS), or None."""
    entry = _cache_data(path).get(PATH_KEY)
    chosen = entry.get("path") if isinstance(entry, dict) else None
    return chosen if chosen in MEASURED_PATHS else None


def write_cached(path: Path, kind: str, shape: Shape, times: dict[Shape, list[float]], nbytes: int) -> None:
    """Adds `kind`'s choice (and what it was measured on) to the file; a cache that cannot be written
    only means measuring again next time."""
    _update_cache(path, kind, {"rows": shape.rows, "prefetch": shape.prefetch, "spread": shape.spread,
                               "bytes": nbytes, "rounds": min(len(t) for t in times.values()),
                               "median_ms": {s.key: round(statistics.median(t), 4) for s, t in times.items()}})


def _update_cache(path: Path, key: str, entry: dict) -> None:
    data = _cache_data(path)
    data.update(version=VERSION, **cpu_identity(), library=kernels._target().stem, threads=torch.get_num_threads())
    data[key] = {**entry, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        cache_dir.make_private(path.parent)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass


def in_force(ops) -> dict[str, Shape]:
    f32_rows, f32_prefetch, int8_rows, int8_prefetch = ops.get_shape()
    return {"f32": Shape.of(f32_rows, f32_prefetch), "int8": Shape.of(int8_rows, int8_prefetch)}


def apply(ops, kind: str, shape: Shape) -> None:
    shapes = {**in_force(ops), kind: shape}
    ops.set_shape(shapes["f32"].code, shapes["f32"].prefetch, shapes["int8"].code, shapes["int8"].prefetch)


def kind_of(backend) -> str:
    return "int8" if backend.dtype == torch.int8 else "f32"


def products(weights, kind: str, limit: int = TUNE_BYTES) -> list[tuple]:
    """(weight, scale or None, x, int8 path) of the model's one-row products of `kind` in decode order, up to
    `limit` bytes; the path (quant.path_code: 0 float activations, else the integer path) is the one the model's
    products take, so the shape is timed on the code that will run."""
    out, total = [], 0
    for lin in weights.linears():
        w, scale = lin.weight, lin.scale
        this = "int8" if w.dtype == torch.int8 and scale is not None else "f32" if w.dtype == torch.float32 else None
        if this != kind or total >= limit:
            continue
        x = torch.randn(1, w.shape[1], generator=torch.Generator().manual_seed(len(out)))
        path = lin.path  # a RescoredHead's is its int8 linear's
        out.append((w, scale, x, path if scale is not None else 0))
        total += w.numel() * w.element_size()
    return out


def nbytes(mats: list[tuple]) -> int:
    return sum(w.numel() * w.element_size() + (s.numel() * s.element_size() if s is not None else 0)
               for w, s, *_ in mats)


def run_products(ops, mats: list[tuple]) -> list[torch.Tensor]:
    """The products of `mats` in one call, scheduled as a decode step schedules them (csrc/step.h's
    products_region: one parallel region, a barrier after each product, float32 rows claimed a block at a time)."""
    if not mats:
        return []
    return ops.products_region([w for w, *_ in mats], [s for _, s, *_ in mats], [x for _, _, x, _ in mats],
                               path_of(mats))


def path_of(mats: list[tuple]) -> int:
    """The int8 path code the products of `mats` take (0: float activations, or float32 products)."""
    return next((path for *_, path in mats if path), 0)


def cache_key(kind: str, mats: list[tuple]) -> str:
    """The cache entry of `kind` on the path its products take: 'int8' (float activations), 'int8-int16',
    'int8-integer'."""
    path = path_of(mats)
    return kind if not path else f"{kind}-int16" if path == INT16 else f"{kind}-integer"


def measure(ops, mats: list[tuple], kind: str, rounds: int = ROUNDS, shapes=CANDIDATES,
            beside=None, budget_s: float | None = BUDGET_S) -> dict[Shape, list[float]]:
    """Milliseconds of one pass over `mats` in each shape: every round runs every shape once, in a fresh
    order (so a slow spell of a shared machine falls on all of them); after MIN_ROUNDS no round starts
    past `budget_s`, after one none past 4 x `budget_s`. `beside(shape, ms)`, when given, runs after each pass
    (the benchmark times a read of the same bytes there). The shape in force is kept."""
    before = in_force(ops)
    try:
        return interleaved(shapes, lambda shape: apply(ops, kind, shape), lambda: run_products(ops, mats), rounds,
                           beside, budget_s)
    finally:
        apply(ops, "f32", before["f32"])
        apply(ops, "int8", before["int8"])


def interleaved(options, put, run, rounds: int = ROUNDS, beside=None, budget_s: float | None = BUDGET_S) -> dict:
    """Milliseconds of `run()` with each option put in force (`put(option)`), every round all options once in a fresh
    order, after a warm-up; the rounds stop as `measure` says. The caller puts back what was in force."""
    started = time.perf_counter()
    times: dict = {option: [] for option in options}
    order = list(options)
    with torch.inference_mode():
        run()  # warm-up: first calls pay one-off costs
        for round_ in range(rounds):
            elapsed = time.perf_counter() - started
            if budget_s is not None and (round_ >= MIN_ROUNDS and elapsed > budget_s or
                                         round_ >= 1 and elapsed > 4 * budget_s):  # a very busy machine
                break
            random.Random(round_).shuffle(order)
            for option in order:
                put(option)
                pass_started = time.perf_counter()  # (`started` is the whole measurement's, for the budget)
                run()
                times[option].append((time.perf_counter() - pass_started) * 1000)
                if beside is not None:
                    beside(option, times[option][-1])
    return times


def fastest(times: dict[Shape, list[float]]) -> Shape:
    return min(times, key=lambda s: statistics.median(times[s]))


def quiet(times: dict[Shape, list[float]], shape: Shape) -> bool:
    """Whether a measurement may be cached: MIN_ROUNDS rounds, the chosen shape's passes within QUIET_SPREAD."""
    return min(map(len, times.values())) >= MIN_ROUNDS and max(times[shape]) <= QUIET_SPREAD * min(times[shape])


def ensure(decoder, progress=None) -> Shape | None:
    """The shape of this model's products put in force: forced by TOKENSTEP_KERNEL_SHAPE, else this machine's
    cached choice, else measured now on the model's weights and cached; a float32 model's tiles too (ensure_tiles).
    None off the kernels."""
    force = forced()  # a bad value is an error even off the kernels: never silently ignored
    ops = decoder.backend.kernels
    if ops is None:
        return None
    kind = kind_of(decoder.backend)
    path = cache_file()
    measured = choose_int8_path(decoder, path, force, progress) if kind == "int8" else None
    mats = products(decoder.weights, kind)
    key = cache_key(kind, mats)
    shape = force.get(kind) or read_cached(path).get(key) or measured
    if shape is None:
        if nbytes(mats) < MIN_TUNE_BYTES or (key == "int8-integer" and ops.integer_code() == "vnni"):
            shape = in_force(ops)[kind]  # too small to tell, or no shape to choose: the shape in force
        else:
            if progress:
                progress("tune", 0, 1)
            times = measure(ops, mats, kind)
            shape = fastest(times)
            if quiet(times, shape):
                write_cached(path, key, shape, times, nbytes(mats))
            if progress:
                progress("tune", 1, 1)
    apply(ops, kind, shape)
    if kind == "f32":
        ensure_tiles(decoder, path, nbytes(mats), progress)
    return shape


# The small-M tiles (csrc/f32.h, a pass of several positions: a verify pass, a batch of requests) ask for each phase's
# next vectors into L1 or leave it to the CPU: faster one way on an AMD EPYC (a pass of 8 positions 0.87x the time
# with them), the other on an Intel Xeon (0.96-0.98x without them). Timed as such passes run: the model's own passes
# of TILE_ROWS positions after a prompt of TILE_CONTEXT, each setting in turn (products timed as separate calls
# ranked them within their noise there), and cached under TILES_KEY. Not for models under TILES_MIN_BYTES of float32
# products (read from the caches, not memory): the setting in force stays.
TILES_KEY = "f32-tiles"
TILE_ROWS = 8
TILE_CONTEXT = 32
TILES_MIN_BYTES = 64 << 20


def read_cached_tiles(path: Path) -> bool | None:
    """Whether the tiles ask for their next vectors into L1, as a cache file holds it (None: not there)."""
    entry = _cache_data(path).get(TILES_KEY)
    chosen = entry.get("l1_prefetch") if isinstance(entry, dict) else None
    return chosen if isinstance(chosen, bool) else None


def measure_tiles(decoder, rounds: int = ROUNDS) -> dict[bool, list[float]]:
    """Milliseconds of the model's passes of TILE_ROWS positions (after TILE_CONTEXT), with and without the tiles' L1
    prefetch; the setting in force is kept."""
    ops = decoder.backend.kernels
    cache = decoder.new_cache(TILE_CONTEXT + TILE_ROWS)
    vocab = decoder.config.vocab
    prompt, rows = torch.arange(TILE_CONTEXT) % vocab, (torch.arange(TILE_ROWS) + TILE_CONTEXT) % vocab

    def run() -> None:
        decoder.forward(rows, TILE_CONTEXT, cache, all_logits=True)
        cache.crop(TILE_CONTEXT)

    before = ops.set_tile_l1_prefetch(True)
    try:
        with torch.inference_mode():
            decoder.forward(prompt, 0, cache)
        return interleaved((True, False), ops.set_tile_l1_prefetch, run, rounds)
    finally:
        ops.set_tile_l1_prefetch(before)


def tiles_in_force(ops) -> bool:
    """Whether the tiles ask for their next vectors into L1 now (the op sets and returns the setting before)."""
    on = ops.set_tile_l1_prefetch(True)
    ops.set_tile_l1_prefetch(on)
    return on


def ensure_tiles(decoder, path: Path, f32_bytes: int, progress=None) -> bool | None:
    """Puts the tiles' L1 prefetch as this machine's cache says, else as measured now on the model (cached when quiet).
    `f32_bytes`: the model's float32 products timed for its shape (up to TUNE_BYTES). Returns the setting in force;
    None where there was nothing to decide (too few bytes to tell)."""
    ops = decoder.backend.kernels
    chosen = read_cached_tiles(path)
    if chosen is None:
        if f32_bytes < TILES_MIN_BYTES:
            return None
        if progress:
            progress("tune", 0, 1)
        times = measure_tiles(decoder)
        chosen = min(times, key=lambda on: statistics.median(times[on]))
        if quiet(times, chosen):
            _update_cache(path, TILES_KEY, {"l1_prefetch": chosen, "rows": TILE_ROWS, "context": TILE_CONTEXT,
                                            "median_ms": {("l1" if on else "none"): round(statistics.median(t), 4)
                                                          for on, t in times.items()}})
        if progress:
            progress("tune", 1, 1)
    ops.set_tile_l1_prefetch(chosen)
    return chosen


# A path's measured step time is multiplied by this before the fastest is taken: the float path must be clearly
# faster to be chosen. Its steps and the int16 path's come within a few % of each other (the same quality, quant.py),
# but a pass of several rows (a verify pass, a batch of requests: csrc/rows.h) widens each weight once for all rows
# on the int16 path, where the float path multiplies every row of x in float32: default model, AMD EPYC AVX-512,
# layers of a 4-row pass 1.75x a step on int16, 3.0x on float (8 rows: 3.5x, 5.9x).
PATH_HANDICAP = {"float": 1.08}


def choose_int8_path(decoder, path: Path, force: dict[str, Shape], progress=None) -> Shape | None:
    """Puts an int8 model's products on the path of MEASURED_PATHS measured fastest here (each in its own fastest
    shape, as a step runs them), cached like the shapes; TOKENSTEP_INT8_PATH forces one instead. Returns the
    chosen path's shape when it was measured now (None: from the cache, forced, or too small to tell). A forced
    int8 shape (TOKENSTEP_KERNEL_SHAPE) means no measuring at all: the path the linears were built on stays."""
    if quant.int8_path_forced() or "int8" in force:
        return None
    ops = decoder.backend.kernels
    chosen, measured = read_cached_path(path), None
    if chosen is None:
        mats = products(decoder.weights, "int8")
        if not mats or nbytes(mats) < MIN_TUNE_BYTES:
            return None  # too small to tell: the path the linears were built on
        if progress:
            progress("tune", 0, 1)
        runs, medians = {}, {}  # per path: (its products, its fastest shape, the times); that shape's median
        for name in MEASURED_PATHS:
            on_path = [(w, s, x, quant.path_code(name)) for w, s, x, _ in mats]
            times = measure(ops, on_path, "int8")
            runs[name] = (on_path, fastest(times), times)
            medians[name] = statistics.median(times[runs[name][1]])
        chosen = min(medians, key=lambda name: medians[name] * PATH_HANDICAP.get(name, 1.0))
        if all(quiet(times, shape) for _, shape, times in runs.values()):
            for on_path, shape, times in runs.values():
                write_cached(path, cache_key("int8", on_path), shape, times, nbytes(on_path))
            _update_cache(path, PATH_KEY, {"path": chosen, "median_ms": {k: round(v, 4) for k, v in medians.items()}})
        measured = runs[chosen][1]
        if progress:
            progress("tune", 1, 1)
    quant.use_int8_path(decoder.weights, chosen)
    return measured


def describe(backend) -> str:
    """The shape in force for this backend's products ('1 row/pass, prefetch 8 KB'); '' off the kernels."""
    return in_force(backend.kernels)[kind_of(backend)].describe() if backend.kernels is not None else ""
