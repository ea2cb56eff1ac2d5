"""The machine this process runs on, as loading and the decoder need it: free memory (MemAvailable from
/proc/meminfo; psutil is not a dependency), and the one-line refusal of a KV cache that would not fit.
Where free memory cannot be read, nothing is refused."""

from __future__ import annotations

from inference.messages import say

MEMINFO = "/proc/meminfo"


class NotEnoughMemory(ValueError):
    """Loading would run out of memory: refused before it starts."""


def mem_available(path: str = MEMINFO) -> int | None:
    """Bytes the kernel can give without swapping (MemAvailable), None where it is not known."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def ensure_kv_fits(bytes_per_token: int, positions: int, available: int | None = None) -> None:
    """Refuse (NotEnoughMemory, one line) a KV cache of `positions` that would take more than MemAvailable:
    a prompt plus max-new-tokens of 10^7 on a long-context model is refused, not allocated."""
    available = mem_available() if available is None else available
    needed = bytes_per_token * positions
    if available is not None and needed > available:
        raise NotEnoughMemory(say("memory.kv", positions=positions, needed=needed, available=available))
