"""The KV cache's bookkeeping: bytes, growth by blocks, crop."""

import pytest
import torch

from inference.model.kv_cache import GROW_BLOCK, KVCache


def test_bytes_growth_and_crop():
    cache = KVCache(n_layers=3, n_kv_heads=2, head_dim=4, capacity=5, max_capacity=1000, dtype=torch.float32)
    assert cache.bytes_per_token == 2 * 3 * 2 * 4 * 4
    assert cache.allocated_bytes == 5 * cache.bytes_per_token and cache.used_bytes == 0
    k = torch.arange(5 * 2 * 4, dtype=torch.float32).view(5, 2, 4)
    for layer in range(3):
        keys, values = cache.write(layer, 0, torch.stack([k, -k], dim=1))  # (T, 2, kv_heads, head_dim)
        assert keys.shape == (2, 5, 4) and torch.equal(keys, k.transpose(0, 1))
    cache.length = 5
    cache.reserve(6)  # one more position than planned: grows by a whole block, keeping what it held
    assert cache.capacity == GROW_BLOCK and torch.equal(cache.data[1, 1, :, :5], -k.transpose(0, 1))
    assert [b.keys for b in cache.layer_bytes()] == [5 * 2 * 4 * 4] * 3
    cache.crop(2)
    assert cache.length == 2 and cache.used_bytes == 2 * cache.bytes_per_token
    cache.crop(4)  # cropping never lengthens
    assert cache.length == 2
    with pytest.raises(ValueError, match="context window"):
        cache.reserve(1001)
    with pytest.raises(ValueError):
        cache.crop(-1)
