"""The own CPU kernels (csrc/: one-row products of float32, int8 and int4 weights, one-query attention, a
whole decode layer or step, a step's vocabulary statistics): compiled once into the user cache, loaded as torch
ops, `torch.ops.tokenstep.<op>`.

The ops by group (csrc/ops.cpp registers them; each group's header named):
- float32 products (f32.h): gemv_f32 (y = alpha * W x [RMSNorm, glu] + bias + residual, for one row of x or 2 to
  16: small M, a verify pass, each weight row read once for all), set_x_offset (where the copy of x sits against
  the weight rows), set_tile_l1_prefetch (whether the small-M tiles ask for their next vectors into L1,
  kernel_shape.py's choice);
- int8 products (int8.h, int16.h, int8_integer.h): gemv_int8 (float32 activations), gemv_int8_int16 (int16
  activations), gemv_int8_integer (int8 activations, VNNI or AVX2), dequantize_int8 (the float32 matrix, for
  BLAS); their activations for the tests: quantize_activations_int16, quantize_activations; what runs here:
  int16_groups, integer_code;
- the kernel shape (shape.h): set_shape, get_shape (rows per pass and prefetch, kernel_shape.py's choice);
- attention, layers, steps (attention.h, layer.h, step.h, rows.h): attend_one, attend_paged (one decode row of each
  of several requests over its own blocks of the paged cache), decode_layer, decode_layers (every layer
  of a step in one parallel region), decode_rows (every layer of a pass over 2 to 16 positions in one region: a
  verify pass over one sequence's cache, or a scheduler step over each request's blocks), products_region (a step's
  products alone, as kernel_shape.py times them);
- the int8 mode's head (head.h): gemv_int4 (the 4-bit ranking product), quantize_activations_int4 (for the
  tests), head_rescored (rank, then the best logits again in float32);
- the vocabulary (vocab.h): vocab_stats (softmax, entropy, top n, argmax in one call), exp_nonpositive (its exp,
  for the tests).
The C++ is one translation unit, ops.cpp, which includes the parts (headers of one concern each) after simd.h,
the AVX-512 / AVX2 vector primitives they are written in.

`ops()` returns `torch.ops.tokenstep` when the kernels can run here (x86-64 with AVX-512 or AVX2 + FMA,
a C++ compiler, the torch headers), else None and layers.select_backend chooses stock ops, which give
the same numbers up to float rounding order. TOKENSTEP_KERNELS=0 turns them off. The build is
torch.utils.cpp_extension's (with ninja), so the C++ standard, ABI, include and library flags are those of the
torch installed; it takes 10-60 s, once per torch version and source (the build key is read from every .cpp and
.h in csrc/; 19-23 s measured on 2 busy cores); `ops_reporting` (what a load calls) reports it as the stage
"compile" first. The library is built in a temporary folder and renamed into place, so an interrupted build is
never loaded. A failed build leaves its whole log in the cache and says why in one line (`build_failure()`: the
compiler's first error and the log).

The app does not wait for a first build: `build_in_background()` runs `ops()` on a thread of its own (the
compiler is a subprocess, so the engine keeps answering), and the engine switches a model loaded on stock
ops over to the kernels when it is done (backend_switch.py).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import platform
import shlex
import shutil
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

import torch

from inference import cache_dir

CSRC = Path(__file__).with_name("csrc")  # the C++: ops.cpp, the one translation unit, #includes the parts (*.h)
SOURCE = CSRC / "ops.cpp"
# Ours, on top of what torch.utils.cpp_extension passes for the installed torch (its C++ standard, ABI, include and
# library flags: torch 2.14's headers need C++20, 2.13's built as C++17).
FLAGS = ["-O3", "-fopenmp", "-w"]
LINK_FLAGS = ["-fopenmp"]
# The instruction set torch detected on this CPU -> the flags the kernels are built with for it (simd.h picks its
# instructions from them).
_AVX512 = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"]
ISA_FLAGS = {"AMX": _AVX512, "AVX512": _AVX512, "AVX2": ["-mavx2", "-mfma"]}
EXTENSION = "tokenstep_kernels"
DID_NOT_BUILD = "the kernels did not build"


# A test knob, not a setting: TOKENSTEP_KERNELS_FLAGS replaces the instruction-set flags: "-mavx2 -mfma" is the AVX2 build on
# an AVX-512 CPU, "-mavx2 -mfma -include tests/support/avx512_on_avx2.h" the AVX-512 code on an AVX2 CPU
# (tests/kernels/test_kernels_emulated.py).
FLAGS_ENV = "TOKENSTEP_KERNELS_FLAGS"


def _isa_flags() -> list[str]:
    if os.environ.get(FLAGS_ENV):
        return shlex.split(os.environ[FLAGS_ENV])
    return ISA_FLAGS.get(torch.backends.cpu.get_cpu_capability(), [])


def _flag_files(flags: list[str]) -> bytes:
    """The text of the headers the flags -include: part of the build key, as the #included sources are. A
    missing one is left to the compiler, whose error then says so."""
    return b"".join(Path(f).read_bytes() if Path(f).is_file() else f.encode()
                    for option, f in zip(flags, flags[1:]) if option == "-include")


def _compiler() -> str:
    return os.environ.get("CXX", "c++")  # what torch.utils.cpp_extension compiles with


def unavailable_reason() -> str | None:
    """Why the kernels cannot run on this machine at all, or None: then they should build and load here."""
    if os.environ.get("TOKENSTEP_KERNELS", "1") == "0":
        return "TOKENSTEP_KERNELS=0"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"no kernels for {sys.platform}/{platform.machine()}"
    if not _isa_flags():
        return f"no kernels for this CPU's instruction set ({torch.backends.cpu.get_cpu_capability()})"
    if not shutil.which(_compiler()):
        return f"no C++ compiler ({_compiler()}) on PATH"
    return None


class BuildError(RuntimeError):
    """The compiler failed: the message is its first error line and where the whole log is kept."""


def first_error(log: str) -> str:
    """The compiler's first `error:` line, its file named without the folder ("simd.h:12:3: error: …"),
    else the log's last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line and not line.startswith("FAILED:"):
            where, sep, what = line.partition(": ")
            return f"{Path(where).name if '/' in where else where}{sep}{what}"
    return lines[-1] if lines else "no output"


