"""The user cache where converted models live, and how a folder is published there safely.

A folder is built under a temporary name and renamed into place only when complete, with a manifest of
its files' sizes. A folder whose manifest is missing or whose files do not match it (an interrupted
build, a truncated file) is treated as absent and rebuilt. Two processes that build the same folder at
once take turns on a lock file: the second finds the first one's result and builds nothing. A cache that
cannot be written (read-only, disk full) is one clear error naming the folder and the way out.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import Callable

import platformdirs

MANIFEST = "tokenstep-manifest.json"
UNWRITABLE = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM, errno.ENOTDIR)
FORMAT_VERSION = 1


def cache_root() -> Path:
    """$TOKENSTEP_CACHE_DIR, else the platform's user cache folder for TokenStep."""
    override = os.environ.get("TOKENSTEP_CACHE_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_cache_dir("tokenstep", appauthor=False))


def make_private(folder: Path) -> Path:
    """`folder` and its missing parents created readable and writable by this user alone (0700): the cache holds
    code (the kernels) and what a model run reads."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another process meanwhile
            level.mkdir(mode=0o700)
    return folder


def only_mine(path: Path, root: Path) -> bool:
    """Whether no other user can have changed `path` or the folders from it up to `root`: each owned by this user
    (or the superuser) and writable by no one else, unless a folder is sticky (as /tmp: others cannot rename
    what is ours)."""
    uid = os.getuid()
    for level in (path, *path.parents):
        info = level.lstat()
        if info.st_uid not in (uid, 0) or (info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX):
            return False
        if level == root:
            return True
    return False


def exit_on_sigterm() -> None:
    """From now on SIGTERM ends this process through SystemExit in its main thread, so that every `finally` runs
    first: a conversion or build stopped half way removes its partial folder (the default action leaves it)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def sweep_dead(folder: Path, prefix: str) -> None:
    """Removes the entries of `folder` named `prefix` + "<pid>" (+ "-…") whose process is gone: what a killed build
    left (kill -9, a power cut) that no `finally` could remove."""
    try:
        leftovers = [entry for entry in folder.iterdir() if entry.name.startswith(prefix)]
    except OSError:
        return
    for leftover in leftovers:
        pid = leftover.name[len(prefix):].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict | None:
    """The manifest of a complete, intact folder; None when the folder must be (re)built."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("version") != FORMAT_VERSION:
            return None
        for name, size in manifest["files"].items():
            if (folder / name).stat().st_size != size:
                return None
        return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@contextlib.contextmanager
def _locked(target: Path):
    """Exclusive use of `target` among processes (a lock file beside it, released on exit or death)."""
    with open(target.parent / f".{target.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def unwritable(target: Path, error: OSError) -> OSError:
    """The one-line error for a cache folder that cannot be written."""
    reason = "the disk is full" if error.errno in (errno.ENOSPC, errno.EDQUOT) else \
        (error.strerror or type(error).__name__)
    return OSError(f"cannot write the model cache {target.parent}: {reason}; nothing was kept (free "
                   f"space, or set TOKENSTEP_CACHE_DIR to a writable folder)")


def publish(target: Path, build: Callable[[Path], dict]) -> Path:
    """Build `target` in a temporary sibling folder, write its manifest, then rename it into place.

    `build(tmp)` writes the files and returns extra manifest fields. A failure or cancel leaves no
    half-built folder behind; a folder another process finished meanwhile is taken as it is.
    """
    try:
        make_private(target.parent)
        with _locked(target):
            if read_manifest(target) is not None:  # built by another process while this one waited
                return target
            _build_and_rename(target, build)
    except OSError as e:
        if e.errno in UNWRITABLE:
            raise unwritable(target, e) from None
        raise
    return target


def _build_and_rename(target: Path, build: Callable[[Path], dict]) -> None:
    tmp = target.parent / f".{target.name}.partial-{os.getpid()}"
    sweep_dead(target.parent, f".{target.name}.partial-")  # under the lock: a live build's partial stays
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        extra = build(tmp)
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {"version": FORMAT_VERSION, "files": files, **extra}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
