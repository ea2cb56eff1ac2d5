"""Whether TokenStep can load a model folder or a GGUF file, and its facts, from headers and configs only.

Support is asked of the loader's own readers every time (ModelConfig.from_hf, and the family registry for a
GGUF's architecture), so a family added there shows as supported here with no change. The facts (parameters, context window,
family, KV bytes per token) are read even for models TokenStep cannot load, where the files say them.
"""

from __future__ import annotations

from pathlib import Path

from inference.errors import ModelFormatError
from inference.messages import Message, said, say
from inference.model.config import ModelConfig
from inference.model.families import registry
from inference.formats.headers import count_params, index_shards, read_gguf_header, read_json_file, safetensors_tensors


_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")
_KV_ELEMENT_BYTES = 4  # the estimate's KV cache is float32, as on CPU
FLOAT_DTYPES = {"F32", "F16", "BF16", "F64"}  # what checkpoint.py reads (its _FLOAT_DTYPES; it imports torch)


def _reason(error: Exception, prefix: str = "", file: str | None = None) -> Message | str:
    """A reader's error: its problem without the path it names (`prefix`, for an English line), put under `file`'s
    name when given. A Message where the reader raised one, else its English line."""
    found = said(error)
    if found is not None and found.code == "load.architecture":  # the picker names the model, not its config.json
        problem: Message | str = say("catalog.architecture", **{k: v for k, v in found.values.items() if k != "path"})
    elif found is not None and found.code == "file.in":  # "{path}: {problem}": the path is the prefix
        problem = found.values["problem"]
    elif found is not None:
        problem = found
    else:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        problem = text[len(prefix):] if prefix and text.startswith(prefix) else text
    return say("catalog.file_problem", file=file, problem=problem) if file else problem


def _why(problem: Message | str | None) -> dict:
    """Entry's fields for a problem: `said` when it has a code, else `reason` in English."""
    return {"said": problem} if isinstance(problem, Message) else {"reason": problem or ""}


def _read_config(folder: Path) -> tuple[dict | None, Message | str | None]:
    path = folder / "config.json"
    if not path.exists():
        return None, say("catalog.config_broken_link") if path.is_symlink() else say("catalog.no_config")
    try:
        data = read_json_file(path)
    except ModelFormatError as e:
        return None, _reason(e, f"{path}: ", "config.json")
    except OSError as e:
        return None, say("catalog.config_unreadable", why=e.strerror or str(e))
    except (ValueError, RecursionError):
        return None, say("catalog.config_not_json")
    return (data, None) if isinstance(data, dict) else (None, say("catalog.config_not_object"))


def _raw_facts(d: dict) -> dict:
    """What a config says even when TokenStep cannot run it (a multimodal one keeps it in text_config)."""
    text = d.get("text_config") if isinstance(d.get("text_config"), dict) else {}
    archs = d.get("architectures")
    context = next((v for src in (d, text) for k in _CONTEXT_KEYS
                    if isinstance(v := src.get(k), int) and not isinstance(v, bool)), None)
    return {"family": d.get("model_type") if isinstance(d.get("model_type"), str) else None,
            "architecture": archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
            "context_length": context}


def _weight_files(folder: Path) -> tuple[list[Path], Message | str | None]:
    """The safetensors files a folder's weights are in, or why there are none to read."""
    index = folder / "model.safetensors.index.json"
    if index.exists() or index.is_symlink():
        try:
            files = sorted(index_shards(index))
        except ModelFormatError as e:  # index_shards' own words: not an index, or a shard outside the folder
            return [], _reason(e, f"{index}: ", "model.safetensors.index.json")
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            return files, (say("catalog.shards_missing", file=missing[0], more=len(missing) - 1) if len(missing) > 1
                           else say("catalog.shard_missing", file=missing[0]))
        return files, None
    single = folder / "model.safetensors"
    if single.is_file():
        return [single], None
    if single.is_symlink():
        return [], say("catalog.weights_broken_link")
    files = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if files:
        return files, None
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
        return [], say("catalog.pickle_only")
    return [], say("catalog.no_weights")