def _ninja_on_path() -> None:
    """torch.utils.cpp_extension runs `ninja` from PATH; the `ninja` package's binary is not there when the
    venv's python runs without the venv activated."""
    if shutil.which("ninja") is None:
        with contextlib.suppress(ImportError):
            import ninja  # lazy: optional, a ninja already on PATH serves

            os.environ["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"


def _build(target: Path) -> None:
    """Compile ops.cpp with torch.utils.cpp_extension (ninja) in a temporary folder beside `target`, load
    the library (cpp_extension does), then rename it into place. A failure raises BuildError with the
    compiler's first error and keeps the whole log beside the library."""
    # Imported here: it imports setuptools, which only a build needs (a load from the cache is the common case).
    # On a CUDA build of torch without a CUDA toolkit its import logs a warning about CUDA_HOME: noise for a CPU
    # build, and the one line a failed build prints must stay one line.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension  # lazy: 2 s of imports (setuptools), for a build only

    _ninja_on_path()
    log_path = target.with_suffix(".log")
    cache_dir.sweep_dead(target.parent, ".build-")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".build-{os.getpid()}-") as tmp:
        try:
            built = cpp_extension.load(EXTENSION, [str(SOURCE)], extra_cflags=FLAGS + _isa_flags(),
                                       extra_ldflags=LINK_FLAGS, build_directory=tmp, with_cuda=False,
                                       is_python_module=False, verbose=False)
        except RuntimeError as e:
            log_path.write_text(str(e))
            raise BuildError(f"{first_error(str(e))}; full log: {log_path}") from None
        os.replace(built, target)
    log_path.unlink(missing_ok=True)


