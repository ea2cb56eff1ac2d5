"""The user cache where converted models live, and how a folder is published there safely.

A folder is built under a temporary name and renamed into place only when complete, with a manifest of
its files' sizes. A folder whose manifest is missing or whose files do not match it (an interrupted
build, a truncated file) is treated as absent and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable

MANIFEST = "tokenstep-manifest.json"
FORMAT_VERSION = 1


def cache_root() -> Path:
    """$TOKENSTEP_CACHE_DIR, else the platform's user cache folder for TokenStep."""
    override = os.environ.get("TOKENSTEP_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tokenstep", appauthor=False))


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


def publish(target: Path, build: Callable[[Path], dict]) -> Path:
    """Build `target` in a temporary sibling folder, write its manifest, then rename it into place.

    `build(tmp)` writes the files and returns extra manifest fields. A failure or cancel leaves no
    half-built folder behind.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.partial-{os.getpid()}"
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
    return target
