"""What a model file says about itself, read from its header only: never a weight.

- safetensors: an 8-byte length, then a JSON header naming every tensor's dtype and shape;
- GGUF: metadata key/values, then every tensor's name, shape and type. `gguf.GGUFReader` parses the whole
  vocabulary into numpy arrays (2.2 s for SmolLM2's 49k tokens on these machines), too slow to list a
  folder of models, so the header is walked here with struct over a read-only mapping: arrays are skipped,
  not decoded.
Both are checked against the file before anything trusts them: a safetensors tensor's data_offsets must
lie in the file and hold exactly its shape times its dtype's size; a GGUF count may not exceed what the
rest of the file could hold, a bool is 0 or 1, and `check_gguf_tensors` (run before gguf.GGUFReader, which
allocates from these numbers) wants a known type, whole blocks, aligned non-overlapping offsets and every
tensor's bytes inside the file. Every problem is a ModelFormatError line naming the file.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from inference.errors import ModelFormatError
from inference.messages import say, shown

MAX_SAFETENSORS_HEADER = 100 << 20  # the format's own limit
SAFETENSORS_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
                           "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
_MAX_COUNT = 10_000_000  # more keys, tensors or array items than this: a corrupt header

# GGUF value types -> struct format of one scalar (8 = string, 9 = array).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
            12: "<d"}
_BOOL, _STRING, _ARRAY = 7, 8, 9
_MAX_DIM = 1 << 40  # one tensor dimension beyond this: a corrupt header


MAX_JSON_BYTES = 64 << 20  # a model's config, generation config or shard index: kilobytes to a few megabytes


def open_regular(path: Path):
    """`path` opened for binary reading, refused unless it is a regular file: a FIFO or a device named like a model
    file would block the open or the read forever (opened without blocking, then checked on the open file)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ModelFormatError(say("file.in", path=str(path), problem=say("file.not_regular")))
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def read_json_file(path: Path, limit: int = MAX_JSON_BYTES):
    """A small JSON file's value: a regular file of at most `limit` bytes (ModelFormatError otherwise; OSError,
    ValueError and RecursionError for the caller to word)."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ModelFormatError(say("file.in", path=str(path), problem=say("file.json_too_big", mb=limit >> 20)))
    return json.loads(data.decode("utf-8"))


def safetensors_tensors(path: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    """Tensor name -> (shape, dtype as safetensors names it: "BF16", "U32"...), from the file's JSON header."""
    try:
        with open_regular(path) as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelFormatError(say("file.in", path=path.name, problem=say("file.safetensors_short")))
            (length,) = struct.unpack("<Q", head)
            if length > MAX_SAFETENSORS_HEADER:
                raise ModelFormatError(say("file.in", path=path.name,
                                           problem=say("file.safetensors_header_size", length=length)))
            header = json.loads(f.read(length).decode("utf-8"))
            room = f.seek(0, 2) - 8 - length  # bytes of tensor data after the header
    except OSError as e:
        raise ModelFormatError(say("file.in", path=path.name,
                                   problem=say("file.unreadable", why=e.strerror or str(e)))) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ModelFormatError(say("file.in", path=path.name, problem=say("file.safetensors_header"))) from None
    if not isinstance(header, dict):
        raise ModelFormatError(say("file.in", path=path.name, problem=say("file.safetensors_header")))
    shapes = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ModelFormatError(say("file.in", path=path.name, problem=say("file.tensor_no_shape", name=name)))
        shapes[name] = (tuple(shape), str(info.get("dtype")))
        _check_extent(path.name, name, shapes[name], info.get("data_offsets"), room)
    return shapes


