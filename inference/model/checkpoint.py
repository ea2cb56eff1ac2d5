"""Checkpoint tensors: the one name and shape map of each family, and strict safetensors reading.

`LAYOUTS[family]` lists every tensor a config implies, in checkpoint order, as a TensorSpec: the role the
weight builder calls it by, its Hugging Face name, its shape from the config, and llama.cpp's GGUF name
where GGUF import reads it. The same table
- tells `read_checkpoint` what must be in the files: anything missing, unexpected or misshaped is one
  ModelFormatError line naming the file (a few known non-weight buffers aside);
- checks every weight is finite as it is copied out (NaN or inf named with its tensor);
- hands weights.py the checked tensors by role (`take_layer`, `take_ends`);
- names each GGUF tensor for gguf_import.py (`spec_for_gguf`).
Only safetensors are read: pickle-based `.bin` files can run code when loaded, so they are refused.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from inference.model.config import ModelConfig
from inference.errors import ModelFormatError
from inference.formats.headers import index_shards, safetensors_tensors

Shape = Callable[[ModelConfig], tuple[int, ...]]


def _always(config: ModelConfig) -> bool:
    return True


@dataclass(frozen=True)
class TensorSpec:
    role: str  # what weights.py calls it
    hf: str  # the Hugging Face name; "{i}" stands for the layer index
    shape: Shape
    gguf: str | None = None  # llama.cpp's name (with the same "{i}"), where GGUF import reads it
    present: Callable[[ModelConfig], bool] = _always


@dataclass(frozen=True)
class Layout:
    inputs: tuple[TensorSpec, ...]  # before the layers: embeddings
    layer: tuple[TensorSpec, ...]  # each layer's, "{i}" in the names
    outputs: tuple[TensorSpec, ...]  # after them: final norm, head


def _vector(c: ModelConfig) -> tuple[int, ...]:
    return (c.hidden,)


def _table(c: ModelConfig) -> tuple[int, ...]:
    return (c.vocab, c.hidden)


def _untied(c: ModelConfig) -> bool:
    return not c.tie_embeddings


def _projection(role: str, hf: str, out: Callable, inp: Callable, has_bias: Callable,
                gguf: str | None = None, gguf_bias: bool = False) -> tuple[TensorSpec, TensorSpec]:
    """An (out, in) weight and its (out,) bias where the config has one."""
    return (TensorSpec(role, hf + ".weight", lambda c: (out(c), inp(c)), f"{gguf}.weight" if gguf else None),
            TensorSpec(role + "_bias", hf + ".bias", lambda c: (out(c),),
                       f"{gguf}.bias" if gguf and gguf_bias else None, has_bias))


def _llama_layout(qk_norm: bool = False) -> Layout:
    """Llama, Mistral, Qwen2; with `qk_norm` Qwen3 (an RMSNorm weight over each Q and K head)."""
    layer, attn, mlp = "model.layers.{i}.", "model.layers.{i}.self_attn.", "model.layers.{i}.mlp."
    hidden, ffn = (lambda c: c.hidden), (lambda c: c.ffn)
    q_dim, kv_dim = (lambda c: c.q_dim), (lambda c: c.kv_dim)
    qkv_bias, o_bias, mlp_bias = (lambda c: c.qkv_bias), (lambda c: c.o_bias), (lambda c: c.mlp_bias)
    head = lambda c: (c.head_dim,)  # noqa: E731
    norms = (TensorSpec("q_norm", attn + "q_norm.weight", head, "blk.{i}.attn_q_norm.weight"),
             TensorSpec("k_norm", attn + "k_norm.weight", head, "blk.{i}.attn_k_norm.weight")) if qk_norm else ()
    return Layout(
        inputs=(TensorSpec("embed", "model.embed_tokens.weight", _table, "token_embd.weight"),),
        layer=(TensorSpec("attn_norm", layer + "input_layernorm.weight", _vector, "blk.{i}.attn_norm.weight"),
               TensorSpec("mlp_norm", layer + "post_attention_layernorm.weight", _vector, "blk.{i}.ffn_norm.weight"),
               *_projection("q", attn + "q_proj", q_dim, hidden, qkv_bias, "blk.{i}.attn_q", gguf_bias=True),
               *_projection("k", attn + "k_proj", kv_dim, hidden, qkv_bias, "blk.{i}.attn_k", gguf_bias=True),
               *_projection("v", attn + "v_proj", kv_dim, hidden, qkv_bias, "blk.{i}.attn_v", gguf_bias=True),
               *norms,
               *_projection("o", attn + "o_proj", hidden, q_dim, o_bias, "blk.{i}.attn_output"),
               *_projection("gate", mlp + "gate_proj", ffn, hidden, mlp_bias, "blk.{i}.ffn_gate"),
               *_projection("up", mlp + "up_proj", ffn, hidden, mlp_bias, "blk.{i}.ffn_up"),
               *_projection("down", mlp + "down_proj", hidden, ffn, mlp_bias, "blk.{i}.ffn_down")),
        outputs=(TensorSpec("final_norm", "model.norm.weight", _vector, "output_norm.weight"),
                 TensorSpec("head", "lm_head.weight", _table, "output.weight", _untied)))


def _phi3_layout() -> Layout:
    """Phi-3/4-mini: Q, K, V rows in one `qkv_proj`, gate then up rows in one `gate_up_proj` (llama.cpp
    keeps both fused too: `attn_qkv`, and `ffn_up` of 2 ffn rows), no biases."""
    llama = _llama_layout()
    layer, attn, mlp = "model.layers.{i}.", "model.layers.{i}.self_attn.", "model.layers.{i}.mlp."
    hidden = lambda c: c.hidden  # noqa: E731
    never = lambda c: False  # noqa: E731
    return Layout(
        inputs=llama.inputs,
        layer=(TensorSpec("attn_norm", layer + "input_layernorm.weight", _vector, "blk.{i}.attn_norm.weight"),
               TensorSpec("mlp_norm", layer + "post_attention_layernorm.weight", _vector, "blk.{i}.ffn_norm.weight"),
               *_projection("qkv", attn + "qkv_proj", lambda c: c.q_dim + 2 * c.kv_dim, hidden, never,
                            "blk.{i}.attn_qkv"),
               *_projection("o", attn + "o_proj", hidden, lambda c: c.q_dim, never, "blk.{i}.attn_output"),
               *_projection("gate_up", mlp + "gate_up_proj", lambda c: 2 * c.ffn, hidden, never, "blk.{i}.ffn_up"),
               *_projection("down", mlp + "down_proj", hidden, lambda c: c.ffn, never, "blk.{i}.ffn_down")),
        outputs=llama.outputs)


def _gpt2_layout() -> Layout:
    """GPT-2's Conv1D stores weights as (in, out)."""
    layer = "transformer.h.{i}."
    hidden, ffn, three = (lambda c: c.hidden), (lambda c: c.ffn), (lambda c: 3 * c.hidden)

    def conv1d(role: str, name: str, inp: Callable, out: Callable) -> tuple[TensorSpec, TensorSpec]:
        return (TensorSpec(role, layer + name + ".weight", lambda c: (inp(c), out(c))),
                TensorSpec(role + "_bias", layer + name + ".bias", lambda c: (out(c),)))

    def layer_norm(role: str, name: str) -> tuple[TensorSpec, TensorSpec]:
        return TensorSpec(role, name + ".weight", _vector), TensorSpec(role + "_bias", name + ".bias", _vector)

    return Layout(
        inputs=(TensorSpec("embed", "transformer.wte.weight", _table),
                TensorSpec("positions", "transformer.wpe.weight", lambda c: (c.context_length, c.hidden))),
        layer=(*layer_norm("attn_norm", layer + "ln_1"), *conv1d("qkv", "attn.c_attn", hidden, three),
               *conv1d("o", "attn.c_proj", hidden, hidden), *layer_norm("mlp_norm", layer + "ln_2"),
               *conv1d("mlp_in", "mlp.c_fc", hidden, ffn), *conv1d("mlp_out", "mlp.c_proj", ffn, hidden)),
        outputs=(*layer_norm("final_norm", "transformer.ln_f"),
                 TensorSpec("head", "lm_head.weight", _table, present=_untied)))


