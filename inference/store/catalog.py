"""The models a user already has: what the model picker lists, found without reading a weight.

Sources, in the order the picker shows them:
- recent models: each model the app loaded, recorded in the picker's settings (model_settings.py);
- TokenStep's default model, converted in the user cache (or downloaded on first use);
- the Hugging Face hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), as
  huggingface_hub's own `scan_cache_dir` reads it: its repositories, revisions, refs (`main` names the
  current revision) and sizes; a repository it finds damaged is listed with its words;
- `.gguf` files and model folders (a config.json) in LM Studio's folders and in folders the user added.
Each entry says its size on disk (real files counted once, through the symlinks), its parameters (from
safetensors or GGUF headers), context window, family, and whether TokenStep can load it, with the one-line
reason when not. Support is whatever inference.model.config (and GGUF import) accept today, asked every time.
A broken snapshot, bad JSON or a dangling link is an unsupported entry with its reason, never an
exception; walks are capped (MAX_VISITS directory entries, MAX_DEPTH levels).
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path

from huggingface_hub import CachedRepoInfo, CachedRevisionInfo, CacheNotFound, HFCacheInfo, scan_cache_dir

from inference import cache_dir
from inference.messages import Message, say
from inference.store.catalog_support import folder_facts, gguf_facts
from inference.store.model_settings import ModelSettings

MAX_DEPTH = 4  # LM Studio: models/<publisher>/<repo>/<file>.gguf
MAX_VISITS = 20_000  # directory entries looked at in one scan
# The hub cache's scan (huggingface_hub) is given this long: it opens every ref file and stats every snapshot file,
# and a FIFO among the refs, or a network folder that stopped answering, would otherwise hold the picker forever.
HUB_SCAN_SECONDS = 30.0
_SPLIT_GGUF = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class Entry:
    name: str
    spec: str  # what load_model takes: "default", a folder, a .gguf path
    path: str
    source: str  # "recent", "default", "HF cache", "LM Studio", "folder", "file"
    size_bytes: int | None = None
    n_params: int | None = None
    context_length: int | None = None
    family: str | None = None  # the model's own name for its kind: "llama", "qwen2", "gemma3", ...
    architecture: str | None = None  # the HF class or the GGUF architecture
    supported: bool = False
    reason: str = ""  # why not, in one line of English (str(said) when `said` is given)
    recent_at: float | None = None
    embed_params: int | None = None  # vocab x hidden: the table int8 keeps in float
    kv_bytes_per_token: int | None = None  # at 4 bytes per element
    converted: bool = True  # False: a GGUF not converted yet (its conversion needs memory too)
    said: Message | None = None  # why not, as a code and values (the picker words it in the app's language)

    def __post_init__(self):
        if self.said is not None:
            object.__setattr__(self, "reason", str(self.said))
        # a file name may hold control or right-to-left characters that make the list lie (a U+202E flips
        # "gguf.exe" into view as "exe.fugg"): shown as U+FFFD; `spec` and `path` stay as they are, for loading
        object.__setattr__(self, "name", printable(self.name))
        object.__setattr__(self, "reason", printable(self.reason))


def printable(text: str) -> str:
    """`text` with control and formatting characters (Unicode Cc, Cf: bidi overrides, zero-width) as U+FFFD."""
    return "".join("\ufffd" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text)


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps models: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def lm_studio_dirs() -> list[Path]:
    home = Path.home()
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


class _Budget:
    def __init__(self, visits: int):
        self.left = visits

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


def scan(settings: ModelSettings | None = None, visits: int = MAX_VISITS) -> list[Entry]:
    """Every model found, recent ones first (newest first), then the default, then the others by name."""
    settings = settings if settings is not None else ModelSettings.load()
    budget = _Budget(visits)
    found: dict[str, Entry] = {}

    def add(entry: Entry | None) -> None:
        if entry is None:
            return
        key = entry.spec if entry.spec == "default" else os.path.realpath(entry.path)
        old = found.get(key)
        if old is None:
            found[key] = entry
        elif old.source == "recent":  # found again where it lives: say where, keep when it was loaded
            found[key] = replace(entry, recent_at=old.recent_at)

    for recent in settings.recent:
        add(_describe_recent(recent.spec, recent.at))
    add(default_entry())
    for entry in hub_entries(budget):
        add(entry)
    folders = [(d, "LM Studio") for d in lm_studio_dirs()] + [(Path(f), "folder") for f in settings.folders]
    for folder, source in folders:
        for entry in folder_entries(folder, source, budget):
            add(entry)
    recents = sorted((e for e in found.values() if e.recent_at), key=lambda e: -(e.recent_at or 0))
    default = [e for e in found.values() if e.spec == "default" and not e.recent_at]
    others = sorted((e for e in found.values() if not e.recent_at and e.spec != "default"),
                    key=lambda e: (not e.supported, e.name.lower()))
    return recents + default + others


def describe(spec: str, source: str = "file") -> Entry:
    """One model named by what load_model takes: "default", a model folder or a .gguf file."""
    if spec == "default":
        return default_entry()
    path = Path(spec).expanduser()
    try:
        if not path.exists():
            return Entry(path.name, str(path), str(path), source, said=say("catalog.gone"))
        if path.is_dir():
            return describe_folder(path, folder_name(path), source)
        if path.suffix.lower() == ".gguf" and path.is_file():
            return describe_gguf(path, source)
    except OSError as e:
        return _unreadable(path, path.name, source, e)
    return Entry(path.name, str(path), str(path), source, said=say("catalog.not_model"))


def folder_name(folder: Path) -> str:
    """A hub snapshot by its repository ("org/name"), any other folder by its own name."""
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return "/".join(folder.parent.parent.name.split("--")[1:])
    return folder.name


def _describe_recent(spec: str, at: float) -> Entry:
    return replace(describe(spec, "recent"), recent_at=at)


def default_entry() -> Entry:
    """TokenStep's default model: its converted folder in the user cache, or a note that it comes on first use."""
    models = cache_dir.cache_root() / "models"
    try:
        folders = sorted(models.iterdir()) if models.is_dir() else []
    except OSError:
        folders = []
    for folder in folders:
        manifest = cache_dir.read_manifest(folder)
        if manifest and manifest.get("wheel_sha256"):  # what default_model writes
            entry = describe_folder(folder, f"{manifest.get('name') or folder.name} (default)", "default")
            return replace(entry, spec="default")
    return Entry("The default model (downloaded on first use)", "default", str(models), "default",
                 supported=True)


