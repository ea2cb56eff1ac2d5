"""A GGUF file opened for import: checked from its header first, then read by the `gguf` package.

`gguf.GGUFReader` parses every metadata array into numpy at once and maps each tensor at the offset the
file gives, so a hostile count (an array of 2^40 token types) or offset would allocate or fault inside
it. `open_gguf` therefore walks the header with model_headers' lazy parser first (counts against the
file size, strings inside the file, every tensor's bytes inside the data section), and `_Metadata` reads
each value with its type and bounds checked (families/reading.py's LIMITS for sizes), one ModelFormatError line naming
the file for anything else.
"""

from __future__ import annotations

import math
from pathlib import Path

import gguf

from inference.errors import ModelFormatError
from inference.messages import Message, say, shown
from inference.model.families.reading import LIMITS, MAX_INT
from inference.formats.headers import check_gguf_tensors, read_gguf_header


class _Metadata:
    def __init__(self, reader, path: Path):
        self.reader, self.path = reader, path

    def get(self, key, default=None):
        field = self.reader.fields.get(key)
        if field is None:
            return default
        try:
            return field.contents()
        except Exception as e:
            raise ModelFormatError(say("gguf.metadata_unreadable", path=self.path.name, key=key,
                                       why=str(e)[:200])) from None

    def require(self, key):
        value = self.get(key)
        if value is None:
            raise ModelFormatError(say("gguf.metadata_missing", path=self.path.name, key=key))
        return value

    def fail(self, key, problem: Message) -> ModelFormatError:
        return ModelFormatError(say("gguf.metadata", path=self.path.name, key=key, problem=problem))

    def count(self, key, default=None, minimum: int = 1, maximum: int = MAX_INT) -> int:
        """An integer from `minimum` to `maximum` (a size, an id); missing: `default`, else an error."""
        value = self.require(key) if default is None else self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, say("gguf.an_integer", value=shown(value)))
        if not minimum <= value <= maximum:
            raise self.fail(key, say("gguf.from_to", low=minimum, high=maximum, value=value))
        return value

    def size(self, key, kind: str, default=None) -> int:
        """A model size bounded as config.json's are (reading.LIMITS)."""
        return self.count(key, default, maximum=LIMITS[kind])

    def number(self, key, default: float) -> float:
        """A finite float (range checks: ModelConfig.from_hf on the config built from it)."""
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(key, say("gguf.a_finite_number", value=shown(value)))
        return float(value)

    def flag(self, key, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, say("gguf.a_bool", value=shown(value)))
        return value

    def strings(self, key, required: bool = True) -> list[str] | None:
        """A non-empty list of strings (None where absent and not required)."""
        value = self.require(key) if required else self.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(key, say("gguf.strings"))
        return value

    def numbers(self, key, length: int, default: float | None = None) -> list:
        """A list of `length` finite numbers; absent: `default` repeated (None: required)."""
        value = self.get(key)
        if value is None and default is not None:
            return [default] * length
        if value is None:
            value = self.require(key)
        if not isinstance(value, list) or len(value) != length or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
            raise self.fail(key, say("gguf.numbers", length=length))
        return value


def open_gguf(path: Path):
    if not path.is_file():
        raise ModelFormatError(say("gguf.no_file", path=str(path)))
    header = read_gguf_header(path)  # counts, strings and tensor extents checked before gguf allocates
    check_gguf_tensors(header, path.name)
    try:
        return gguf.GGUFReader(str(path))
    except Exception as e:  # truncated or corrupt files fail deep inside numpy/memmap parsing
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'unreadable'}"
        raise ModelFormatError(say("file.in", path=path.name, problem=say("file.gguf_invalid", why=why))) from None
