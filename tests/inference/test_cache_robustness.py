"""The model cache under stress: two processes building the same folder, a full disk, an unwritable
cache, a half-written folder. Each ends in a correct folder or one clear error, never a corrupt cache."""

from __future__ import annotations

import errno
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from inference import cache_dir
from inference.errors import one_line


def _slow_build(tmp: Path, log: str, tag: str) -> dict:
    with open(log, "a") as f:
        f.write(tag + "\n")
    time.sleep(0.5)
    (tmp / "weights.bin").write_bytes(tag.encode() * 1000)
    return {"builder": tag}


def _publish_in_process(target: str, log: str, tag: str) -> None:
    cache_dir.publish(Path(target), lambda tmp: _slow_build(tmp, log, tag))


def test_two_processes_building_at_once_build_once(tmp_path):
    target, log = tmp_path / "models" / "m", tmp_path / "log.txt"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_publish_in_process, args=(str(target), str(log), t)) for t in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    builders = log.read_text().split()
    assert len(builders) == 1  # the second waited on the lock and took the first one's folder
    manifest = cache_dir.read_manifest(target)
    assert manifest is not None and manifest["builder"] == builders[0]
    assert (target / "weights.bin").read_bytes() == builders[0].encode() * 1000
    assert not [p for p in target.parent.iterdir() if ".partial-" in p.name]


def test_a_full_disk_leaves_nothing_and_says_so(tmp_path):
    target = tmp_path / "models" / "m"

    def build(tmp: Path) -> dict:
        (tmp / "half.bin").write_bytes(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info:
        cache_dir.publish(target, build)
    line = one_line(info.value)
    assert "disk is full" in line and str(target.parent) in line and "TOKENSTEP_CACHE_DIR" in line
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == [".m.lock"]  # no partial folder kept


def test_an_unwritable_cache_is_one_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(blocker / "cache"))
    from inference.store import default_model

    with pytest.raises(OSError) as info:
        default_model.ensure_default_model()
    line = one_line(info.value)
    assert line.startswith("cannot write the model cache") and str(blocker) in line
    assert "\n" not in str(info.value)


def test_a_half_written_folder_is_rebuilt(tmp_path):
    target = tmp_path / "m"
    cache_dir.publish(target, lambda tmp: (tmp / "w.bin").write_bytes(b"1234") and {})
    assert cache_dir.read_manifest(target) is not None
    (target / "w.bin").write_bytes(b"12")  # truncated by a crash or a careless hand
    assert cache_dir.read_manifest(target) is None
    cache_dir.publish(target, lambda tmp: (tmp / "w.bin").write_bytes(b"5678") and {})
    assert (target / "w.bin").read_bytes() == b"5678"
    assert json.loads((target / cache_dir.MANIFEST).read_text())["files"] == {"w.bin": 4}
