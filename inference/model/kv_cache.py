"""The KV cache: every layer's keys and values for the positions already read.

Prefill writes the whole prompt's K/V at once; each decode step writes one more position and reads all
of them back. Storage is preallocated (`[layers, 2, kv_heads, capacity, head_dim]`) so a step never
concatenates; it grows in blocks only when a session outlives its planned length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GROW_BLOCK = 256  # positions added at a time when the planned capacity runs out


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, element_bytes: int) -> int:
    """2 (K and V) x layers x kv_heads x head_dim x bytes per element: what each token adds to the cache."""
    return 2 * n_layers * n_kv_heads * head_dim * element_bytes


@dataclass(frozen=True)
class LayerBytes:
    keys: int
    values: int


class KVCache:
    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, capacity: int,
                 max_capacity: int, dtype: torch.dtype, device: torch.device | str = "cpu"):
        if capacity > max_capacity:
            raise ValueError(f"capacity {capacity} exceeds the context window {max_capacity}")
        self.n_layers, self.n_kv_heads, self.head_dim = n_layers, n_kv_heads, head_dim
        self.max_capacity = max_capacity
        self.dtype, self.device = dtype, torch.device(device)
        self.data = torch.zeros(n_layers, 2, n_kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self._layers = self.data.unbind(0)  # per-layer views, so a decode step slices less
        self.length = 0  # positions holding valid K/V

    @property
    def capacity(self) -> int:
        return self.data.shape[3]

    @property
    def element_bytes(self) -> int:
        return self.data.element_size()

    @property
    def bytes_per_token(self) -> int:
        return kv_bytes_per_token(self.n_layers, self.n_kv_heads, self.head_dim, self.element_bytes)

    @property
    def used_bytes(self) -> int:
        return self.length * self.bytes_per_token

    @property
    def allocated_bytes(self) -> int:
        return self.capacity * self.bytes_per_token

    def layer_bytes(self) -> list[LayerBytes]:
        """Used K and V bytes of each layer (all layers hold the same number of positions)."""
        per_tensor = self.length * self.n_kv_heads * self.head_dim * self.element_bytes
        return [LayerBytes(per_tensor, per_tensor) for _ in range(self.n_layers)]

    def reserve(self, n_positions: int) -> None:
        """Make room for `n_positions`, growing by whole blocks (copying once) if needed."""
        if n_positions <= self.capacity:
            return
        if n_positions > self.max_capacity:
            raise ValueError(f"{n_positions} positions do not fit the context window of {self.max_capacity}")
        new_capacity = min(self.max_capacity, -(-n_positions // GROW_BLOCK) * GROW_BLOCK)
        grown = torch.zeros(*self.data.shape[:3], new_capacity, self.head_dim,
                            dtype=self.dtype, device=self.device)
        grown[:, :, :, :self.length].copy_(self.data[:, :, :, :self.length])
        self.data = grown
        self._layers = grown.unbind(0)

    def layers(self) -> tuple[torch.Tensor, ...]:
        """Every layer's storage, as layer(i) gives each."""
        return self._layers

    def layer(self, index: int) -> torch.Tensor:
        """One layer's whole storage, (2, kv_heads, capacity, head_dim): keys then values."""
        return self._layers[index]

    def write(self, layer: int, start: int, kv: torch.Tensor):
        """Store K/V for positions start.. and return views of every position up to the new end.

        kv: (T, 2, kv_heads, head_dim), keys then values, in one copy. Returns keys, values:
        (kv_heads, start + T, head_dim) each.
        """
        end = start + kv.shape[0]
        stored = self._layers[layer]  # (2, kv_heads, capacity, head_dim)
        stored[:, :, start:end].copy_(kv.permute(1, 2, 0, 3))  # (2, kv_heads, T, head_dim)
        return stored[:, :, :end].unbind(0)

    def crop(self, n_positions: int) -> None:
        """Forget every position from `n_positions` on (rewind to an earlier point of the context)."""
        if n_positions < 0:
            raise ValueError("cannot crop to a negative length")
        self.length = min(self.length, n_positions)