def _gemma_layout() -> Layout:
    """Gemma 2 and 3: Llama's projections; a norm before and after attention and the MLP, (1 + w) each;
    Gemma 3 adds a per-head RMSNorm of Q and K. Always tied (a saved head is the embedding table)."""
    llama = _llama_layout()
    layer, attn = "model.layers.{i}.", "model.layers.{i}.self_attn."
    head_dim = (lambda c: (c.head_dim,))
    qk_norm = (lambda c: c.qk_norm)
    return Layout(
        inputs=llama.inputs,
        layer=(TensorSpec("attn_norm", layer + "input_layernorm.weight", _vector, "blk.{i}.attn_norm.weight"),
               TensorSpec("post_attn_norm", layer + "post_attention_layernorm.weight", _vector,
                          "blk.{i}.post_attention_norm.weight"),
               TensorSpec("mlp_norm", layer + "pre_feedforward_layernorm.weight", _vector, "blk.{i}.ffn_norm.weight"),
               TensorSpec("post_mlp_norm", layer + "post_feedforward_layernorm.weight", _vector,
                          "blk.{i}.post_ffw_norm.weight"),
               TensorSpec("q_norm", attn + "q_norm.weight", head_dim, "blk.{i}.attn_q_norm.weight", qk_norm),
               TensorSpec("k_norm", attn + "k_norm.weight", head_dim, "blk.{i}.attn_k_norm.weight", qk_norm),
               *(spec for spec in llama.layer if spec.role not in ("attn_norm", "mlp_norm"))),
        outputs=llama.outputs)


