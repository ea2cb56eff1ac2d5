"""From "default", a folder or a .gguf path to a ready model: config, weights, tokenizer, defaults.

The one place a model is put together: the backend is chosen here, once (layers.select_backend), then the
checked tensors (checkpoint.py) are built for it (weights.py) and handed to the decoder (decoder.py).
With `kernels_in_background` (the app) a float32 model whose kernels are not built yet loads on stock ops
at once (`kernels_pending`); backend_switch.py moves it onto the kernels when their build is done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from inference import cache_dir
from inference import kernels as own_kernels
from inference.errors import ModelFormatError

from inference.messages import say
from inference.events import ModelInfo
from inference.formats.generation_config import sampler_defaults
from inference.formats.headers import read_json_file
from inference.model import kernel_shape
from inference.model.checkpoint import read_checkpoint
from inference.model.config import ModelConfig
from inference.model.decoder import Decoder
from inference.model.layers import select_backend
from inference.model.packing import fingerprint, weights_bytes
from inference.model.prefill_dtype import attach as attach_bf16_prefill, check as check_prefill_dtype
from inference.model.weights import build_weights
from inference.settings import DTYPE_CHOICES, SamplerSettings
from inference.sources import ModelKind
from inference.sources.local import LocalDecoder
from inference.store.catalog import folder_name
from inference.store.default_model import ensure_default_model
from inference.store.gguf.convert import convert_cached
from inference.store.memory import ensure_fits
from inference.store.remote_model import connect, is_url
from inference.text.tokenizer import Tokenizer

# int8: weight-only int8 matrices with a scale per 64 weights of a row; activations, norms and the KV cache in float32.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int8": torch.int8}


BUILDING = " (compiling the decode kernels in the background…)"


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelFormatError(say("load.no_cuda"))
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> str:
    """A dtype name; `auto` is float32 on CPU and bfloat16 on CUDA.

    On CPU, decode (what stepping waits for) reads the weights once per token, and float32 has the
    decode kernels: on an AVX512-BF16 CPU (no AMX) bf16 decoded 1.7-1.8x slower than float32
    (benchmarks/results/decode/amd_2026-12-02_bfloat16.json), and its probabilities drift from the float32 reference by up to
    0.024; on an AVX2-only CPU bf16 prefilled 5x slower. float32 keeps the exact numbers the app
    teaches with.
    """
    if name == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    if name not in DTYPES:
        raise ModelFormatError(say("load.dtype", dtype=name, choices=", ".join(DTYPE_CHOICES)))
    return name


@dataclass
class LoadedModel(ModelKind):
    name: str
    folder: Path
    config: ModelConfig
    decoder: Decoder
    tokenizer: Tokenizer
    defaults: SamplerSettings
    n_params: int
    dtype: str
    fingerprint: str
    weights_bytes: int
    load_seconds: float
    kernels_pending: bool = False  # on stock ops until the decode kernels' background build is done

    @property
    def device(self) -> torch.device:
        return self.decoder.device

    def logits_source(self) -> LocalDecoder:
        return LocalDecoder(self.decoder)

    def info(self) -> ModelInfo:
        c = self.config
        return ModelInfo(
            name=self.name, architecture=c.architecture, n_layers=c.n_layers, n_heads=c.n_heads,
            n_kv_heads=c.n_kv_heads, head_dim=c.head_dim, hidden_size=c.hidden, vocab_size=c.vocab,
            context_length=c.context_length, n_params=self.n_params, dtype=self.dtype,
            device=str(self.device), kv_bytes_per_token=self.decoder.kv_bytes_per_token,
            kv_dtype=str(self.decoder.kv_dtype).removeprefix("torch."),
            kv_element_bytes=self.decoder.kv_dtype.itemsize,
            weights_fingerprint=self.fingerprint, weights_bytes=self.weights_bytes,
            eos_ids=tuple(c.eos_ids), folder=str(self.folder), sampler_defaults=self.defaults,
            decode_path=self.decoder.decode_path + (BUILDING if self.kernels_pending else ""),
            decode_notes=self.decoder.int8_notes,
            layer_windows=tuple(c.window_of(i) or 0 for i in range(c.n_layers)))

    def current_fingerprint(self) -> str:
        return fingerprint(self.decoder.weights)


def _read_json(path: Path) -> dict:
    try:
        data = read_json_file(path)
    except OSError as e:
        raise ModelFormatError(say("load.unreadable", path=str(path), why=e.strerror)) from None
    except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than the parser's stack
        raise ModelFormatError(say("load.not_json", path=str(path), why=str(e) or "nested too deeply")) from None
    if not isinstance(data, dict):
        raise ModelFormatError(say("load.not_object", path=str(path)))
    return data


def read_config(folder: Path) -> tuple[ModelConfig, dict]:
    """The checked config (eos ids merged from generation_config.json) and the generation config."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelFormatError(say("load.no_config", path=str(folder)))
    config = ModelConfig.from_hf(_read_json(config_path), source=str(config_path))
    generation: dict = {}
    generation_path = folder / "generation_config.json"
    if generation_path.is_file():
        generation = _read_json(generation_path)
        extra = generation.get("eos_token_id")
        extra = extra if isinstance(extra, list) else [extra] if isinstance(extra, int) else []
        eos = tuple(dict.fromkeys([*config.eos_ids, *extra]))
        config = type(config)(**{**config.__dict__, "eos_ids": eos})  # a family's own config class kept
    return config, generation


