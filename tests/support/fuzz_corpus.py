"""Run the hostile-input corpus (fuzz_cases.py, 500+ cases over GGUF, safetensors, config.json,
tokenizer.json, chat templates and command-line options) through `main.py trace`, and count what went
wrong:

    .venv/bin/python tests/support/fuzz_corpus.py [--limit N] [--timeout 60] [--kinds gguf,cli] [--show 30]

Each case runs in a child forked from this process (torch and the inference package imported once, so a
case costs its own work only), with stdout and stderr in files, its address space capped at what the
parent had mapped plus --memory (2 GB), and a --timeout (60 s) after which it is killed. Counted:
- hangs: killed at the timeout;
- crashes: ended by a signal or with an exit status other than 0, 1 or 2;
- tracebacks: "Traceback", "internal error" or a Rust panic on stderr;
- over_memory: peak RSS (wait4's ru_maxrss) above --memory, or a MemoryError;
- unnamed: a failure whose last stderr line names neither the case's file nor its option.
Exit status 0 when all five are 0. The goal is 0 of each.
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import fuzz_cases  # noqa: E402

PROBLEMS = ("hangs", "crashes", "tracebacks", "over_memory", "unnamed")


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _child(argv: list[str], where: Path, memory: int) -> None:
    """In the forked child: outputs to files, the caps, then the CLI; never returns."""
    code = 70
    try:
        os.environ["TOKENSTEP_CACHE_DIR"] = str(where.parent / "cache")  # one: the kernels are built once
        os.environ["TOKENSTEP_CONFIG_DIR"] = str(where / "config")
        for fd, name in ((1, "stdout"), (2, "stderr")):
            handle = os.open(where / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(handle, fd)
            os.close(handle)
        sys.stdout = os.fdopen(1, "w", closefd=False)
        sys.stderr = os.fdopen(2, "w", closefd=False)
        limit = _vm_size() + memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        import torch

        torch.set_num_threads(1)
        from inference.cli import main

        code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        code = e.code if isinstance(e.code, int) else 2
    except BaseException:  # noqa: BLE001 - reported as a traceback
        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_case(case, root: Path, timeout: float, memory: int) -> dict:
    where = Path(tempfile.mkdtemp(prefix="case-", dir=root))
    argv, names = case.setup(where)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(argv, where, memory)
    killed = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > timeout:
            os.kill(pid, signal.SIGKILL)
            killed = True
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    stderr = (where / "stderr").read_text("utf-8", "replace") if (where / "stderr").exists() else ""
    return {"kind": case.kind, "label": case.label, "names": names, "killed": killed, "status": status,
            "peak": usage.ru_maxrss * 1024, "stderr": stderr, "seconds": time.monotonic() - started}


def classify(result: dict, memory: int) -> list[str]:
    status, stderr = result["status"], result["stderr"]
    lines = [line for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    problems = []
    if result["killed"]:
        problems.append("hangs")
    elif os.WIFSIGNALED(status) or os.WEXITSTATUS(status) not in (0, 1, 2):
        problems.append("crashes")
    if "Traceback" in stderr or "internal error" in stderr or "panicked" in stderr:
        problems.append("tracebacks")
    if result["peak"] > memory or "MemoryError" in stderr:
        problems.append("over_memory")
    failed = not result["killed"] and os.WIFEXITED(status) and os.WEXITSTATUS(status) in (1, 2)
    if failed and not any(name and name.lower() in last.lower() for name in result["names"]):
        problems.append("unnamed")
    return problems


def _warm(root: Path, good: Path, memory: int) -> None:
    """One good run first: the decode kernels are built (once, on disk) before any case is timed."""
    warm = fuzz_cases.Case("warm", "good model", lambda where: (fuzz_cases._trace(str(good)), (str(good),)))
    result = run_case(warm, root, 600, memory)
    if os.WEXITSTATUS(result["status"]) != 0:
        sys.exit(f"the unmodified tiny model fails: {result['stderr'][-2000:]}")


def build(root: Path) -> tuple[Path, bytes]:
    from gguf_writer import write_gguf
    from tiny import make_hf_model, save_hf_model

    hf = make_hf_model("llama", seed=3)
    good = save_hf_model(hf, root / "good")
    return good, write_gguf(hf, good, root / "tiny.gguf").read_bytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="run only the first N cases (0: all)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--memory", type=float, default=2.0, help="GB a case may map and keep resident")
    parser.add_argument("--kinds", default="", help="comma-separated kinds to run (default: all)")
    parser.add_argument("--show", type=int, default=30, help="problem cases to print")
    args = parser.parse_args(argv)
    memory = int(args.memory * (1 << 30))
    for module in ("torch", "inference.cli", "inference.store.gguf.convert", "inference.store.loading"):
        importlib.import_module(module)  # imported once here, so every child starts with them

    with tempfile.TemporaryDirectory(prefix="tokenstep-fuzz-") as tmp:
        root = Path(tmp)
        good, gguf = build(root)
        cases = fuzz_cases.all_cases(good, gguf)
        if args.kinds:
            cases = [c for c in cases if c.kind in args.kinds.split(",")]
        cases = cases[:args.limit] if args.limit else cases
        _warm(root, good, memory)
        counts, kinds, shown = Counter(), Counter(), 0
        worst, slowest = (0, 0.0, ""), (0.0, "")
        started = time.monotonic()
        for case in cases:
            result = run_case(case, root, args.timeout, memory)
            problems = classify(result, memory)
            kinds[case.kind] += 1
            counts["problem" if problems else "refused" if result["status"] else "ok"] += 1
            worst = max(worst, (result["peak"], result["seconds"], case.label), key=lambda w: w[0])
            slowest = max(slowest, (result["seconds"], case.label))
            for problem in problems:
                counts[problem] += 1
            if problems and shown < args.show:
                shown += 1
                last = ([line for line in result["stderr"].splitlines() if line.strip()] or [""])[-1]
                print(f"[{','.join(problems)}] {case.kind}: {case.label}: {last[:200]}", flush=True)
    print(f"{len(cases)} cases ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) in "
          f"{time.monotonic() - started:.0f} s")
    print("  " + ", ".join(f"{p} {counts[p]}" for p in PROBLEMS))
    print(f"  (refused with a named one-line error {counts['refused']}, ran normally "
          f"{counts['ok']}, with problems {counts['problem']})")
    print(f"  highest peak RSS {worst[0] / 1e6:.0f} MB ({worst[2]}); slowest {slowest[0]:.1f} s ({slowest[1]})")
    return 0 if not any(counts[p] for p in PROBLEMS) else 1


if __name__ == "__main__":
    sys.exit(main())