def _params(files: list[Path], drop_head: bool) -> tuple[int | None, Message | str | None]:
    """The parameters the safetensors headers list, or why they cannot be read (quantised ones included)."""
    tensors: dict[str, tuple[tuple[int, ...], str]] = {}
    for file in files:
        if not file.is_file():
            continue
        try:
            tensors.update(safetensors_tensors(file))
        except ModelFormatError as e:
            return None, _reason(e, f"{file.name}: ", file.name)
    if drop_head:  # a tied head some checkpoints save although it is the embedding table
        tensors = {k: v for k, v in tensors.items() if not k.endswith("lm_head.weight")}
    n_params = count_params(shape for shape, _ in tensors.values()) if tensors else None
    packed = sorted({dtype for _, dtype in tensors.values()} - FLOAT_DTYPES)
    if packed:
        return n_params, say("catalog.quantised_weights", dtypes=", ".join(packed))
    return n_params, None


def folder_facts(folder: Path) -> dict:
    """The Entry fields of a Hugging Face model folder (all but name, paths, source and size)."""
    d, problem = _read_config(folder)
    if d is None:
        return {"supported": False, **_why(problem)}
    facts = _raw_facts(d)
    config = None
    try:
        config = ModelConfig.from_hf(d, source="config.json")
    except ModelFormatError as e:
        problem = _reason(e, "config.json: ")
    quantization = d.get("quantization_config") or d.get("quantization")
    if not problem and quantization:
        method = quantization.get("quant_method") if isinstance(quantization, dict) else None
        problem = say("catalog.quantised_method", method=method) if method else say("catalog.quantised_checkpoint")
    files, weights_problem = _weight_files(folder)
    n_params, header_problem = _params(files, drop_head=bool(config and config.tie_embeddings))
    tokenizer_problem = None if (folder / "tokenizer.json").is_file() else say("catalog.no_tokenizer")
    problem = problem or weights_problem or header_problem or tokenizer_problem
    facts.update(n_params=n_params, supported=not problem, **_why(problem))
    if config is not None:
        facts.update(context_length=config.context_length, embed_params=config.vocab * config.hidden,
                     kv_bytes_per_token=2 * config.n_layers * config.kv_dim * _KV_ELEMENT_BYTES)
    return facts


def gguf_facts(path: Path, parts: list[Path]) -> dict:
    """The Entry fields of a GGUF file (all but name, paths, source and size); `parts` of a split file."""
    try:
        header = read_gguf_header(path)
    except ModelFormatError as e:
        return {"supported": False, **_why(_reason(e, f"{path.name}: "))}
    arch = header.architecture
    n_params = header.n_params
    for part in parts:
        if part != path:
            try:
                n_params += read_gguf_header(part).n_params
            except ModelFormatError:
                pass
    hidden, n_layers = header.arch_int("embedding_length"), header.arch_int("block_count")
    n_heads = header.arch_int("attention.head_count")
    n_kv = header.arch_int("attention.head_count_kv") or n_heads
    head_dim = header.arch_int("attention.key_length") or (hidden // n_heads if hidden and n_heads else None)
    vocab = header.array_lengths.get("tokenizer.ggml.tokens") or header.arch_int("vocab_size")
    facts = {"family": arch, "architecture": arch, "n_params": n_params,
             "context_length": header.arch_int("context_length"),
             "embed_params": vocab * hidden if vocab and hidden else None,
             "kv_bytes_per_token": 2 * n_layers * n_kv * head_dim * _KV_ELEMENT_BYTES
             if n_layers and n_kv and head_dim else None}
    problem = gguf_support(header, path)
    if not problem and len(parts) > 1:
        problem = say("catalog.gguf_split", parts=len(parts))
    facts.update(supported=not problem, **_why(problem))
    return facts


def gguf_support(header, path: Path) -> Message | None:
    """Why GGUF import would refuse this file's architecture (None when some family imports it), asked of the
    family registry; the metadata, tokenizer and tensors are checked when the model is loaded."""
    arch = header.architecture
    if arch is None:
        return say("catalog.gguf_no_architecture")
    if registry.by_gguf(arch) is None:
        return say("catalog.gguf_architecture", architecture=arch,
                   supported=say("load.supported", names=", ".join(registry.gguf_architectures())))
    return None
