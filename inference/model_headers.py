"""What a model file says about itself, read from its header only: never a weight.

- safetensors: an 8-byte length, then a JSON header naming every tensor's dtype and shape;
- GGUF: metadata key/values, then every tensor's name, shape and type. `gguf.GGUFReader` parses the whole
  vocabulary into numpy arrays (2.2 s for SmolLM2's 49k tokens on these machines), too slow to list a
  folder of models, so the header is walked here with struct over a read-only mapping: arrays are skipped,
  not decoded.
Every problem is a ModelFormatError line naming the file.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ModelFormatError

MAX_SAFETENSORS_HEADER = 100 << 20  # the format's own limit
_MAX_COUNT = 10_000_000  # more keys, tensors or array items than this: a corrupt header

# GGUF value types -> struct format of one scalar (8 = string, 9 = array).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
            12: "<d"}
_STRING, _ARRAY = 8, 9


def safetensors_tensors(path: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    """Tensor name -> (shape, dtype as safetensors names it: "BF16", "U32"...), from the file's JSON header."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelFormatError(f"{path.name}: too short to be a safetensors file")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_SAFETENSORS_HEADER:
                raise ModelFormatError(f"{path.name}: not a safetensors file (header of {length} bytes)")
            header = json.loads(f.read(length).decode("utf-8"))
    except OSError as e:
        raise ModelFormatError(f"{path.name}: cannot be read ({e.strerror or e})") from None
    except (UnicodeDecodeError, ValueError):
        raise ModelFormatError(f"{path.name}: not a safetensors file (bad header)") from None
    if not isinstance(header, dict):
        raise ModelFormatError(f"{path.name}: not a safetensors file (bad header)")
    shapes = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ModelFormatError(f"{path.name}: tensor {name!r} has no valid shape")
        shapes[name] = (tuple(shape), str(info.get("dtype")))
    return shapes


def count_params(shapes) -> int:
    return sum(math.prod(shape) for shape in shapes)


@dataclass
class GgufHeader:
    """A GGUF file's scalar metadata (arrays only by their length) and its tensors' shapes."""

    metadata: dict[str, object] = field(default_factory=dict)
    array_lengths: dict[str, int] = field(default_factory=dict)
    tensor_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def arch_int(self, key: str) -> int | None:
        """`{architecture}.{key}` as an int, None when absent or not a number."""
        value = self.metadata.get(f"{self.architecture}.{key}")
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def n_params(self) -> int:
        return count_params(self.tensor_shapes.values())


class _Cursor:
    def __init__(self, data, name: str):
        self.data, self.at, self.name = data, 0, name

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ModelFormatError(f"{self.name}: the GGUF header is truncated")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def count(self) -> int:
        n = self.take("<Q")
        if n > _MAX_COUNT:
            raise ModelFormatError(f"{self.name}: not a valid GGUF file (a count of {n})")
        return n

    def string(self, keep: bool = True) -> str | None:
        n = self.take("<Q")
        if self.at + n > len(self.data):
            raise ModelFormatError(f"{self.name}: the GGUF header is truncated")
        start, self.at = self.at, self.at + n
        return self.data[start:self.at].decode("utf-8", "replace") if keep else None

    def value(self, kind: int):
        """A scalar or string; an array is skipped and its length returned as ("array", n)."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ModelFormatError(f"{self.name}: not a valid GGUF file (value type {kind})")
        item, n = self.take("<I"), self.count()
        if item in _SCALARS:
            self.at += n * struct.calcsize(_SCALARS[item])
        else:
            for _ in range(n):
                if item == _STRING:
                    self.string(keep=False)
                else:
                    self.value(item)
        return ("array", n)


def read_gguf_header(path: Path) -> GgufHeader:
    """Metadata and tensor shapes of a GGUF file (little-endian, versions 2 and 3)."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ModelFormatError(f"{path.name}: not a GGUF file")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _parse(_Cursor(data, path.name))
    except OSError as e:
        raise ModelFormatError(f"{path.name}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:  # mmap of an empty file, a bad seek
        raise ModelFormatError(f"{path.name}: not a valid GGUF file ({e})") from None


def _parse(cursor: _Cursor) -> GgufHeader:
    cursor.at = 4
    version = cursor.take("<I")
    if version not in (2, 3):
        raise ModelFormatError(f"{cursor.name}: GGUF version {version} is not supported")
    n_tensors, n_keys = cursor.count(), cursor.count()
    header = GgufHeader()
    for _ in range(n_keys):
        key = cursor.string()
        value = cursor.value(cursor.take("<I"))
        if isinstance(value, tuple):
            header.array_lengths[key] = value[1]
        else:
            header.metadata[key] = value
    for _ in range(n_tensors):
        name = cursor.string()
        n_dims = cursor.take("<I")
        if n_dims > 8:
            raise ModelFormatError(f"{cursor.name}: tensor {name!r} has {n_dims} dimensions")
        shape = tuple(cursor.take("<Q") for _ in range(n_dims))
        cursor.take("<I")  # its quantisation type
        cursor.take("<Q")  # its offset in the data section
        header.tensor_shapes[name] = tuple(reversed(shape))  # GGUF lists the fastest dimension first
    return header
