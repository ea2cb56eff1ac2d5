"""The own CPU kernels of kernels.cpp (one-row products of float32 and int8 weights, one-query attention,
a whole decode layer): compiled once into the user cache, loaded as torch ops.

`ops()` returns `torch.ops.tokenstep` when the kernels can run here (x86-64 with AVX-512 or AVX2 + FMA,
a C++ compiler, the torch headers), else None and layers.select_backend chooses stock ops, which give
the same numbers up to float rounding order. TOKENSTEP_KERNELS=0 turns them off. A build takes 10-60 s,
once per torch version and source (17 s measured on 2 busy cores); `ops_reporting` (what a load calls)
reports it as the stage "compile" first. The library is written under a temporary name and renamed into
place, so an interrupted build is never loaded.

The app does not wait for a first build: `build_in_background()` runs `ops()` on a thread of its own (the
compiler is a subprocess, so the engine keeps answering), and the engine switches a model loaded on stock
ops over to the kernels when it is done (backend_switch.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

import torch

from . import cache_dir

SOURCE = Path(__file__).with_name("kernels.cpp")
# #included by kernels.cpp: part of the build key
INCLUDED = [Path(__file__).with_name(name) for name in ("kernels_int16.cpp", "kernels_int4.cpp", "kernels_integer.cpp",
                                                         "kernels_vocab.cpp", "kernels_step.cpp")]
FLAGS = ["-O3", "-fopenmp", "-shared", "-fPIC", "-std=c++17", "-w"]
# The instruction set torch detected on this CPU -> the flags kernels.cpp is built with for it.
_AVX512 = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"]
ISA_FLAGS = {"AMX": _AVX512, "AVX512": _AVX512, "AVX2": ["-mavx2", "-mfma"]}


# For tests: TOKENSTEP_KERNELS_FLAGS replaces the instruction-set flags: "-mavx2 -mfma" is the AVX2 build on
# an AVX-512 CPU, "-mavx2 -mfma -include tests/avx512_on_avx2.h" the AVX-512 code on an AVX2 CPU
# (tests/test_kernels_emulated.py).
FLAGS_ENV = "TOKENSTEP_KERNELS_FLAGS"


def _isa_flags() -> list[str]:
    if os.environ.get(FLAGS_ENV):
        return shlex.split(os.environ[FLAGS_ENV])
    return ISA_FLAGS.get(torch.backends.cpu.get_cpu_capability(), [])


def _flag_files(flags: list[str]) -> bytes:
    """The text of the headers the flags -include: part of the build key, as the #included sources are."""
    return b"".join(Path(f).read_bytes() for option, f in zip(flags, flags[1:]) if option == "-include")


def _usable_here() -> str | None:
    """Why the kernels cannot run on this machine, or None."""
    if os.environ.get("TOKENSTEP_KERNELS", "1") == "0":
        return "TOKENSTEP_KERNELS=0"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"no kernels for {sys.platform}/{platform.machine()}"
    if not _isa_flags():
        return f"no kernels for this CPU's instruction set ({torch.backends.cpu.get_cpu_capability()})"
    if not shutil.which("c++"):
        return "no C++ compiler (c++) on PATH"
    return None


def _build(target: Path) -> None:
    torch_root = Path(torch.__file__).parent
    torch_lib = torch_root / "lib"
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    includes = [f"-I{torch_root / 'include'}", f"-I{torch_root / 'include' / 'torch' / 'csrc' / 'api' / 'include'}"]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / target.name
        command = ["c++", *FLAGS, *_isa_flags(), abi, *includes, str(SOURCE), "-o", str(partial),
                   f"-L{torch_lib}", "-ltorch", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{torch_lib}"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed")
        os.replace(partial, target)


def _target() -> Path:
    """Where the library for this source, these flags and this torch version is (or will be) built."""
    isa = _isa_flags()
    sources = SOURCE.read_bytes() + b"".join(p.read_bytes() for p in INCLUDED) + _flag_files(isa)
    key = hashlib.sha256(sources + " ".join(FLAGS + isa).encode() + torch.__version__.encode())
    return cache_dir.cache_root() / "kernels" / f"tokenstep-{key.hexdigest()[:16]}.so"


def build_pending() -> bool:
    """True when `ops()` would compile the kernels now: they can run here and are neither loaded nor built."""
    return ops.cache_info().currsize == 0 and _usable_here() is None and not _target().is_file()


def ops_reporting(progress=None):
    """`ops()`, a first build reported as the stage "compile" (0 of 1, then 1 of 1) to `progress`, or as a
    line on stderr without one: the build takes a while, and a load must not say "loading the weights" then."""
    building = build_pending()
    if building and progress:
        progress("compile", 0, 1)
    elif building:
        print("[tokenstep] compiling the decode kernels (once)…", file=sys.stderr)
    kernels = ops()
    if building and progress:
        progress("compile", 1, 1)
    return kernels


_background: Future | None = None
_background_lock = threading.Lock()


def build_in_background() -> Future:
    """A Future of `ops()`, run on a daemon thread: one build at a time, later calls get the same Future.
    The build is a compiler subprocess, so the calling process keeps running meanwhile."""
    global _background
    with _background_lock:
        if _background is None or (_background.done() and build_pending()):
            future: Future = Future()

            def build():
                try:
                    future.set_result(ops())
                except BaseException as e:  # noqa: BLE001 - handed to whoever waits for the Future
                    future.set_exception(e)

            threading.Thread(target=build, name="tokenstep-kernels-build", daemon=True).start()
            _background = future
        return _background


@functools.lru_cache(maxsize=None)
def ops():
    """torch.ops.tokenstep with gemv_f32 and gemv_int8, or None (the reason goes to stderr once). Builds the
    library silently when it is not built yet: `ops_reporting` says so first."""
    reason = _usable_here()
    if reason is None:
        target = _target()
        try:
            if not target.is_file():
                _build(target)
            torch.ops.load_library(str(target))
            return torch.ops.tokenstep
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            reason = f"build failed: {e}"
    if reason != "TOKENSTEP_KERNELS=0":
        print(f"[tokenstep] decode kernels off ({reason}); using stock PyTorch ops", file=sys.stderr)
    return None


def loaded():
    """torch.ops.tokenstep when `ops()` has already loaded them, else None: never builds, never waits (the
    sampler asks on every step, and must not start a build)."""
    return ops() if ops.cache_info().currsize else None
