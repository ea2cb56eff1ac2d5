"""Every model family TokenStep runs, one row each: the architectures it answers to (Hugging Face classes,
the model_type naming each, llama.cpp's GGUF architectures) and the parts that run it (its config reader,
its tensor layout, its layer's traits).

config.py reads a config.json through the row of its architecture, checkpoint.py checks and hands out its
tensors by the row's layout, weights.py and decoder.py build and run its layer by the row's traits, GGUF
import and the model picker ask the same rows. A new family is one file under families/ plus one row here.
Torch-free: the GUI's model picker reads configs through it.
"""

from __future__ import annotations

from inference.model.families import gemma, gpt2, llama, phi3
from inference.model.families.parts import Family, GgufArch

FAMILIES = (
    Family("llama", llama.ARCHITECTURES, llama.read_config, llama.LAYOUT, llama.BLOCK, llama.GGUF),
    Family("gpt2", gpt2.ARCHITECTURES, gpt2.read_config, gpt2.LAYOUT, gpt2.BLOCK),
    Family("qwen3", llama.QWEN3_ARCHITECTURES, llama.read_qwen3_config, llama.QWEN3_LAYOUT, llama.BLOCK,
           llama.QWEN3_GGUF),
    Family("phi3", phi3.ARCHITECTURES, phi3.read_config, phi3.LAYOUT, phi3.BLOCK, phi3.GGUF),
    Family("gemma", gemma.ARCHITECTURES, gemma.read_config, gemma.LAYOUT, gemma.BLOCK, gemma.GGUF),
)

_BY_NAME = {f.name: f for f in FAMILIES}
_BY_ARCHITECTURE = {arch: f for f in FAMILIES for arch in f.architectures}
_BY_MODEL_TYPE = {model_type: arch for f in FAMILIES for arch, model_type in f.architectures.items()}
_BY_GGUF = {name: (f, gguf) for f in FAMILIES for name, gguf in f.gguf.items()}


def family(name: str) -> Family:
    """The row of a ModelConfig.family."""
    return _BY_NAME[name]


def architectures() -> list[str]:
    """Every Hugging Face class some family answers to, in the registry's order."""
    return list(_BY_ARCHITECTURE)


def by_architecture(arch: str | None) -> Family | None:
    return _BY_ARCHITECTURE.get(arch)


def architecture_of_model_type(model_type) -> str | None:
    """The class a config without `architectures` means by its `model_type` (None: none known)."""
    return _BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None


def gguf_architectures() -> list[str]:
    """Every llama.cpp architecture GGUF import converts."""
    return list(_BY_GGUF)


def by_gguf(arch) -> tuple[Family, GgufArch] | None:
    """(the family, how it imports) of a GGUF `general.architecture`; None where none imports it."""
    return _BY_GGUF.get(arch) if isinstance(arch, str) else None
