"""One forward pass for many requests: the rows of every request's chunk stacked into one (M, C) stream.

Each layer runs the decoder's own Block (model/decoder.py) on the stacked rows: the projections and the
MLP once for all M rows (the weights are read once per pass, whatever the number of requests), while rotary
positions and attention go request by request, each over its own cache (a PagedView of its blocks) through
`Block.attend`, the same routes a solo forward takes (decode: one query; a chunk: the causal mask from its
start). `Decoder.forward` takes one cache and one start for all its rows, which is why this loop exists:
it is `Block.__call__` with the per-request part split out, nothing of the math re-written.

The decode rows (one position each: the pass's leading chunks, as the scheduler plans them) take one kernel
call a layer for all of them where the kernels run the attention (float32, no soft-cap, no sliding window, no
second rotary base): `attend_paged` writes each row's K/V into its request's newest block and attends over the
request's blocks where they lie, chunked as a solo decode step chunks its cache (the same numbers as `Block.attend`
over the gathered blocks, without gathering them, and without a round of Python and torch calls per request and
layer, which at 8 requests cost more than the attention itself).

What it does not run: longrope's whole-sequence re-read (Phi-3 past its original context) and the bfloat16
copies for long prefills (prefill_dtype.py); the batch refuses the first and reads the float weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.messages import say
from inference.model.decoder import Decoder
from inference.session.paged_cache import PagedView


@dataclass(frozen=True)
class Chunk:
    """One request's rows in a pass: `ids` at positions start.., over that request's cache."""

    ids: list[int]
    start: int
    cache: PagedView

    @property
    def end(self) -> int:
        return self.start + len(self.ids)


def paged_rows(decoder: Decoder, chunks: list[Chunk]) -> int:
    """How many leading chunks are single decode rows that `attend_paged` can take together (0: none, or the
    model's attention is not the kernels' plain one)."""
    block, c = decoder.block, decoder.config
    if (block.kernels is None or decoder.kv_dtype != torch.float32 or block.softcap is not None
            or block.local_rotary is not None or any(c.window_of(i) for i in range(c.n_layers))):
        return 0
    rows = 0
    for chunk in chunks:
        if len(chunk.ids) != 1:
            break
        pool, table = chunk.cache.pool, chunk.cache.table
        if pool.refs[table[chunk.start // pool.block_tokens]] != 1:
            break  # its newest position falls in a shared block: never written into (the scheduler avoids it)
        rows += 1
    return rows


def in_one_call(decoder: Decoder, chunks: list[Chunk], rows: int) -> bool:
    """Whether the pass runs every layer for all its rows in one kernels call (csrc/rows.h decode_rows): the fused
    decode's families on float32 or int8 weights, at most 16 rows, and no row writing into a block another request
    shares (the scheduler never plans one)."""
    if not decoder.takes_rows(max(rows, 2)):  # one row too: over its blocks, the bits of a solo decode step
        return False
    for chunk in chunks:
        pool, table = chunk.cache.pool, chunk.cache.table
        if any(pool.refs[table[p // pool.block_tokens]] != 1 for p in range(chunk.start, chunk.end)):
            return False
    return True


def rows_in_one_call(decoder: Decoder, chunks: list[Chunk], x: torch.Tensor) -> torch.Tensor:
    """Every layer for the rows x (M, C) of `chunks` in one kernels call, each row over its request's blocks where
    they lie in the pool: the residual stream after the last layer, (M, C)."""
    pool = chunks[0].cache.pool
    widest = max(len(chunk.cache.table) for chunk in chunks)
    tables = torch.tensor([chunk.cache.table + [0] * (widest - len(chunk.cache.table))
                           for chunk in chunks for _ in chunk.ids], dtype=torch.int64)  # (M, widest)
    positions = torch.tensor([p for chunk in chunks for p in range(chunk.start, chunk.end)], dtype=torch.int64)
    rope = torch.cat([torch.view_as_real(decoder.rotary(chunk.start, chunk.end)) for chunk in chunks])  # (M, hd/2, 2)
    block = decoder.block
    local = None if block.local_rotary is None else torch.cat([block.local_cos_sin(chunk.start, chunk.end)
                                                               for chunk in chunks])  # (M, hd/2, 2)
    kvs = pool.data.unbind(0)  # each layer's pool (blocks, 2, KV, B, hd)
    return block.rows_all(x, decoder.weights.layers, positions, kvs, tables, rope, local)


def forward_chunks(decoder: Decoder, chunks: list[Chunk]) -> torch.Tensor:
    """Every chunk's K/V into its cache; the float logits of each chunk's last row: (len(chunks), V)."""
    if decoder.longrope is not None:
        raise ValueError(say("batch.longrope"))
    c, w, block = decoder.config, decoder.weights, decoder.block
    for chunk in chunks:
        if chunk.end > c.context_length:
            raise ValueError(f"position {chunk.end - 1} is outside the context window of {c.context_length}")
    bounds, at = [], 0
    for chunk in chunks:
        bounds.append((at, at + len(chunk.ids)))
        at += len(chunk.ids)
    ids = torch.tensor([i for chunk in chunks for i in chunk.ids], device=decoder.device)
    decoder.forward_count += 1
    x = block.embed(w.embed, ids)  # (M, C)
    if w.pos_embed is not None:
        x = x + torch.cat([w.pos_embed[chunk.start:chunk.end] for chunk in chunks])  # (M, C)
    last_rows = torch.tensor([last - 1 for _, last in bounds], device=decoder.device)
    if in_one_call(decoder, chunks, len(ids)):
        return decoder.head_logits(rows_in_one_call(decoder, chunks, x)[last_rows])  # (len(chunks), V)
    ropes = [decoder.rotary(chunk.start, chunk.end)[:, None, :] if decoder.rotary is not None else None
             for chunk in chunks]  # (T, 1, hd/2) each
    D = paged_rows(decoder, chunks)  # the decode rows 0..D-1, one per request, attended in one call a layer
    if D:
        pool = chunks[0].cache.pool
        widest = max(len(chunk.cache.table) for chunk in chunks[:D])
        tables = torch.tensor([chunk.cache.table + [0] * (widest - len(chunk.cache.table)) for chunk in chunks[:D]],
                              dtype=torch.int64)  # (D, widest): the tail past a request's blocks is never read
        lengths = torch.tensor([chunk.end for chunk in chunks[:D]], dtype=torch.int64)  # (D,)
        rope_rows = torch.cat(ropes[:D]) if decoder.rotary is not None else None  # (D, 1, hd/2)
    for index, layer in enumerate(w.layers):
        qkv = layer.qkv.normed(x, layer.attn_norm)  # (M, q_dim + 2 kv_dim): one read of the weights
        attended = []
        if D:
            rows = qkv[:D]  # a view: positioned in place (no second rotary base on this path: start unused)
            if rope_rows is not None:
                block.position(rows, layer, index, 0, rope_rows)
            attended.append(block.kernels.attend_paged(rows, pool.data[index], tables, lengths, c.q_dim,
                                                       c.head_dim ** -0.5))  # (D, q_dim)
        for chunk, (first, last), rope in zip(chunks[D:], bounds[D:], ropes[D:]):
            rows = qkv[first:last]  # a view: positioned in place
            if rope is not None:
                block.position(rows, layer, index, chunk.start, rope)
            attended.append(block.attend(rows, index, chunk.start, chunk.cache, None))  # (T, q_dim)
        x = block.residual(x, layer.o, torch.cat(attended), layer.post_attn_norm)  # (M, C)
        x = block.residual(x, layer.mlp_out, block.mlp(x, layer), layer.post_mlp_norm)  # (M, C)
    return decoder.head_logits(x[last_rows])  # (len(chunks), V)