def index_shards(index: Path) -> dict[Path, list[str]]:
    """A safetensors index's shard files (inside its folder) -> the tensor names it assigns each. A shard named
    outside the folder (an absolute path, or one through '..') is refused by its name alone: the index says which
    files are read. Links inside the folder stay allowed (a Hugging Face cache snapshot links to ../../blobs)."""
    try:
        weight_map = read_json_file(index)["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError
    except ModelFormatError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        raise ModelFormatError(say("file.in", path=str(index), problem=say("file.index_invalid"))) from None
    files: dict[Path, list[str]] = {}
    for name, file in weight_map.items():
        shard = Path(str(file))
        if shard.is_absolute() or ".." in shard.parts or not shard.parts:
            raise ModelFormatError(say("file.in", path=str(index),
                                       problem=say("file.shard_outside", shard=repr(str(file)[:200]))))
        files.setdefault(index.parent / shard, []).append(name)
    return files


def _check_extent(file: str, name: str, shape_dtype: tuple[tuple[int, ...], str], offsets, room: int) -> None:
    """A tensor's data_offsets lie inside the file, and hold exactly its shape times its dtype's size."""
    shape, dtype = shape_dtype
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
            and 0 <= offsets[0] <= offsets[1] <= room):
        raise ModelFormatError(say("file.in", path=file, problem=say("file.tensor_offsets", name=name,
                                                                        offsets=shown(offsets), room=room)))
    size = SAFETENSORS_DTYPE_BYTES.get(dtype)
    if size is not None and offsets[1] - offsets[0] != math.prod(shape) * size:
        raise ModelFormatError(say("file.in", path=file, problem=say(
            "file.tensor_size", name=name, shape=shown(list(shape)), dtype=dtype[:40], needed=math.prod(shape) * size,
            given=offsets[1] - offsets[0])))


def count_params(shapes) -> int:
    return sum(math.prod(shape) for shape in shapes)


@dataclass
class GgufHeader:
    """A GGUF file's scalar metadata (arrays only by their length) and its tensors' shapes."""

    metadata: dict[str, object] = field(default_factory=dict)
    array_lengths: dict[str, int] = field(default_factory=dict)
    tensor_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    tensor_data: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (ggml type, offset)
    data_start: int = 0  # where the tensor data section begins (aligned end of the header)
    alignment: int = 32  # general.alignment: every tensor offset is a multiple of it
    file_size: int = 0

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
        self.where = ""  # ", in KEY" while a metadata value is read

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ModelFormatError(say("file.in", path=self.name, problem=say("file.gguf_truncated")))
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def count(self) -> int:
        n = self.take("<Q")
        if n > _MAX_COUNT:
            raise ModelFormatError(say("file.in", path=self.name,
                                       problem=say("file.gguf_count", n=n, where=self.where)))
        return n

    def string(self, keep: bool = True) -> str | None:
        n = self.take("<Q")
        if self.at + n > len(self.data):
            raise ModelFormatError(say("file.in", path=self.name, problem=say("file.gguf_truncated")))
        start, self.at = self.at, self.at + n
        return self.data[start:self.at].decode("utf-8", "replace") if keep else None

    def value(self, kind: int, nested: bool = False):
        """A scalar or string; an array is skipped and its length returned as ("array", n)."""
        if kind in _SCALARS:
            value = self.take(_SCALARS[kind])
            if kind == _BOOL and self.data[self.at - 1] > 1:  # struct reads any non-zero byte as True
                raise ModelFormatError(say("file.in", path=self.name, problem=say(
                    "file.gguf_bool", byte=self.data[self.at - 1], where=self.where)))
            return value
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY or nested:  # arrays of arrays: no model key has them
            raise ModelFormatError(say("file.in", path=self.name,
                                       problem=say("file.gguf_value_type", kind=kind, where=self.where)))
        item, n = self.take("<I"), self.count()
        smallest = struct.calcsize(_SCALARS[item]) if item in _SCALARS else 8  # a string: its length at least
        if n * smallest > len(self.data) - self.at:
            raise ModelFormatError(say("file.in", path=self.name,
                                       problem=say("file.gguf_array", n=n, where=self.where)))
        if item in _SCALARS:
            self.at += n * smallest
        else:
            for _ in range(n):
                if item == _STRING:
                    self.string(keep=False)
                else:
                    self.value(item, nested=True)
        return ("array", n)


