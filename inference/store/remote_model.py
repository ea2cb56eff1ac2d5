"""Connecting to an inference server: `--model http://HOST:PORT` gives a model whose logits come from it.

On connect: the dialect is detected (dialects.detect), the served model's facts read (name, vocabulary,
context window, parameters where reported), and a local tokenizer found (the tokenizer.json the user
names with `--tokenizer`, else the model path the server reports when it is readable here: a folder with
tokenizer.json, a .gguf whose vocabulary is written out once into the user cache, or a hub id whose
snapshot is in the local Hugging Face cache). The connect dialog shows which local path the server's model
path names before it is read (`python -m inference.store.remote_model URL` prints `offer(URL)`), and
then names it explicitly. The tokenizer must
be the server's: the vocabulary size, EOS and BOS texts, and the ids of a probe string from the server's
`/tokenize` must agree, or connecting fails with the first difference.

A `RemoteModel` stands where a LoadedModel does (Session, trace, engine): both are a `sources.ModelKind`, and
this one says `remote` and makes a `RemoteSource` (`logits_source()`); its `decoder` does not exist here, and
whatever asks for it gets a one-line reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from inference import cache_dir
from inference.model.config import ModelConfig
from inference.errors import EXPECTED, ModelFormatError, one_line
from inference.events import ModelInfo
from inference.messages import as_data, said, say
from inference.settings import SamplerSettings
from inference.text.tokenizer import Tokenizer
from inference.sources.dialects import Dialect, ServerFacts, detect
from inference.sources.http import Http, RemoteUnsupported
from inference.sources import ModelKind
from inference.sources.remote import RemoteSource
from inference.formats.generation_config import read_loosely, sampler_defaults
from inference.store.gguf.metadata import _Metadata, open_gguf
from inference.store.gguf.tokenizer import byte_level_tokenizer_files

OFFER_TIMEOUT = 15.0  # the connect dialog waits this long for the server's facts
PROBE = "Hello, world! The capital of France is Paris.\n  12345 +ünïcødé 日本語 🙂 end"
UNKNOWN_CONTEXT = 32768  # when the server does not say its window


def one_thread() -> None:
    """What this process does per remote step is a few vector operations over the vocabulary: a second
    OpenMP thread only waits for a core (measured on a busy 2-core machine: 3 ms of work a step with one
    thread, 90 ms with two). The engine process and `trace` call this once connected."""
    import torch  # lazy: the connect dialog's offer (`python -m inference.store.remote_model URL`) needs no torch

    torch.set_num_threads(1)


def is_url(spec) -> bool:
    return str(spec).startswith(("http://", "https://"))


def split_spec(spec: str) -> tuple[str, str | None]:
    """`http://HOST:PORT#tokenizer=PATH` -> (url, PATH): the app's Load command carries one string."""
    url, _, fragment = spec.partition("#")
    named = urllib.parse.parse_qs(fragment).get("tokenizer")
    return url, named[0] if named else None


@dataclass
class RemoteModel(ModelKind):
    remote = True  # not a field: what the type says
    name: str
    url: str
    folder: Path  # the tokenizer's folder
    config: ModelConfig
    tokenizer: Tokenizer
    facts: ServerFacts
    dialect: Dialect = field(repr=False)
    defaults: SamplerSettings = SamplerSettings()
    n_params: int = 0
    load_seconds: float = 0.0
    dtype: str = "remote"
    fingerprint: str = "remote"
    weights_bytes: int = 0

    @property
    def decoder(self):
        raise RemoteUnsupported(say("remote.needs_weights", what=say("remote.no_cache"),
                                    then=say("remote.url", url=self.url)))

    @property
    def device(self) -> str:
        return f"remote {self.facts.dialect}"

    def stop_waiting_when(self, asked) -> None:
        """`asked()` is called every few tens of milliseconds, from another thread, while a request to the server
        waits; True stops the request (http.Interrupted)."""
        self.dialect.http.watch = asked

    def logits_source(self) -> RemoteSource:
        return RemoteSource(self.dialect, self.config.vocab)

    def current_fingerprint(self) -> str:
        return "remote"

    def info(self) -> ModelInfo:
        c = self.config
        return ModelInfo(
            name=self.name, architecture=f"remote ({self.facts.dialect})", n_layers=0, n_heads=0, n_kv_heads=0,
            head_dim=0, hidden_size=0, vocab_size=c.vocab, context_length=c.context_length,
            n_params=self.n_params, dtype="remote",
            device=f"{self.facts.dialect} server at {self.url} (attention, logit lens off: no weights here)",
            kv_bytes_per_token=0, kv_dtype="not known", kv_element_bytes=0, weights_fingerprint="remote",
            weights_bytes=0, eos_ids=tuple(c.eos_ids), folder=self.url, sampler_defaults=self.defaults)


