"""The parts a family file describes, torch-free: its tensors (`Layout` of `TensorSpec`s: role, HF name, shape
from the config, llama.cpp's GGUF name), how its layer computes (`BlockTraits`, read by the one generic block
in decoder.py and the one layer builder in weights.py), the GGUF architectures it imports (`GgufArch`), and
the registry's row that ties them to the architectures it answers to (`Family`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from inference.model.families.reading import ConfigReader

Shape = Callable[[Any], tuple[int, ...]]  # ModelConfig -> a tensor's shape


def always(config) -> bool:
    return True


def never(config) -> bool:
    return False


def untied(config) -> bool:
    return not config.tie_embeddings


def vector(config) -> tuple[int, ...]:
    return (config.hidden,)


def table(config) -> tuple[int, ...]:
    return (config.vocab, config.hidden)


def head_vector(config) -> tuple[int, ...]:
    return (config.head_dim,)


def same_name(name: str) -> str:
    return name


@dataclass(frozen=True)
class TensorSpec:
    role: str  # what weights.py calls it
    hf: str  # the Hugging Face name; "{i}" stands for the layer index
    shape: Shape
    gguf: str | None = None  # llama.cpp's name (with the same "{i}"), where GGUF import reads it
    present: Callable[[Any], bool] = always


@dataclass(frozen=True)
class Layout:
    inputs: tuple[TensorSpec, ...]  # before the layers: embeddings
    layer: tuple[TensorSpec, ...]  # each layer's, "{i}" in the names
    outputs: tuple[TensorSpec, ...]  # after them: final norm, head
    canonical: Callable[[str], str] = same_name  # a stored tensor's name -> its name here

    def shapes(self, config) -> dict[str, tuple[int, ...]]:
        """HF tensor name -> shape, for every tensor `config` implies, in checkpoint order."""
        specs = [(spec, {}) for spec in self.inputs]
        specs += [(spec, {"i": i}) for i in range(config.n_layers) for spec in self.layer]
        specs += [(spec, {}) for spec in self.outputs]
        return {spec.hf.format(**where): spec.shape(config) for spec, where in specs if spec.present(config)}

    @cached_property
    def _gguf_patterns(self) -> tuple[tuple[re.Pattern, TensorSpec], ...]:
        return tuple((re.compile(re.escape(spec.gguf).replace(re.escape("{i}"), r"(?P<i>\d+)")), spec)
                     for spec in self.inputs + self.layer + self.outputs if spec.gguf)

    def gguf_spec(self, gguf_name: str) -> tuple[TensorSpec, str] | None:
        """(its spec, its HF name) for a llama.cpp tensor name; None for a name GGUF import does not read."""
        for pattern, spec in self._gguf_patterns:
            match = pattern.fullmatch(gguf_name)
            if match:
                return spec, spec.hf.format(**match.groupdict())
        return None


def projection(role: str, hf: str, out: Callable, inp: Callable, has_bias: Callable,
               gguf: str | None = None, gguf_bias: bool = False) -> tuple[TensorSpec, TensorSpec]:
    """An (out, in) weight and its (out,) bias where the config has one."""
    return (TensorSpec(role, hf + ".weight", lambda c: (out(c), inp(c)), f"{gguf}.weight" if gguf else None),
            TensorSpec(role + "_bias", hf + ".bias", lambda c: (out(c),),
                       f"{gguf}.bias" if gguf and gguf_bias else None, has_bias))


@dataclass(frozen=True)
class BlockTraits:
    """How a family's layer computes, beyond what its config says (norm kind, activation, rotary, windows,
    soft-caps): read by decoder.Block and weights.build_layer, which hold the torch code of every family."""

    gated_mlp: bool = True  # activation(gate) * up, gate and up rows in one matrix; else activation(mlp_in x)
    conv1d: bool = False  # the checkpoint keeps matrices as (in, out) (GPT-2's Conv1D)
    norms_after: bool = False  # a norm after attention and after the MLP too, before each joins the residual
    float32_norms: bool = False  # the norms not folded into a product run in float32 (or wider), scale 1 + w
    scaled_embeddings: bool = False  # the embedding rows times sqrt(hidden), in the table's dtype
    fused_decode: bool = False  # layers.decode_layers computes this layer for one position (own kernels; the
    # config may still rule it out: decoder.Block.fuses_on_kernels)


@dataclass(frozen=True)
class GgufArch:
    """A llama.cpp architecture a family imports from GGUF."""

    hf_class: str  # the Hugging Face class its config.json names
    permuted_rotary: bool = False  # llama.cpp stored Q and K rows permuted for its rotary layout
    # (metadata reader, arch, tied, n_vocab) -> config.json, where llama.cpp's metadata means more than the
    # keys it shares with Llama (None: store/gguf/convert.py reads those)
    config: Callable | None = None
    tokenizer: str = "byte_level"  # how its vocabulary is stored: "byte_level" BPE or "sentencepiece"


@dataclass(frozen=True)
class Family:
    """One row of the registry: what a family answers to and the parts that run it."""

    name: str  # ModelConfig.family
    architectures: dict[str, str]  # HF class -> the model_type naming it (a config without `architectures`)
    read_config: Callable[[str, ConfigReader], dict[str, Any]]  # (HF class, reader) -> ModelConfig fields
    layout: Layout
    block: BlockTraits
    gguf: dict[str, GgufArch] = field(default_factory=dict)  # llama.cpp's `general.architecture` -> how