LAYOUTS = {"llama": _llama_layout(), "gpt2": _gpt2_layout(), "qwen3": _llama_layout(qk_norm=True),
           "phi3": _phi3_layout(), "gemma": _gemma_layout()}  # config.family -> its tensors


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """HF tensor name -> shape, for every tensor the config implies, in checkpoint order."""
    layout = LAYOUTS[config.family]
    specs = [(spec, {}) for spec in layout.inputs]
    specs += [(spec, {"i": i}) for i in range(config.n_layers) for spec in layout.layer]
    specs += [(spec, {}) for spec in layout.outputs]
    return {spec.hf.format(**where): spec.shape(config) for spec, where in specs if spec.present(config)}


def take_layer(tensors: dict[str, torch.Tensor], config: ModelConfig, i: int) -> dict[str, torch.Tensor | None]:
    """Layer i's tensors by role (None where the config has none), removed from `tensors`."""
    return {spec.role: tensors.pop(spec.hf.format(i=i), None) for spec in LAYOUTS[config.family].layer}


def take_ends(tensors: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor | None]:
    """The tensors before and after the layers by role, removed from `tensors` (a tied model's saved
    head included: some checkpoints carry it although it is the embedding table)."""
    layout = LAYOUTS[config.family]
    return {spec.role: tensors.pop(spec.hf, None) for spec in layout.inputs + layout.outputs}


@functools.lru_cache(maxsize=None)
def _gguf_patterns(family: str) -> tuple[tuple[re.Pattern, TensorSpec], ...]:
    layout = LAYOUTS[family]
    return tuple((re.compile(re.escape(spec.gguf).replace(re.escape("{i}"), r"(?P<i>\d+)")), spec)
                 for spec in layout.inputs + layout.layer + layout.outputs if spec.gguf)


def spec_for_gguf(family: str, gguf_name: str) -> tuple[TensorSpec, str] | None:
    """(its spec, its HF name) for a llama.cpp tensor name; None for a name GGUF import does not read."""
    for pattern, spec in _gguf_patterns(family):
        match = pattern.fullmatch(gguf_name)
        if match:
            return spec, spec.hf.format(**match.groupdict())
    return None