def read_gguf_header(path: Path) -> GgufHeader:
    """Metadata and tensor shapes of a GGUF file (little-endian, versions 2 and 3)."""
    try:
        with open_regular(path) as f:
            if f.read(4) != b"GGUF":
                raise ModelFormatError(say("file.in", path=path.name, problem=say("file.gguf_magic")))
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                header = _parse(_Cursor(data, path.name))
                header.file_size = len(data)
                return header
    except ModelFormatError:
        raise
    except OSError as e:
        raise ModelFormatError(say("file.in", path=path.name,
                                   problem=say("file.unreadable", why=e.strerror or str(e)))) from None
    except ValueError as e:  # mmap of an empty file, a bad seek
        raise ModelFormatError(say("file.in", path=path.name, problem=say("file.gguf_invalid", why=str(e)))) from None


def _parse(cursor: _Cursor) -> GgufHeader:
    cursor.at = 4
    version = cursor.take("<I")
    if version not in (2, 3):
        raise ModelFormatError(say("file.in", path=cursor.name, problem=say("file.gguf_version", version=version)))
    n_tensors, n_keys = cursor.count(), cursor.count()
    header = GgufHeader()
    for _ in range(n_keys):
        key = cursor.string()
        cursor.where = say("file.gguf_in_key", key=key[:80])
        value = cursor.value(cursor.take("<I"))
        cursor.where = ""
        if isinstance(value, tuple):
            header.array_lengths[key] = value[1]
        else:
            header.metadata[key] = value
    for _ in range(n_tensors):
        name = cursor.string()
        n_dims = cursor.take("<I")
        if n_dims > 8:
            raise ModelFormatError(say("file.in", path=cursor.name,
                                       problem=say("file.tensor_dims", name=name, n=n_dims)))
        shape = tuple(cursor.take("<Q") for _ in range(n_dims))
        if name in header.tensor_shapes:
            raise ModelFormatError(say("file.in", path=cursor.name, problem=say("file.tensor_twice", name=name)))
        if not all(0 < n <= _MAX_DIM for n in shape):
            raise ModelFormatError(say("file.in", path=cursor.name,
                                       problem=say("file.tensor_dimensions", name=name, shape=list(shape))))
        kind, offset = cursor.take("<I"), cursor.take("<Q")  # its quantisation type, offset in the data
        header.tensor_shapes[name] = tuple(reversed(shape))  # GGUF lists the fastest dimension first
        header.tensor_data[name] = (kind, offset)
    alignment = header.metadata.get("general.alignment", 32)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise ModelFormatError(say("file.in", path=cursor.name,
                                   problem=say("file.gguf_alignment", alignment=shown(alignment))))
    header.data_start = -(-cursor.at // alignment) * alignment
    header.alignment = alignment
    return header


def check_gguf_tensors(header: GgufHeader, name: str) -> None:
    """Every tensor's type is one ggml knows, its rows hold whole blocks, and its bytes lie in the file."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # lazy: 0.1 s, for a GGUF only

    room = header.file_size - header.data_start
    if room < 0:
        raise ModelFormatError(say("file.in", path=name, problem=say("file.gguf_truncated")))
    end, previous = 0, None  # tensors lie one after another: none may overlap the one before
    for tensor, (kind, offset) in sorted(header.tensor_data.items(), key=lambda item: item[1][1]):
        if offset % header.alignment or offset < end:
            problem = (say("file.tensor_unaligned", name=tensor, offset=offset, alignment=header.alignment)
                       if offset % header.alignment else
                       say("file.tensor_overlaps", name=tensor, offset=offset, previous=previous))
            raise ModelFormatError(say("file.in", path=name, problem=problem))
        try:
            block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        except (ValueError, KeyError):
            raise ModelFormatError(say("file.in", path=name,
                                       problem=say("file.tensor_type", name=tensor, kind=kind))) from None
        shape = header.tensor_shapes[tensor]
        if shape and shape[-1] % block:
            raise ModelFormatError(say("file.in", path=name, problem=say(
                "file.tensor_blocks", name=tensor, row=shape[-1], block=block, type=GGMLQuantizationType(kind).name)))
        size = math.prod(shape) // block * block_bytes
        if offset + size > room:
            raise ModelFormatError(say("file.in", path=name,
                                       problem=say("file.tensor_beyond", name=tensor, size=size, offset=offset)))
        end, previous = offset + size, tensor
