"""Whether TokenStep can load a model folder or a GGUF file, and its facts, from headers and configs only.

Support is asked of the loader's own readers every time (ModelConfig.from_hf, and the family registry for a
GGUF's architecture), so a family added there shows as supported here with no change. The facts (parameters, context window,
family, KV bytes per token) are read even for models TokenStep cannot load, where the files say them.
"""

from __future__ import annotations

from pathlib import Path

from inference.errors import ModelFormatError
from inference.model.config import ModelConfig
from inference.model.families import registry
from inference.formats.headers import count_params, index_shards, read_gguf_header, read_json_file, safetensors_tensors

_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")
_KV_ELEMENT_BYTES = 4  # the estimate's KV cache is float32, as on CPU
FLOAT_DTYPES = {"F32", "F16", "BF16", "F64"}  # what checkpoint.py reads (its _FLOAT_DTYPES; it imports torch)


def _reason(error: Exception, prefix: str = "") -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def _read_config(folder: Path) -> tuple[dict | None, str]:
    path = folder / "config.json"
    if not path.exists():
        return None, ("config.json is a broken link (an incomplete download?)" if path.is_symlink()
                      else "no config.json")
    try:
        data = read_json_file(path)
    except ModelFormatError as e:
        return None, f"config.json: {_reason(e, f'{path}: ')}"
    except OSError as e:
        return None, f"config.json cannot be read ({e.strerror or e})"
    except (ValueError, RecursionError):
        return None, "config.json is not valid JSON"
    return (data, "") if isinstance(data, dict) else (None, "config.json is not a JSON object")


def _raw_facts(d: dict) -> dict:
    """What a config says even when TokenStep cannot run it (a multimodal one keeps it in text_config)."""
    text = d.get("text_config") if isinstance(d.get("text_config"), dict) else {}
    archs = d.get("architectures")
    context = next((v for src in (d, text) for k in _CONTEXT_KEYS
                    if isinstance(v := src.get(k), int) and not isinstance(v, bool)), None)
    return {"family": d.get("model_type") if isinstance(d.get("model_type"), str) else None,
            "architecture": archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
            "context_length": context}


def _weight_files(folder: Path) -> tuple[list[Path], str]:
    """The safetensors files a folder's weights are in, or why there are none to read."""
    index = folder / "model.safetensors.index.json"
    if index.exists() or index.is_symlink():
        try:
            files = sorted(index_shards(index))
        except ModelFormatError as e:  # index_shards' own words: not an index, or a shard outside the folder
            return [], f"model.safetensors.index.json: {_reason(e, f'{index}: ')}"
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            return files, f"incomplete download: {missing[0]} is missing" + (
                f" (and {len(missing) - 1} more shards)" if len(missing) > 1 else "")
        return files, ""
    single = folder / "model.safetensors"
    if single.is_file():
        return [single], ""
    if single.is_symlink():
        return [], "incomplete download: model.safetensors is a broken link"
    files = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if files:
        return files, ""
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
        return [], "pickle weights only (.bin/.pt); TokenStep reads safetensors only"
    return [], "no weights (model.safetensors)"


def _params(files: list[Path], drop_head: bool) -> tuple[int | None, str]:
    """The parameters the safetensors headers list, or why they cannot be read (quantised ones included)."""
    tensors: dict[str, tuple[tuple[int, ...], str]] = {}
    for file in files:
        if not file.is_file():
            continue
        try:
            tensors.update(safetensors_tensors(file))
        except ModelFormatError as e:
            return None, _reason(e)
    if drop_head:  # a tied head some checkpoints save although it is the embedding table
        tensors = {k: v for k, v in tensors.items() if not k.endswith("lm_head.weight")}
    n_params = count_params(shape for shape, _ in tensors.values()) if tensors else None
    packed = sorted({dtype for _, dtype in tensors.values()} - FLOAT_DTYPES)
    if packed:
        return n_params, f"quantised weights ({', '.join(packed)} tensors); TokenStep reads float weights only"
    return n_params, ""


def folder_facts(folder: Path) -> dict:
    """The Entry fields of a Hugging Face model folder (all but name, paths, source and size)."""
    d, problem = _read_config(folder)
    if d is None:
        return {"supported": False, "reason": problem}
    facts = _raw_facts(d)
    config = None
    try:
        config = ModelConfig.from_hf(d, source="config.json")
    except ModelFormatError as e:
        problem = _reason(e, "config.json: ")
    quantization = d.get("quantization_config") or d.get("quantization")
    if not problem and quantization:
        method = quantization.get("quant_method") if isinstance(quantization, dict) else None
        problem = f"quantised checkpoint{f' ({method})' if method else ''}; TokenStep reads float weights only"
    files, weights_problem = _weight_files(folder)
    n_params, header_problem = _params(files, drop_head=bool(config and config.tie_embeddings))
    if not (folder / "tokenizer.json").is_file():
        tokenizer_problem = "no tokenizer.json (the fast-tokenizer file is required)"
    else:
        tokenizer_problem = ""
    problem = problem or weights_problem or header_problem or tokenizer_problem
    facts.update(n_params=n_params, supported=not problem, reason=problem)
    if config is not None:
        facts.update(context_length=config.context_length, embed_params=config.vocab * config.hidden,
                     kv_bytes_per_token=2 * config.n_layers * config.kv_dim * _KV_ELEMENT_BYTES)
    return facts


def gguf_facts(path: Path, parts: list[Path]) -> dict:
    """The Entry fields of a GGUF file (all but name, paths, source and size); `parts` of a split file."""
    try:
        header = read_gguf_header(path)
    except ModelFormatError as e:
        return {"supported": False, "reason": _reason(e, f"{path.name}: ")}
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
        problem = f"a GGUF split in {len(parts)} parts: join them first (llama-gguf-split --merge)"
    facts.update(supported=not problem, reason=problem)
    return facts


def gguf_support(header, path: Path) -> str:
    """Why GGUF import would refuse this file's architecture ("" when some family imports it), asked of the
    family registry; the metadata, tokenizer and tensors are checked when the model is loaded."""
    arch = header.architecture
    if arch is None:
        return "no general.architecture in the GGUF metadata"
    if registry.by_gguf(arch) is None:
        return f"GGUF architecture {arch!r} is not supported (supported: {', '.join(registry.gguf_architectures())})"
    return ""