def connect(spec: str, tokenizer: str | Path | None = None, timeout: float = 60.0, progress=None) -> RemoteModel:
    """Connect to the server at `spec` (a URL, optionally `#tokenizer=PATH`) and check its tokenizer."""
    started = time.perf_counter()
    url, named = split_spec(spec)
    if progress:
        progress("connect", 0, 1)
    timeout = float(os.environ.get("TOKENSTEP_SERVER_TIMEOUT", timeout))
    dialect = _dialect(url, timeout)
    facts = dialect.facts()
    folder = find_tokenizer(tokenizer or named, facts)
    tok = Tokenizer.from_folder(folder)
    vocab = facts.vocab or tok.vocab_size
    eos, bos = check_tokenizer(tok, dialect, facts, vocab)
    generation = read_loosely(folder)
    extra = generation.get("eos_token_id")
    extra = extra if isinstance(extra, list) else [extra] if isinstance(extra, int) else []
    eos = tuple(sorted(set(eos) | {i for i in extra if isinstance(i, int) and 0 <= i < vocab}))
    config = ModelConfig(  # the shape is the server's business: ones so that nothing divides by zero
        architecture="remote", family="remote", n_layers=1, hidden=1, n_heads=1, n_kv_heads=1, head_dim=1,
        ffn=1, vocab=vocab, context_length=facts.context or UNKNOWN_CONTEXT, norm_eps=0.0, norm="none",
        activation="none", positions="none", tie_embeddings=False, qkv_bias=False, o_bias=False,
        mlp_bias=False, bos_id=bos, eos_ids=eos)
    if progress:
        progress("connect", 1, 1)
    return RemoteModel(name=facts.model or url, url=url, folder=folder, config=config, tokenizer=tok,
                       facts=facts, dialect=dialect, defaults=sampler_defaults(generation),
                       n_params=int(facts.n_params or 0), load_seconds=time.perf_counter() - started)


def _dialect(url: str, timeout: float):
    """The server at `url` as its dialect speaks to it, with the user's API key (TOKENSTEP_SERVER_API_KEY)."""
    return detect(Http(url, timeout=timeout, api_key=os.environ.get("TOKENSTEP_SERVER_API_KEY")))


def find_tokenizer(named, facts: ServerFacts) -> Path:
    """The folder of the tokenizer.json to use: the one named, else the one the server's model path names
    here (served_tokenizer)."""
    if named:
        path = Path(named).expanduser()
        if not holds_tokenizer(path):
            raise ModelFormatError(say("remote.not_tokenizer", path=str(path)))
        return tokenizer_folder(path)
    served = served_tokenizer(facts)
    if served is None:
        raise ModelFormatError(say("remote.no_tokenizer", dialect=facts.dialect,
                                   model_path=facts.model_path or say("remote.not_reported")))
    # the server's word chose a file of this machine to read: say which, as the connect dialog does
    print(f"[tokenstep] tokenizer: {served} (where the server's model path {facts.model_path} points here)",
          file=sys.stderr)
    return tokenizer_folder(served)


def served_tokenizer(facts: ServerFacts) -> Path | None:
    """The local tokenizer.json, folder, .gguf or hub cache snapshot that the server's reported model path
    names on this machine, found without reading it (None: none)."""
    if not facts.model_path:
        return None
    path = Path(facts.model_path).expanduser()
    return path if holds_tokenizer(path) else hub_snapshot(facts.model_path)


def holds_tokenizer(path: Path) -> bool:
    """A tokenizer.json, a folder holding one, or a .gguf file."""
    if path.is_file():
        return path.name == "tokenizer.json" or path.suffix.lower() == ".gguf"
    return path.is_dir() and (path / "tokenizer.json").is_file()


