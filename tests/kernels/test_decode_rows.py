"""Every layer of a pass over 2 to 16 positions in one kernels call (csrc/rows.h decode_rows, issue 38): each row
gets the bits it gets in a decode step of its own (logits and the K/V written), over one sequence's cache (a verify
pass, a short prompt) or over each request's blocks of a paged pool (a scheduler step), and matches the same pass
layer by layer through torch (SDPA under the causal mask) within float32 rounding."""

import dataclasses

import pytest
import torch
from tiny import make_hf_model, save_hf_model

from inference import kernels
from inference.model import layers as layers_module
from inference.store.loading import load_model
from inference.session.paged_cache import BlockPool

ops = kernels.ops()
pytestmark = pytest.mark.kernels


class _Rows:  # a ResidualCapture: asking for it takes the forward layer by layer through torch
    def record(self, layer, x):
        pass


def _model(tmp_path, arch, dtype="float32"):
    decoder = load_model(save_hf_model(make_hf_model(arch), tmp_path), device="cpu", dtype=dtype).decoder
    assert decoder.fused_decode and decoder.takes_rows(2) and decoder.takes_rows(16) and not decoder.takes_rows(17)
    return decoder


@pytest.mark.parametrize("arch, prompt, threads, dtype, path", [
    ("llama", 3, 2, "float32", ""), ("qwen3", 5, 2, "float32", ""), ("qwen2", 4, 2, "float32", ""),
    ("mistral", 9, 2, "float32", ""), ("llama", 80, 1, "float32", ""), ("llama", 70, 3, "float32", ""),
    ("gemma3", 6, 2, "float32", ""), ("gemma3", 70, 3, "float32", ""),
    ("qwen2", 5, 2, "int8", "float"), ("llama", 70, 2, "int8", "int16"), ("gemma3", 6, 3, "int8", "int16"),
    ("qwen3", 4, 2, "int8", "integer")])
def test_each_row_of_a_pass_has_the_bits_of_its_own_decode_step(tmp_path, monkeypatch, arch, prompt, threads, dtype,
                                                                 path):
    """Biases (Qwen2), q/k norms (Qwen3), a sliding window shorter than the pass (Mistral's 6), Gemma 3's layers
    (norms after each branch, GeGLU, windows of 4 on every other layer with their own rotary base, Q scaled),
    contexts whose attention runs in several chunks (70-96 positions), one, two or three threads; every M from 2
    to 16; float32 weights, and int8 on each int8 path (each row as the step's one-row products form it)."""
    if path:
        monkeypatch.setenv("TOKENSTEP_INT8_PATH", path)
    decoder = _model(tmp_path, arch, dtype)
    # through torch, layer by layer, int8 products of several rows dequantise (the float path's numbers; the int16
    # path's activations are rounded to 1/65534 of their group's largest, the integer path's to 1/254)
    tolerance = {"": 1e-5, "float": 1e-5, "int16": 1e-3, "integer": 3e-2}[path]
    g = torch.Generator().manual_seed(prompt)
    ids = torch.randint(0, 300, (prompt + 16,), generator=g)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            for M in range(2, 17):
                steps, pass_, layered = (decoder.new_cache(len(ids)) for _ in range(3))
                for cache in (steps, pass_, layered):
                    decoder.forward(ids[:prompt], 0, cache)
                one_by_one = torch.cat([decoder.forward(ids[i:i + 1], i, steps) for i in range(prompt, prompt + M)])
                calls = decoder.forward_count
                together = decoder.forward(ids[prompt:prompt + M], prompt, pass_, all_logits=True)
                assert decoder.forward_count == calls + 1
                assert torch.equal(together, one_by_one), M
                end = prompt + M
                assert pass_.length == end
                assert torch.equal(pass_.data[:, :, :, :end], steps.data[:, :, :, :end]), M
                by_layer = decoder.forward(ids[prompt:end], prompt, layered, all_logits=True, residuals=_Rows())
                if dtype != "float32":  # the int8 head's logits outside its best 64 are 8-bit estimates
                    best = together.topk(10).indices
                    by_layer, together = by_layer.gather(1, best), together.gather(1, best)
                assert (by_layer - together).abs().max() <= tolerance * (by_layer.abs().max() + 1), M
    finally:
        torch.set_num_threads(before)


