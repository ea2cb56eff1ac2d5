"""The model picker's own settings: folders the user added and the models the app loaded, most recent first.

One small JSON file in the user config folder ($TOKENSTEP_CONFIG_DIR, else platformdirs'
user_config_dir("tokenstep")). A missing or unreadable file is an empty list, never an error; it is
rewritten whole through a temporary file, so a crash cannot leave half of it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

FILE = "models.json"
MAX_RECENT = 20


def config_root() -> Path:
    override = os.environ.get("TOKENSTEP_CONFIG_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_config_dir("tokenstep", appauthor=False))


@dataclass
class Recent:
    spec: str  # what was loaded: "default", a folder or a .gguf path
    at: float  # when (seconds since the epoch)


@dataclass
class ModelSettings:
    folders: list[str] = field(default_factory=list)
    recent: list[Recent] = field(default_factory=list)

    @classmethod
    def load(cls, root: Path | None = None) -> "ModelSettings":
        path = (root or config_root()) / FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        folders = [f for f in data.get("folders") or [] if isinstance(f, str)]
        recent = [Recent(r["spec"], float(r["at"])) for r in data.get("recent") or []
                  if isinstance(r, dict) and isinstance(r.get("spec"), str)
                  and isinstance(r.get("at"), (int, float)) and not isinstance(r.get("at"), bool)]
        return cls(folders, recent)

    def save(self, root: Path | None = None) -> None:
        root = root or config_root()
        root.mkdir(parents=True, exist_ok=True)
        data = {"version": 1, "folders": self.folders,
                "recent": [{"spec": r.spec, "at": r.at} for r in self.recent]}
        tmp = root / f".{FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, root / FILE)

    def add_folder(self, folder: str) -> None:
        folder = str(Path(folder).expanduser().absolute())
        if folder not in self.folders:
            self.folders.append(folder)

    def add_recent(self, spec: str, at: float | None = None) -> None:
        # absolute, not resolved: a hub file is a symlink whose target (a blob) has no .gguf suffix
        spec = spec if spec == "default" else str(Path(spec).expanduser().absolute())
        others = [r for r in self.recent if r.spec != spec]
        self.recent = [Recent(spec, time.time() if at is None else at)] + others
        del self.recent[MAX_RECENT:]


def record_loaded(spec: str, root: Path | None = None) -> None:
    """Remember a model the app has just loaded (best effort: a read-only config folder only loses this)."""
    settings = ModelSettings.load(root)
    settings.add_recent(spec)
    try:
        settings.save(root)
    except OSError:
        pass


def add_folder(folder: str, root: Path | None = None) -> None:
    settings = ModelSettings.load(root)
    settings.add_folder(folder)
    settings.save(root)
