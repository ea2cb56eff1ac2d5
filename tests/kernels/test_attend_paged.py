"""attend_paged (csrc/attention.h): one decode row of each of several requests, each over its own blocks of the
paged pool (session/paged_cache.py), in one call. Each row must get the bits attend_one gives it over the same
positions gathered out of the blocks (the batch's rows then equal their solo steps as closely as before), and
its K/V must land in its newest block; test_kernels_emulated runs this file again on the other instruction set."""

import pytest
import torch

from inference import kernels
from inference.session.paged_cache import BlockPool

ops = kernels.ops()
pytestmark = pytest.mark.kernels


def _pool(block_tokens: int, kv_heads: int, head_dim: int, n_blocks: int = 40) -> BlockPool:
    pool = BlockPool(n_layers=2, n_kv_heads=kv_heads, head_dim=head_dim, n_blocks=n_blocks, dtype=torch.float32,
                     block_tokens=block_tokens)
    pool.data.normal_(generator=torch.Generator().manual_seed(block_tokens * 7 + head_dim))
    return pool


@pytest.mark.parametrize("block_tokens", [16, 5, 1])
@pytest.mark.parametrize("heads, kv_heads, head_dim", [(9, 3, 64), (4, 4, 24), (2, 1, 80)])
def test_rows_equal_attend_one_over_their_gathered_blocks(block_tokens, heads, kv_heads, head_dim):
    """Requests of 1 to 300 positions (one chunk and several), tables out of order, a shared first block."""
    pool = _pool(block_tokens, kv_heads, head_dim, n_blocks=1 + sum(-(-n // block_tokens) for n in (1, 7, 70, 300)))
    g = torch.Generator().manual_seed(heads)
    shared = pool.allocate()
    tables, lengths = [], (1, 7, 70, 300)
    for n in lengths:
        own = [pool.allocate() for _ in range(-(-n // block_tokens) - 1)]
        if n > block_tokens:  # the request's first block is the shared one, the rest its own, out of order
            pool.share([shared])
            tables.append([shared] + own[::-1] + [pool.allocate()])
        else:
            tables.append(own + [pool.allocate()])
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    qkv = torch.randn(len(lengths), q_dim + 2 * kv_dim, generator=g)
    widest = max(map(len, tables))
    padded = torch.tensor([t + [0] * (widest - len(t)) for t in tables])
    scale = head_dim ** -0.5

    got = ops.attend_paged(qkv, pool.data[1], padded, torch.tensor(lengths), q_dim, scale)

    assert got.shape == (len(lengths), q_dim)
    for r, (n, table) in enumerate(zip(lengths, tables)):
        keys, values = pool.gather(1, table, n)  # (KV, n, hd) each, after the kernel's write
        new = qkv[r, q_dim:].view(2, kv_heads, head_dim)
        assert torch.equal(keys[:, -1], new[0]) and torch.equal(values[:, -1], new[1])  # written at position n - 1
        alone = ops.attend_one(qkv[r:r + 1, :q_dim].contiguous(), keys.contiguous(), values.contiguous(), scale)
        assert torch.equal(got[r:r + 1], alone), (r, n)
    assert torch.count_nonzero(pool.data[0]) == pool.data[0].numel()  # the other layer untouched (randn: no zeros)


def test_a_position_outside_the_table_or_the_pool_is_refused():
    pool = _pool(4, 1, 16, n_blocks=3)
    qkv = torch.randn(1, 3 * 16)
    with pytest.raises(RuntimeError, match="outside its block table"):
        ops.attend_paged(qkv, pool.data[0], torch.tensor([[0]]), torch.tensor([5]), 16, 0.25)
    with pytest.raises(RuntimeError, match="outside the pool"):
        ops.attend_paged(qkv, pool.data[0], torch.tensor([[0, 7]]), torch.tensor([5]), 16, 0.25)