def resolve_folder(spec: str | Path, progress=None) -> Path:
    if str(spec) == "default":
        return ensure_default_model(progress)
    if not str(spec).strip():
        raise ModelFormatError(say("load.no_model"))
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelFormatError(say("load.missing", path=str(path)))
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return convert_cached(path, progress)
        raise ModelFormatError(say("load.not_model", path=str(path)))
    return path


def load_model(spec: str | Path = "default", device: str = "auto", dtype: str = "auto",
               progress=None, tokenizer: str | None = None, prefill_dtype: str = "float32",
               kernels_in_background: bool = False) -> LoadedModel:
    """Load a model; every problem with the files is a one-line ModelFormatError.

    prefill_dtype "bfloat16" (float32 weights on a CPU with bfloat16 dot products): long forwards run
    their products on bfloat16 copies of the layer matrices (prefill_dtype.py), decode stays float32.

    A URL (http://HOST:PORT) connects to an inference server instead (store/remote_model.py): the
    logits come from it, `tokenizer` names its tokenizer.json when the server's own is not readable here."""
    if is_url(spec):
        return connect(str(spec), tokenizer=tokenizer, progress=progress)
    started = time.perf_counter()
    torch_device = resolve_device(device)
    dtype_name = resolve_dtype(dtype, torch_device)
    check_prefill_dtype(prefill_dtype, torch_device.type, dtype_name)
    if torch_device.type == "cpu":
        ensure_fits(str(spec), dtype_name)  # refused in one line before a conversion or a weight read
    folder = resolve_folder(spec, progress)
    config, generation = read_config(folder)
    tokenizer = Tokenizer.from_folder(folder)
    if tokenizer.vocab_size > config.vocab:
        raise ModelFormatError(say("load.vocab", path=str(folder), tokenizer=tokenizer.vocab_size,
                                   model=config.vocab))
    # float32 only: stock ops and the kernels give the same numbers up to float rounding (int8 on stock ops
    # rounds its activations to bfloat16 and ranks with an int8 head: other numbers, so an int8 load waits).
    later = kernels_in_background and dtype_name == "float32" and prefill_dtype == "float32" \
        and torch_device.type == "cpu" and own_kernels.build_pending()  # (rebinding keeps no bf16 copies)
    backend = select_backend(torch_device, DTYPES[dtype_name], allow_own_kernels=not later,
                             progress=progress)  # may compile the kernels
    if progress:
        progress("load", 0, 1)
    hf_tensors, n_params = read_checkpoint(folder, config)
    weights = build_weights(config, hf_tensors, backend)
    decoder = Decoder(config, weights, backend)
    if prefill_dtype == "bfloat16":
        attach_bf16_prefill(decoder)
    manifest = cache_dir.read_manifest(folder) or {}
    if progress:
        progress("load", 1, 1)
    kernel_shape.ensure(decoder, progress)  # the products' shape for this CPU: cached, else measured (~1 s, once)
    return LoadedModel(
        name=manifest.get("name") or folder_name(folder), folder=folder, config=config, decoder=decoder,
        tokenizer=tokenizer, defaults=sampler_defaults(generation), n_params=n_params, dtype=dtype_name,
        fingerprint=fingerprint(weights), weights_bytes=weights_bytes(weights),
        load_seconds=time.perf_counter() - started, kernels_pending=later)
