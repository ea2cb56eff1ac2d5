"""Checkpoint tensors: strict safetensors reading against the family's layout (families/registry.py).

The family's `Layout` lists every tensor a config implies, in checkpoint order (role, HF name, shape, GGUF
name: families/parts.py). Here it
- tells `read_checkpoint` what must be in the files: anything missing, unexpected or misshaped is one
  ModelFormatError line naming the file (a few known non-weight buffers aside);
- checks every weight is finite as it is copied out (NaN or inf named with its tensor);
- hands weights.py the checked tensors by role (`take_layer`, `take_ends`).
Only safetensors are read: pickle-based `.bin` files can run code when loaded, so they are refused.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from inference.errors import ModelFormatError
from inference.messages import say
from inference.formats.headers import index_shards, safetensors_tensors
from inference.model.config import ModelConfig
from inference.model.families import registry
from inference.model.packing import copy_releasing


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """HF tensor name -> shape, for every tensor the config implies, in checkpoint order."""
    return registry.family(config.family).layout.shapes(config)


def take_layer(tensors: dict[str, torch.Tensor], config: ModelConfig, i: int) -> dict[str, torch.Tensor | None]:
    """Layer i's tensors by role (None where the config has none), removed from `tensors`."""
    return {spec.role: tensors.pop(spec.hf.format(i=i), None) for spec in registry.family(config.family).layout.layer}


def take_ends(tensors: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor | None]:
    """The tensors before and after the layers by role, removed from `tensors` (a tied model's saved
    head included: some checkpoints carry it although it is the embedding table)."""
    layout = registry.family(config.family).layout
    return {spec.role: tensors.pop(spec.hf, None) for spec in layout.inputs + layout.outputs}


def canonical_name(name: str, family: str) -> str:
    """The name a stored tensor has in its family's layout (a prefix some checkpoints add or drop)."""
    return registry.family(family).layout.canonical(name)


# Buffers some checkpoints carry that are not weights: rotary tables and GPT-2's causal-mask tensors; and
# the image side of an image-text checkpoint, whose text tower alone is read.
_IGNORED = re.compile(r"(^|\.)rotary_emb\.inv_freq$|^transformer\.h\.\d+\.attn\.(masked_)?bias$"
                      r"|^(model\.)?(vision_tower|multi_modal_projector)\.")
_FLOAT_DTYPES = {"F32", "F16", "BF16", "F64"}
READ_BATCH_BYTES = 64 << 20  # file bytes mapped at a time while copying tensors out


def _weight_files(folder: Path) -> dict[Path, list[str] | None]:
    """Safetensors files of a folder -> the tensor names the index assigns them (None: unindexed)."""
    index = folder / "model.safetensors.index.json"
    if index.exists():
        files = index_shards(index)
        for file in files:
            if not file.is_file():
                raise ModelFormatError(say("file.in", path=str(index),
                                           problem=say("file.shard_missing", file=file.name)))
        return files
    single = folder / "model.safetensors"
    if single.is_file():
        return {single: None}
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
        raise ModelFormatError(say("file.in", path=str(folder), problem=say("file.pickle_only")))
    raise ModelFormatError(say("file.in", path=str(folder), problem=say("file.no_weights")))


def read_checkpoint(folder: Path, config: ModelConfig) -> tuple[dict[str, torch.Tensor], int]:
    """Read and check every tensor. Returns (HF name -> float32 CPU tensor, parameter count)."""
    expected = expected_shapes(config)
    tensors: dict[str, torch.Tensor] = {}
    for file, indexed_names in _weight_files(folder).items():
        try:
            wanted = _checked_names(file, indexed_names, config, expected, tensors)
            tensors.update(_copied_out(file, wanted))
        except SafetensorError as e:
            raise ModelFormatError(say("file.in", path=str(file),
                                       problem=say("file.safetensors_invalid", why=str(e)))) from None
        except OSError as e:
            raise ModelFormatError(say("file.in", path=str(file),
                                       problem=say("file.unreadable", why=e.strerror or str(e)))) from None
    missing = [name for name in expected if name not in tensors]
    if missing:
        problem = say("file.missing_tensors", name=missing[0], more=len(missing) - 1) if len(missing) > 1 else \
            say("file.missing_tensor", name=missing[0])
        raise ModelFormatError(say("file.in", path=str(folder), problem=problem))
    n_params = sum(t.numel() for name, t in tensors.items() if name in expected)
    return tensors, n_params