def _target() -> Path:
    """Where the library for this source, these flags and this torch version is (or will be) built."""
    isa = _isa_flags()
    # every part of the one translation unit (ops.cpp and the headers it includes), each with its name
    sources = b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in sorted(CSRC.iterdir())
                       if p.suffix in (".cpp", ".h")) + _flag_files(isa)
    key = hashlib.sha256(sources + " ".join(FLAGS + LINK_FLAGS + isa + [_compiler()]).encode()
                         + torch.__version__.encode())
    return cache_dir.cache_root() / "kernels" / f"tokenstep-{key.hexdigest()[:16]}.so"


def _kernels_folder() -> Path | None:
    """The cache's kernels folder, made private (0700) where it is this user's, or None when another user could
    change what is in it (a cache shared by a class): code from there is never loaded."""
    folder = cache_dir.make_private(cache_dir.cache_root() / "kernels")
    info = folder.stat()
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        folder.chmod(0o700)  # made by an older TokenStep under the user's umask
    return folder if cache_dir.only_mine(folder, cache_dir.cache_root()) else None


def _loadable(target: Path) -> bool:
    """A library in the cache that only this user can have written (see _kernels_folder)."""
    return target.is_file() and cache_dir.only_mine(target, cache_dir.cache_root())


def build_pending() -> bool:
    """True when `ops()` would compile the kernels now: they can run here and are neither loaded nor built."""
    return _state.cache_info().currsize == 0 and unavailable_reason() is None and not _loadable(_target())


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
def _state() -> tuple[object | None, str | None]:
    """(torch.ops.tokenstep, None) when the kernels run here, else (None, why not); a reason other than
    TOKENSTEP_KERNELS=0 goes to stderr once. Builds the library when it is not built yet."""
    reason = unavailable_reason()
    if reason is not None:
        if reason != "TOKENSTEP_KERNELS=0":
            print(f"[tokenstep] decode kernels off ({reason}); using stock PyTorch ops", file=sys.stderr)
        return None, reason
    target = _target()
    try:
        if _loadable(target):
            torch.ops.load_library(str(target))
        elif _kernels_folder() is not None:
            _build(target)  # cpp_extension loads what it built
        else:
            print(f"[tokenstep] {cache_dir.cache_root()} can be written by other users: building the decode "
                  "kernels privately for this run", file=sys.stderr)
            private = Path(tempfile.mkdtemp(prefix="tokenstep-kernels-")) / target.name  # 0700, this user's
            _build(private)  # a failed build's log stays there, as its one line says
            private.unlink()  # loaded: the file may go
            private.parent.rmdir()
        return torch.ops.tokenstep, None
    except BuildError as e:
        reason = f"{DID_NOT_BUILD} ({e})"
    except (OSError, RuntimeError) as e:  # a library in the cache that does not load, ninja missing, …
        reason = f"{DID_NOT_BUILD} ({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})"
    print(f"[tokenstep] stock PyTorch ops: {reason}", file=sys.stderr)
    return None, reason


def ops():
    """torch.ops.tokenstep with the kernels' ops, or None: see `_state`."""
    return _state()[0]


def build_failure() -> str | None:
    """"the kernels did not build (<the compiler's first error>; full log: <path>)" after `ops()` tried and the
    build failed, else None (loaded, not tried yet, or they cannot run here at all)."""
    if not _state.cache_info().currsize:
        return None
    reason = _state()[1]
    return reason if reason and reason.startswith(DID_NOT_BUILD) else None


def loaded():
    """torch.ops.tokenstep when `ops()` has already loaded them, else None: never builds, never waits (the
    sampler asks on every step, and must not start a build)."""
    return ops() if _state.cache_info().currsize else None