def hub_entries(budget: _Budget, root: Path | None = None, wait: float = HUB_SCAN_SECONDS) -> list[Entry]:
    """One entry per model repository in the hub cache: its current revision (refs/main, else the newest), sized as
    huggingface_hub counts it (each blob once); one the scan found damaged, with the scan's words."""
    root = root or hub_cache_dir()
    try:
        info = _scan_hub(root, wait)
    except CacheNotFound:
        return []
    except Exception as e:  # noqa: BLE001 - an unreadable folder, a ref that is not text: the scan stops at it
        return [_unreadable(root, "The Hugging Face cache", "HF cache", e)]
    entries = []
    scanned = {repo.repo_path.name: repo for repo in info.repos if repo.repo_type == "model"}
    listed = _list_dir(root, budget)  # the names only: the order, and the damaged repositories the scan dropped
    dropped = [f.name for f in listed if f.name not in scanned and f.name.startswith("models--")
               and _is_folder(f, links=True)]
    damage = _damage(root, dropped, info.warnings)
    for folder in listed:
        if folder.name in scanned:
            entries.extend(_repo_entries(root / folder.name, scanned[folder.name], budget))
        elif folder.name in damage:
            entries.append(Entry(folder_name(folder / "snapshots" / "x"), str(folder), str(folder), "HF cache",
                                 said=damage[folder.name]))
    return entries