def _checked_names(file: Path, indexed_names: list[str] | None, config: ModelConfig,
                   expected: dict[str, tuple[int, ...]], already: dict[str, torch.Tensor]) -> list[tuple[str, str]]:
    """(name in the file, canonical name) of each tensor to read from `file`, every one checked first."""
    optional = {"lm_head.weight"} if config.tie_embeddings else set()  # often saved although tied
    wanted: list[tuple[str, str]] = []
    safetensors_tensors(file)  # header length, offsets inside the file, dtype x shape = bytes: checked first
    with safe_open(str(file), framework="pt") as f:
        names = list(f.keys())
        absent = sorted(set(indexed_names or ()) - set(names))
        if absent:
            raise ModelFormatError(say("file.in", path=file.name, problem=say("file.index_absent", name=absent[0])))
        for stored in names:
            name = canonical_name(stored, config.family)
            if _IGNORED.search(name):
                continue
            if name not in expected and name not in optional:
                raise ModelFormatError(say("file.in", path=file.name, problem=say(
                    "file.tensor_unexpected", name=stored, architecture=config.architecture)))
            tensor_slice = f.get_slice(stored)
            shape = tuple(tensor_slice.get_shape())
            want = expected.get(name, (config.vocab, config.hidden))
            if shape != want:
                raise ModelFormatError(say("file.in", path=file.name, problem=say(
                    "file.tensor_shape", name=stored, shape=list(shape), want=list(want))))
            if tensor_slice.get_dtype() not in _FLOAT_DTYPES:
                raise ModelFormatError(say("file.in", path=file.name, problem=say(
                    "file.tensor_dtype", name=stored, dtype=tensor_slice.get_dtype())))
            if name in already or any(name == seen for _, seen in wanted):
                raise ModelFormatError(say("file.in", path=file.name, problem=say("file.tensor_twice", name=stored)))
            wanted.append((stored, name))
    return wanted


def _finite(t: torch.Tensor) -> bool:
    """Every value finite: aminmax is one vectorised pass that NaN and +-inf all show in (measured 9 ms on
    the 28 M-value embedding table, where isfinite().all() took 300 ms)."""
    if t.numel() == 0:
        return True
    low, high = torch.aminmax(t)
    return math.isfinite(low.item()) and math.isfinite(high.item())


def _copied_out(file: Path, wanted: list[tuple[str, str]]):
    """(canonical name, float32 tensor of our own) for each (stored, canonical) name, in order.

    safetensors maps the file and get_tensor views it at the offset the file gives, which need not be
    64-byte aligned (40 bytes off for the default model): kernel loads then straddle cache lines
    (measured: the tied head streamed at 14.8 GB/s, an aligned copy at 25.2), and a file replaced under
    a running app could pull pages from under the weights. So each tensor is copied, and the file is
    mapped again every READ_BATCH_BYTES: the pages a mapping touched count towards this process's memory
    until it closes (one mapping for the whole default model raised the peak by 517 MB).
    """
    at = 0
    while at < len(wanted):
        with safe_open(str(file), framework="pt") as f:
            mapped = 0
            while at < len(wanted) and mapped < READ_BATCH_BYTES:
                stored, name = wanted[at]
                view = f.get_tensor(stored)
                mapped += view.numel() * view.element_size()
                copy = torch.empty(view.shape, dtype=torch.float32)
                copy_releasing(copy, view, release=True)  # the file's pages, read back from it if touched again
                del view
                if not _finite(copy):
                    bad = int((~torch.isfinite(copy)).sum())
                    raise ModelFormatError(say("file.in", path=file.name,
                                               problem=say("file.tensor_not_finite", name=stored, count=bad)))
                yield name, copy
                at += 1