def test_rows_over_a_paged_pool_equal_rows_over_their_own_caches(tmp_path):
    """Three requests in one call, each over its own blocks (scattered, out of order in the pool): one decode row,
    a chunk of five prompt rows at a block's edge and two rows; each equals the same rows over a cache of its own."""
    decoder = _model(tmp_path, "qwen3")
    c, layers = decoder.config, decoder.weights.layers
    B = 4
    pool = BlockPool(c.n_layers, c.n_kv_heads, c.head_dim, 16, torch.float32, block_tokens=B)
    g = torch.Generator().manual_seed(7)
    requests = [(torch.randint(0, 300, (n,), generator=g), rows) for n, rows in ((9, 1), (7, 5), (13, 2))]
    free = [11, 3, 14, 0, 8, 5, 12, 1, 9, 15, 2, 6, 4, 10, 13, 7]  # the blocks each request takes, in turn
    tables, caches, solo_logits, positions = [], [], [], []
    with torch.inference_mode():
        for ids, rows in requests:
            table = [free.pop(0) for _ in range(pool.blocks_for(len(ids)))]
            for block in table:
                pool.refs[block] = 1  # the request's own
            done = len(ids) - rows
            cache = decoder.new_cache(len(ids))
            decoder.forward(ids[:done], 0, cache)
            for layer in range(c.n_layers):  # the positions already computed, into the request's blocks
                pool.write(layer, table, 0, cache.layer(layer)[:, :, :done].permute(2, 0, 1, 3))  # (done, 2, KV, hd)
            solo_logits.append(decoder.forward(ids[done:], done, cache, all_logits=True))
            tables.append(table)
            caches.append(cache)
            positions += range(done, len(ids))
        width = max(len(t) for t in tables)
        row_tables = torch.tensor([tables[r] + [0] * (width - len(tables[r]))
                                   for r, (_, rows) in enumerate(requests) for _ in range(rows)])
        ids = torch.cat([ids[len(ids) - rows:] for ids, rows in requests])
        x = decoder.block.embed(decoder.weights.embed, ids)
        rope = torch.stack([torch.view_as_real(decoder.rotary(p, p + 1))[0] for p in positions])
        kvs = [pool.data[layer] for layer in range(c.n_layers)]
        got = decoder.head_logits(decoder.block.rows_all(x, layers, torch.tensor(positions), kvs, row_tables, rope,
                                                         None))
    assert torch.equal(got, torch.cat(solo_logits))
    for table, cache, (ids, _) in zip(tables, caches, requests):
        for layer in range(c.n_layers):
            k, v = pool.gather(layer, table, len(ids))
            assert torch.equal(torch.stack([k, v]), cache.layer(layer)[:, :, :len(ids)]), layer


def test_bad_rows_are_refused_in_one_line(tmp_path):
    decoder = _model(tmp_path, "llama")
    c, layers = decoder.config, decoder.weights.layers
    cache = decoder.new_cache(8)
    x = torch.zeros(2, c.hidden)
    rope = torch.zeros(2, c.head_dim // 2, 2)
    kvs = list(cache.layers())
    with pytest.raises(RuntimeError, match="outside the cache"):
        decoder.block.rows_all(x, layers, torch.tensor([7, 8]), kvs, None, rope, None)
    with pytest.raises(RuntimeError, match="1 to 16 contiguous float32 rows"):
        decoder.block.rows_all(torch.zeros(17, c.hidden), layers, torch.arange(17), kvs, None,
                               torch.zeros(17, c.head_dim // 2, 2), None)
    pool = BlockPool(c.n_layers, c.n_kv_heads, c.head_dim, 2, torch.float32, block_tokens=4)
    with pytest.raises(RuntimeError, match="outside its block table"):
        decoder.block.rows_all(x, layers, torch.tensor([3, 8]), [pool.data[i] for i in range(c.n_layers)],
                               torch.tensor([[0, 1], [1, 0]]), rope, None)
    with pytest.raises(RuntimeError, match="outside the pool"):
        decoder.block.rows_all(x, layers, torch.tensor([3, 5]), [pool.data[i] for i in range(c.n_layers)],
                               torch.tensor([[0, 1], [1, 2]]), rope, None)
    arguments = decoder.block.arguments(layers)
    for change, message in ((dict(windows=[0] * (c.n_layers + 1)), "one for every layer, or one per layer"),
                            (dict(windows=[-1]), "a positive number of positions"),
                            (dict(activation=3), "0 silu, 1 gelu_tanh, 2 gelu")):
        bad = dataclasses.replace(arguments, **change)
        with pytest.raises(RuntimeError, match=message):
            layers_module.decode_rows(ops, x, bad, kvs, torch.tensor([3, 4]), None, rope, None, c.n_heads)
        with pytest.raises(RuntimeError, match=message):
            layers_module.decode_layers(ops, x[:1], bad, kvs, 3, rope[0], None, c.n_heads)
    with pytest.raises(RuntimeError, match="rope: float32"):
        decoder.block.rows_all(x, layers, torch.tensor([3, 4]), kvs, None, rope, torch.zeros(3, c.head_dim // 2, 2))