def _scan_hub(root: Path, wait: float) -> HFCacheInfo:
    """scan_cache_dir(root), given `wait` seconds (TimeoutError after: the scan thread is left to itself)."""
    done: dict[str, object] = {}

    def run() -> None:
        try:
            done["info"] = scan_cache_dir(root)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            done["error"] = e

    thread = threading.Thread(target=run, name="hub cache scan", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        raise TimeoutError(f"its scan took over {wait:g} s (a FIFO among its refs, or a folder that does not answer?)")
    if "error" in done:
        raise done["error"]
    return done["info"]


def _repo_entries(repo_folder: Path, repo: CachedRepoInfo, budget: _Budget) -> list[Entry]:
    """A scanned repository's entry; a GGUF-only repository's .gguf files, one entry each."""
    revision = _current_revision(repo)
    if revision is None:
        return [Entry(repo.repo_id, str(repo_folder), str(repo_folder), "HF cache", said=say("catalog.no_snapshot"))]
    snapshot = repo_folder / "snapshots" / revision.commit_hash  # under the root as named, not as resolved
    entry = describe_folder(snapshot, repo.repo_id, "HF cache", budget, size=revision.size_on_disk)
    if entry.supported is False and not _is_file(snapshot / "config.json") \
            and any(f.file_name.lower().endswith(".gguf") for f in revision.files):
        return folder_entries(snapshot, "HF cache", budget, prefix=repo.repo_id)
    return [entry]


def _current_revision(repo: CachedRepoInfo) -> CachedRevisionInfo | None:
    """The revision refs/main names, else the newest one downloaded."""
    return repo.refs.get("main") or max(repo.revisions, key=lambda r: r.last_modified, default=None)


def _damage(root: Path, folders: list[str], warnings: list[Exception]) -> dict[str, Message]:
    """Why the scan dropped the repository in each of `folders`, in its own words with paths from the hub cache on.
    A warning names its repository's folder, except a link to a missing file outside the cache: that one is
    paired with the repository no other warning explains when there is one of each."""
    def names(folder: str, warning: Exception) -> bool:
        return re.search(re.escape(folder) + r"(?![\w.-])", str(warning)) is not None

    said = {f: next((w for w in warnings if names(f, w)), None) for f in folders}
    unclaimed = [w for w in warnings if not any(names(f, w) for f in folders)]
    unexplained = [f for f, w in said.items() if w is None]
    if len(unexplained) == len(unclaimed) == 1:
        said[unexplained[0]] = unclaimed[0]
    prefixes = (f"{Path(root).expanduser().resolve()}{os.sep}", f"{root}{os.sep}")
    out = {}
    for folder, warning in said.items():
        text = (str(warning).splitlines() or [""])[0] if warning is not None else ""
        for prefix in prefixes:
            text = text.replace(prefix, "")
        out[folder] = (say("catalog.damaged", detail=printable(text)) if printable(text)
                       else say("catalog.damaged_unread"))
    return out


def folder_entries(root: Path, source: str, budget: _Budget, prefix: str = "") -> list[Entry]:
    """Model folders (a config.json) and .gguf files under `root`, MAX_DEPTH levels down at most."""
    entries: list[Entry] = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        if depth and _is_file(folder / "config.json"):
            entries.append(describe_folder(folder, _relative_name(root, folder, prefix), source, budget))
            continue
        children = _list_dir(folder, budget)
        for child in children:
            if child.name.startswith("."):
                continue
            if child.suffix.lower() == ".gguf" and _is_file(child):
                split = _SPLIT_GGUF.search(child.name)
                if split and int(split.group(1)) != 1:
                    continue  # listed once, as its first part
                entry = describe_gguf(child, source, [c for c in children if _same_split(child, c)])
                entries.append(replace(entry, name=_relative_name(root, child, prefix)))
            elif depth < MAX_DEPTH and _is_folder(child):
                stack.append((child, depth + 1))
    if not entries and _is_file(root / "config.json"):
        entries.append(describe_folder(root, prefix or root.name, source, budget))
    return entries


def _is_file(path: Path) -> bool:
    """A regular file (a FIFO named config.json is none); one that cannot be looked at is none either: one odd
    entry must not end the scan."""
    try:
        return path.is_file()
    except OSError:
        return False


def _is_folder(path: Path, links: bool = False) -> bool:
    """A folder (not a link to one, unless `links`); one that cannot be looked at is none."""
    try:
        return path.is_dir() and (links or not path.is_symlink())
    except OSError:
        return False


def _same_split(first: Path, other: Path) -> bool:
    match = _SPLIT_GGUF.search(first.name)
    return bool(match) and _SPLIT_GGUF.sub("", other.name) == _SPLIT_GGUF.sub("", first.name) \
        and _SPLIT_GGUF.search(other.name) is not None


def _relative_name(root: Path, path: Path, prefix: str) -> str:
    try:
        relative = str(path.relative_to(root))
    except ValueError:
        relative = path.name
    return f"{prefix}/{relative}" if prefix else relative


def _list_dir(folder: Path, budget: _Budget) -> list[Path]:
    """The folder's entries, sorted, within the scan's budget; an unreadable folder is empty."""
    try:
        with os.scandir(folder) as it:
            children = []
            for item in it:
                if not budget.spend():
                    break
                children.append(Path(item.path))
    except OSError:
        return []
    return sorted(children)


def folder_size(folder: Path, budget: _Budget | None = None) -> int:
    """Bytes of the real files under `folder`, each counted once (hub snapshots link into shared blobs)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [folder]
    budget = budget or _Budget(MAX_VISITS)
    while stack:
        for child in _list_dir(stack.pop(), budget):
            try:
                info = child.stat()  # follows the symlink to the blob; a dangling one raises
            except OSError:
                continue
            if child.is_dir():
                if not child.is_symlink():
                    stack.append(child)
            elif (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_size
    return total


def _unreadable(path: Path, name: str, source: str, error: Exception) -> Entry:
    """A model whose files broke a reader in a way it did not foresee: listed, not raised."""
    text = str(error).splitlines()[0] if str(error) else ""
    return Entry(name, str(path), str(path), source, said=say("catalog.unreadable", error=type(error).__name__, text=text))


def describe_folder(folder: Path, name: str, source: str, budget: _Budget | None = None,
                    size: int | None = None) -> Entry:
    """A model folder; `size`: its bytes when already known (a hub revision's), else counted here."""
    try:
        facts = folder_facts(folder)
    except Exception as e:  # noqa: BLE001 - one odd folder must not hide the others
        return _unreadable(folder, name, source, e)
    return Entry(name=name, spec=str(folder), path=str(folder), source=source,
                 size_bytes=folder_size(folder, budget) if size is None else size, **facts)


def describe_gguf(path: Path, source: str, parts: list[Path] | None = None) -> Entry:
    parts = parts or [path]
    size = 0
    for part in parts:
        try:
            size += part.stat().st_size
        except OSError:
            pass
    try:
        facts = gguf_facts(path, parts)
    except Exception as e:  # noqa: BLE001 - one odd file must not hide the others
        return _unreadable(path, path.name, source, e)
    return Entry(name=path.name, spec=str(path), path=str(path), source=source, size_bytes=size,
                 converted=_converted(path), **facts)


def _converted(path: Path) -> bool:
    """Whether a folder converted from a GGUF of this name is in the cache (hashing it would read it all)."""
    converted = cache_dir.cache_root() / "converted"
    try:
        for folder in converted.glob(f"{path.stem}-*"):
            manifest = cache_dir.read_manifest(folder)
            if manifest and manifest.get("source") == path.name:
                return True
    except OSError:
        pass
    return False