def canonical_name(name: str, family: str) -> str:
    """The name a stored tensor has in LAYOUTS."""
    # GPT-2 checkpoints saved from the bare GPT2Model have no "transformer." prefix.
    if family == "gpt2" and not name.startswith(("transformer.", "lm_head.")):
        return "transformer." + name
    # Gemma 3 image-text checkpoints keep the text tower under `language_model.` (transformers 4 names:
    # language_model.model.layers..., language_model.lm_head; transformers 5: model.language_model.layers...).
    if family == "gemma":
        for prefix, canonical in (("language_model.model.", "model."), ("language_model.lm_head.", "lm_head."),
                                  ("model.language_model.", "model.")):
            if name.startswith(prefix):
                return canonical + name[len(prefix):]
    return name


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
                raise ModelFormatError(f"{index}: shard {file.name} is missing")
        return files
    single = folder / "model.safetensors"
    if single.is_file():
        return {single: None}
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
        raise ModelFormatError(f"{folder}: only pickle weights (.bin/.pt) found; TokenStep reads "
                               "safetensors only, because unpickling a file can run arbitrary code")
    raise ModelFormatError(f"{folder}: no model.safetensors or model.safetensors.index.json")


def read_checkpoint(folder: Path, config: ModelConfig) -> tuple[dict[str, torch.Tensor], int]:
    """Read and check every tensor. Returns (HF name -> float32 CPU tensor, parameter count)."""
    from safetensors import SafetensorError

    expected = expected_shapes(config)
    tensors: dict[str, torch.Tensor] = {}
    for file, indexed_names in _weight_files(folder).items():
        try:
            wanted = _checked_names(file, indexed_names, config, expected, tensors)
            tensors.update(_copied_out(file, wanted))
        except SafetensorError as e:
            raise ModelFormatError(f"{file}: not a valid safetensors file ({e})") from None
        except OSError as e:
            raise ModelFormatError(f"{file}: cannot be read ({e.strerror or e})") from None
    missing = [name for name in expected if name not in tensors]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise ModelFormatError(f"{folder}: missing tensor {missing[0]!r}{more}")
    n_params = sum(t.numel() for name, t in tensors.items() if name in expected)
    return tensors, n_params


def _checked_names(file: Path, indexed_names: list[str] | None, config: ModelConfig,
                   expected: dict[str, tuple[int, ...]], already: dict[str, torch.Tensor]) -> list[tuple[str, str]]:
    """(name in the file, canonical name) of each tensor to read from `file`, every one checked first."""
    from safetensors import safe_open

    optional = {"lm_head.weight"} if config.tie_embeddings else set()  # often saved although tied
    wanted: list[tuple[str, str]] = []
    safetensors_tensors(file)  # header length, offsets inside the file, dtype x shape = bytes: checked first
    with safe_open(str(file), framework="pt") as f:
        names = list(f.keys())
        absent = sorted(set(indexed_names or ()) - set(names))
        if absent:
            raise ModelFormatError(f"{file.name}: the index lists {absent[0]!r} here but the file does not "
                                   "hold it")
        for stored in names:
            name = canonical_name(stored, config.family)
            if _IGNORED.search(name):
                continue
            if name not in expected and name not in optional:
                raise ModelFormatError(f"{file.name}: unexpected tensor {stored!r} for "
                                       f"{config.architecture} with this config.json")
            tensor_slice = f.get_slice(stored)
            shape = tuple(tensor_slice.get_shape())
            want = expected.get(name, (config.vocab, config.hidden))
            if shape != want:
                raise ModelFormatError(f"{file.name}: tensor {stored!r} has shape {list(shape)} but "
                                       f"config.json implies {list(want)}")
            if tensor_slice.get_dtype() not in _FLOAT_DTYPES:
                raise ModelFormatError(f"{file.name}: tensor {stored!r} has dtype "
                                       f"{tensor_slice.get_dtype()}; expected a float type")
            if name in already or any(name == seen for _, seen in wanted):
                raise ModelFormatError(f"{file.name}: tensor {stored!r} appears twice")
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
    from safetensors import safe_open

    at = 0
    while at < len(wanted):
        with safe_open(str(file), framework="pt") as f:
            mapped = 0
            while at < len(wanted) and mapped < READ_BATCH_BYTES:
                stored, name = wanted[at]
                view = f.get_tensor(stored)
                mapped += view.numel() * view.element_size()
                copy = view.to(torch.float32, copy=True)
                del view
                if not _finite(copy):
                    bad = int((~torch.isfinite(copy)).sum())
                    raise ModelFormatError(f"{file.name}: tensor {stored!r} holds {bad:,} NaN or infinite "
                                           "values")
                yield name, copy
                at += 1