def tokenizer_folder(path: Path) -> Path:
    """The folder of tokenizer.json for a path that holds_tokenizer (a .gguf's vocabulary written out once)."""
    if path.is_file():
        return gguf_tokenizer(path) if path.suffix.lower() == ".gguf" else path.parent
    return path


def offer(url: str) -> dict:
    """What the connect dialog shows before any tokenizer is read: the server's dialect, model and reported
    model path, and the local tokenizer that path names here (`tokenizer`: None when none), or the one-line
    `error` asking failed with."""
    try:
        facts = _dialect(url, OFFER_TIMEOUT).facts()
    except EXPECTED as e:
        found = said(e)
        return {"error": one_line(e), **({"said": as_data(found)} if found is not None else {})}
    served = served_tokenizer(facts)
    return {"dialect": facts.dialect, "model": facts.model, "model_path": facts.model_path,
            "tokenizer": None if served is None else str(served)}


def hub_snapshot(repo_id: str) -> Path | None:
    """A Hugging Face hub cache snapshot of `repo_id` ("org/name", as vLLM and SGLang report a model they
    downloaded) that holds tokenizer.json, when this machine has one."""
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".", "~")):
        return None
    roots = [os.environ.get("HF_HUB_CACHE"), os.environ.get("HF_HOME") and str(Path(os.environ["HF_HOME"]) / "hub"),
             str(Path.home() / ".cache" / "huggingface" / "hub")]
    for root in filter(None, roots):
        snapshots = Path(root) / f"models--{repo_id.replace('/', '--')}" / "snapshots"
        found = sorted(snapshots.glob("*/tokenizer.json"), key=lambda f: f.stat().st_mtime) if snapshots.is_dir() else []
        if found:
            return found[-1].parent
    return None


def gguf_tokenizer(path: Path) -> Path:
    """tokenizer.json (+ config) from a GGUF's vocabulary, written once into the user cache."""
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    target = cache_dir.cache_root() / "tokenizers" / f"{path.stem}-{key}"
    if cache_dir.read_manifest(target) is None:
        def build(tmp: Path) -> dict:
            meta = _Metadata(open_gguf(path), path)
            text, config = byte_level_tokenizer_files(meta)
            (tmp / "tokenizer.json").write_text(text, encoding="utf-8")
            (tmp / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
            return {"source": str(path)}
        cache_dir.publish(target, build)
    return target


def check_tokenizer(tok: Tokenizer, dialect, facts: ServerFacts, vocab: int) -> tuple[tuple[int, ...], int | None]:
    """The EOS ids and BOS id, once the server's tokenizer is shown to be `tok`'s; else ModelFormatError."""
    if facts.vocab is not None and facts.vocab != tok.vocab_size:
        raise ModelFormatError(say("remote.vocab", dialect=facts.dialect, theirs=facts.vocab, source=tok.source,
                                   ours=tok.vocab_size))
    theirs = dialect.tokenize(PROBE)
    if theirs is not None:
        ours = tok.encode(PROBE, add_special_tokens=False)
        if theirs != ours:
            at = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(theirs), len(ours)))
            raise ModelFormatError(say("remote.split", dialect=facts.dialect, source=tok.source, at=at,
                                       theirs=str(theirs[at:at + 1]), ours=str(ours[at:at + 1])))
    eos = set(_config_ids(tok, "eos_token"))
    bos = next(iter(_config_ids(tok, "bos_token")), None)
    for text, kind in ((facts.eos_text, "EOS"), (facts.bos_text, "BOS")):
        if not text:
            continue
        found = tok.token_id(text)
        if found is None:
            raise ModelFormatError(say("remote.lacks", dialect=facts.dialect, kind=kind, text=text))
        if kind == "EOS":
            eos.add(found)
        else:
            bos = found
    if any(i >= vocab for i in eos):
        raise ModelFormatError(say("remote.eos", dialect=facts.dialect, id=max(eos), vocab=vocab))
    return tuple(sorted(eos)), bos


def _config_ids(tok: Tokenizer, key: str) -> list[int]:
    value = tok.config.get(key)
    text = value.get("content") if isinstance(value, dict) else value
    found = tok.token_id(text) if isinstance(text, str) else None
    return [found] if found is not None else []


if __name__ == "__main__":  # the connect dialog asks in a process of its own: the GUI never imports torch
    print(json.dumps(offer(sys.argv[1])))
