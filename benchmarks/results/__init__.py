"""The results folder and its layout: benchmarks/results/<bench>/<machine>_<date>[_N].json.

Every benchmark script takes `--json [PATH]` from `json_option` and writes with `write`: `--json PATH` writes
PATH, `--json` alone the next free name in this folder (`_2`, `_3`... when the day's name is taken), where
<machine> is the CPU's vendor and widest ISA (amd_avx512, intel_amx, amd_avx2, cpu_aarch64). A script run as
`python benchmarks/<x>.py` has benchmarks/ on its path, so `import results` finds this package. A file kept
here is cited by benchmarks/RESULTS.md (tests/e2e/test_benchmarks_layout.py checks it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
ROOT = FOLDER.parent.parent
# `--json` given alone: the name is chosen when the file is written (`resolve`), not when the options are read.
AUTO = "<machine>_<date>.json"

VENDORS = ("amd", "intel")
ISAS = (("amx_tile", "amx"), ("avx512f", "avx512"), ("avx2", "avx2"))  # widest first


def cpu() -> dict:
    """This CPU's model name and flags, as the kernel shape cache keys them."""
    # Imported here, not at the top: bench_decode's worker processes import this module and must not load torch
    # (each side's peak RSS is its own), and kernel_shape imports it.
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from inference.model.kernel_shape import cpu_identity

    return cpu_identity()


def machine_name(identity: dict | None = None) -> str:
    """<vendor>_<widest ISA> of this CPU (or of `identity`, cpu()'s form)."""
    identity = identity or cpu()
    vendor = next((v for v in VENDORS if v in identity["cpu"].lower()), "cpu")
    isa = next((name for flag, name in ISAS if flag in identity["flags"]), platform.machine().lower() or "generic")
    return f"{vendor}_{isa}"


def default_path(bench: str, identity: dict | None = None) -> Path:
    """benchmarks/results/<bench>/<machine>_<date>.json, or the first free _2, _3... of it."""
    stem = f"{machine_name(identity)}_{datetime.date.today().isoformat()}"
    path, n = FOLDER / bench / f"{stem}.json", 2
    while path.exists():
        path, n = FOLDER / bench / f"{stem}_{n}.json", n + 1
    return path


def json_option(parser: argparse.ArgumentParser, bench: str, always: bool = False) -> None:
    """--json [PATH]: write the results to PATH; alone, to benchmarks/results/<bench>/<machine>_<date>.json
    (always: there too when --json is not given)."""
    where = f"benchmarks/results/{bench}/{AUTO}"
    parser.add_argument("--json", nargs="?", const=AUTO, default=AUTO if always else None, metavar="PATH",
                        help=f"write the results to PATH; without PATH{' (and without --json)' if always else ''} "
                             f"to {where}, _2, _3... when taken")


def resolve(path: str | Path | None, bench: str) -> Path | None:
    """The file `--json`'s value names: None (no --json), PATH, or the next free default name."""
    if path is None:
        return None
    return default_path(bench) if path == AUTO else Path(path)


def write(path: str | Path | None, bench: str, report) -> Path | None:
    """Write `report` as JSON where `--json` says (nothing without --json) and say so on stderr."""
    path = resolve(path, bench)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"[bench] wrote {path}", file=sys.stderr)
    return path
