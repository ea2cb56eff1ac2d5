"""The paged KV cache: one pool of fixed-size blocks that many requests' caches are cut from.

A block holds `block_tokens` consecutive positions of every layer's K and V. A request owns a block table
(the ids of its blocks, in position order): position p lives in block table[p // B] at offset p % B, so a
request grows one block at a time and gives every block back when it finishes, and the pool never holds a
hole it cannot reuse. Memory is exactly blocks in use x block bytes.

Shared prefixes: a FULL block of prompt tokens is named by a hash chain (its tokens and the hash of the
block before it), so two prompts that begin with the same full blocks name those blocks alike. A request
that arrives after such blocks were computed takes them (a reference each) instead of computing them.
Only full blocks are ever shared, and a request writes only at positions past the ones it took, so it never
writes into a shared block: no copy on write is needed (`write` refuses to, which keeps that true). A block
goes back to the free list, and out of the prefix table, when its last user lets it go.
"""

from __future__ import annotations

import hashlib
from collections import deque

import torch

from inference.model.kv_cache import kv_bytes_per_token

BLOCK_TOKENS = 16  # positions per block (vLLM's default)


def prefix_hashes(ids: list[int], block_tokens: int) -> list[bytes]:
    """The chain hash of each full block of `ids`: block i's names its tokens and every token before them."""
    hashes, parent = [], b""
    for end in range(block_tokens, len(ids) + 1, block_tokens):
        tokens = ",".join(map(str, ids[end - block_tokens:end])).encode()
        parent = hashlib.blake2b(parent + b"|" + tokens, digest_size=16).digest()
        hashes.append(parent)
    return hashes


def blocks_for(n_positions: int, block_tokens: int) -> int:
    """Blocks that hold `n_positions` positions."""
    return -(-n_positions // block_tokens)


class BlockPool:
    """Every block's K/V storage, who uses it (reference counts), the free list and the prefix table."""

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, n_blocks: int, dtype: torch.dtype,
                 device: torch.device | str = "cpu", block_tokens: int = BLOCK_TOKENS):
        if n_blocks < 1 or block_tokens < 1:
            raise ValueError(f"a pool needs at least one block of at least one token, got {n_blocks} x {block_tokens}")
        self.block_tokens = block_tokens
        self.bytes_per_token = kv_bytes_per_token(n_layers, n_kv_heads, head_dim, dtype.itemsize)
        # (layers, blocks, K and V, KV heads, B, hd): one block of one layer is one contiguous (2, KV, B, hd)
        self.data = torch.zeros(n_layers, n_blocks, 2, n_kv_heads, block_tokens, head_dim, dtype=dtype, device=device)
        self.refs = [0] * n_blocks  # users of each block; 0: free
        self.free: deque[int] = deque(range(n_blocks))  # the oldest freed is reused first
        self.prefix: dict[bytes, int] = {}  # chain hash -> the block holding those positions' K/V
        self.hash_of: list[bytes | None] = [None] * n_blocks  # each block's entry in `prefix`, if any

    @property
    def n_blocks(self) -> int:
        return len(self.refs)

    @property
    def n_free(self) -> int:
        return len(self.free)

    @property
    def n_used(self) -> int:
        return self.n_blocks - len(self.free)

    @property
    def n_shared(self) -> int:
        """Blocks more than one request uses now."""
        return sum(r > 1 for r in self.refs)

    @property
    def block_bytes(self) -> int:
        return self.block_tokens * self.bytes_per_token

    @property
    def used_bytes(self) -> int:
        return self.n_used * self.block_bytes

    def blocks_for(self, n_positions: int) -> int:
        return blocks_for(n_positions, self.block_tokens)

    # --- lending blocks ---------------------------------------------------------------------------------
    def allocate(self) -> int:
        if not self.free:
            raise RuntimeError("the block pool is full: the scheduler admitted more than it holds")
        block = self.free.popleft()
        self.refs[block] = 1
        return block

    def release(self, table: list[int]) -> None:
        """A request lets its blocks go; each one nobody else uses is free again (and no longer a prefix)."""
        for block in table:
            if self.refs[block] < 1:
                raise RuntimeError(f"block {block} released more often than it was taken")
            self.refs[block] -= 1
            if self.refs[block] == 0:
                if self.hash_of[block] is not None:
                    del self.prefix[self.hash_of[block]]
                    self.hash_of[block] = None
                self.free.append(block)

    def cached_prefix(self, hashes: list[bytes]) -> list[int]:
        """The longest run of leading blocks already computed for `hashes` (nothing taken yet)."""
        blocks = []
        for h in hashes:
            if h not in self.prefix:
                break
            blocks.append(self.prefix[h])
        return blocks

    def share(self, blocks: list[int]) -> None:
        """One more user of each of `blocks` (blocks in use, from `cached_prefix`)."""
        for block in blocks:
            if self.refs[block] < 1:
                raise RuntimeError(f"block {block} is free: there is nothing in it to share")
            self.refs[block] += 1

    def publish(self, h: bytes, block: int) -> None:
        """`block` now holds the full prompt block named `h`: later prompts beginning the same may take it."""
        if h not in self.prefix and self.hash_of[block] is None:
            self.prefix[h] = block
            self.hash_of[block] = h

    # --- K/V --------------------------------------------------------------------------------------------
    def write(self, layer: int, table: list[int], start: int, kv: torch.Tensor) -> None:
        """Store K/V of positions start.. into the table's blocks. kv: (T, 2, KV, hd), keys then values."""
        B, end = self.block_tokens, start + kv.shape[0]
        at = start
        while at < end:
            block, offset = table[at // B], at % B
            if self.refs[block] != 1:
                raise RuntimeError(f"block {block} is shared ({self.refs[block]} users): never written into")
            n = min(B - offset, end - at)
            self.data[layer, block, :, :, offset:offset + n].copy_(kv[at - start:at - start + n].permute(1, 2, 0, 3))
            at += n

    def gather(self, layer: int, table: list[int], n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of positions 0..n_positions-1 in one (KV, n, hd) tensor each."""
        blocks = self.data[layer, table[:self.blocks_for(n_positions)]]  # (nb, 2, KV, B, hd)
        nb, _, kv_heads, B, hd = blocks.shape
        joined = blocks.permute(1, 2, 0, 3, 4).reshape(2, kv_heads, nb * B, hd)  # (2, KV, nb * B, hd)
        return joined[:, :, :n_positions].unbind(0)


class PagedView:
    """One request's cache as `Block.attend` asks of a cache (model/decoder.py): `write` stores this call's
    K/V and returns every position's, here gathered from the request's blocks."""

    def __init__(self, pool: BlockPool, table: list[int]):
        self.pool, self.table = pool, table

    def write(self, layer: int, start: int, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.pool.write(layer, self.table, start, kv)
        return self.pool.gather(layer, self.table, start + kv.shape[0])  # (KV, n, hd) each
