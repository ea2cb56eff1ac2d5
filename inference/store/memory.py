"""Will a model fit in memory? The bytes its weights will take, the peak while loading, next to free RAM.

Loading reads every weight as float32 first, then builds the chosen data type from it, so the peak is
about 4 bytes per parameter whatever the dtype. Measured here on the default model (134.5 M parameters,
peak RSS above the process's start): float32 684 MB (weights 538 MB), bfloat16 655 MB (weights 269 MB),
int8 851 MB (weights 252 MB); so the peak is taken as 1.3 x the float32 bytes, plus the int8 weights
(built while the float32 copy is still held). A GGUF that is not converted yet is first dequantised
whole and written (about 8 bytes per parameter: "peak ≈ 1 GiB" for the default model). The KV cache is
counted at a modest window (KV_WINDOW tokens). Free memory is the host's (inference/host.py); where it cannot
be read, nothing is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.host import NotEnoughMemory, mem_available
from inference.messages import Message, say
from inference.store.catalog import describe

KV_WINDOW = 4096  # tokens of KV cache the estimate makes room for
LOAD_PEAK_PER_FLOAT32 = 1.3  # the loading peak over the float32 weights (measured, above)
CONVERT_BYTES_PER_PARAM = 8  # a GGUF's first load: dequantised float32 arrays and the file being written
INT8_BYTES_PER_PARAM = 1 + 2 / 64  # an int8 weight and its share of a bfloat16 scale per 64
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}



def resolve_dtype(dtype: str, on_cuda: bool) -> str:
    """`auto` as loading.resolve_dtype reads it: float32 on CPU, bfloat16 on CUDA."""
    return ("bfloat16" if on_cuda else "float32") if dtype == "auto" else dtype


def weights_bytes(n_params: int, dtype: str, embed_params: int | None = None) -> int:
    """What the weights take once built. int8 keeps the embedding table in float32 besides the int8 head."""
    if dtype == "int8":
        embed = embed_params or 0
        return int(INT8_BYTES_PER_PARAM * n_params + 4 * embed)
    return DTYPE_BYTES.get(dtype, 4) * n_params


@dataclass(frozen=True)
class Estimate:
    name: str
    dtype: str
    weights_bytes: int
    load_peak_bytes: int  # every weight read as float32 first (and a GGUF converted, the first time)
    kv_bytes: int
    kv_tokens: int
    available_bytes: int | None
    converts: bool  # a GGUF converted on this load

    @property
    def needed_bytes(self) -> int:
        return max(self.load_peak_bytes, self.weights_bytes + self.kv_bytes)

    @property
    def fits(self) -> bool:
        return self.available_bytes is None or self.needed_bytes <= self.available_bytes

    def summary(self) -> Message:
        """'weights 538 MB at float32, about 700 MB needed while loading; KV cache 189 MB for 4,096 tokens; free
        RAM 20.3 GB' (str() of it; the picker words it in the app's language)."""
        free = (say("memory.free_unknown") if self.available_bytes is None
                else say("memory.free", available=self.available_bytes))
        return say("memory.summary", weights=self.weights_bytes, dtype=self.dtype, needed=self.needed_bytes,
                   converting=say("memory.converting") if self.converts else "", kv=self._kv(), free=free)

    def _kv(self) -> Message:
        if not self.kv_tokens:
            return say("memory.kv_unknown")
        return say("memory.kv_cache", kv=self.kv_bytes, tokens=self.kv_tokens)

    def refusal(self) -> Message:
        return say("memory.refusal", model=self.name, dtype=self.dtype, needed=self.needed_bytes,
                   weights=self.weights_bytes, converting=say("memory.after_converting") if self.converts else "",
                   kv=self._kv(), available=self.available_bytes or 0)


def estimate(entry, dtype: str, available: int | None = None) -> Estimate | None:
    """The memory a catalog Entry needs at `dtype` (already resolved); None when its size is not known."""
    if not entry.n_params:
        return None
    n = entry.n_params
    weights = weights_bytes(n, dtype, entry.embed_params)
    peak = int(LOAD_PEAK_PER_FLOAT32 * 4 * n) + (weights if dtype == "int8" else 0)
    converts = entry.spec.lower().endswith(".gguf") and not entry.converted
    if converts:
        peak = max(peak, CONVERT_BYTES_PER_PARAM * n)
    tokens = min(entry.context_length or KV_WINDOW, KV_WINDOW) if entry.kv_bytes_per_token else 0
    kv = (entry.kv_bytes_per_token or 0) * tokens * DTYPE_BYTES.get(dtype, 4) // 4
    return Estimate(entry.name, dtype, weights, peak, kv, tokens, available, converts)


def ensure_fits(spec: str, dtype: str) -> Estimate | None:
    """Refuse (NotEnoughMemory, one line) a CPU load that would need more than MemAvailable."""
    result = estimate(describe(str(spec)), dtype, mem_available())
    if result is not None and not result.fits:
        raise NotEnoughMemory(result.refusal())
    return result
