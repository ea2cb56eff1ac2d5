"""Decode steps through static buffers, a graph per cache and size class (inference/model/graph_step.py, issue 43),
run here through the CPU stand-in (`Eager`): the same logits and K/V as the eager decoder, step after step, across
a size class (the cache grown: captured again), after a rewind, on two caches at once; which families it refuses.
On a GPU the same steps are captured as CUDA graphs (tests/inference/test_cuda.py)."""

import gc

import pytest
import torch
from tiny import make_hf_model, save_hf_model

from inference.model import kv_cache
from inference.model.graph_step import Eager, graphs_refusal
from inference.store.loading import load_model


def _pair(tmp_path, arch, **overrides):
    folder = save_hf_model(make_hf_model(arch, **overrides), tmp_path)
    eager, graphed = (load_model(folder, device="cpu", dtype="float32").decoder for _ in range(2))
    return eager, graphed


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a - b).abs().max().item() <= 1e-5 * b.abs().max().item() + 1e-5


@pytest.mark.parametrize("arch", ["llama", "qwen3", "qwen2", "mistral"])
def test_graph_steps_equal_eager_steps_across_size_classes(tmp_path, monkeypatch, arch):
    """Q/K norms (Qwen3), biases (Qwen2), a sliding window (Mistral's 6); the cache grows three times on the way (by 16
    positions a class here), each class captured once and replayed for every later step in it."""
    monkeypatch.setattr(kv_cache, "GROW_BLOCK", 16)
    eager, graphed = _pair(tmp_path, arch)
    replayer = Eager()
    assert graphed.use_graphs(replayer) is None and graphed.graphs is not None
    ids = torch.randint(0, 300, (40,), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        a, b = eager.new_cache(8), graphed.new_cache(8)
        assert _close(graphed.forward(ids[:5], 0, b), eager.forward(ids[:5], 0, a))  # a prefill is not a step
        assert replayer.captures == 0
        capacities = set()
        for i in range(5, 40):
            want = eager.forward(ids[i:i + 1], i, a)
            got = graphed.forward(ids[i:i + 1], i, b)
            assert got.shape == want.shape == (1, graphed.config.vocab) and _close(got, want), i
            assert b.length == a.length == i + 1
            capacities.add(b.capacity)
        assert capacities == {8, 16, 32, 48} and replayer.captures == 4 and graphed.graphs.replays == 35
        for layer in range(graphed.config.n_layers):
            assert _close(b.layer(layer)[:, :, :40], a.layer(layer)[:, :, :40])


def test_a_rewind_and_a_second_cache_keep_their_own_positions(tmp_path):
    eager, graphed = _pair(tmp_path, "llama")
    replayer = Eager()
    graphed.use_graphs(replayer)
    ids = torch.randint(0, 300, (20,), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        a, b, other = eager.new_cache(32), graphed.new_cache(32), graphed.new_cache(32)
        for cache, decoder in ((a, eager), (b, graphed), (other, graphed)):
            decoder.forward(ids[:4], 0, cache)
        for i in range(4, 12):
            eager.forward(ids[i:i + 1], i, a)
            graphed.forward(ids[i:i + 1], i, b)
        a.crop(7), b.crop(7)  # a rewind: the next step overwrites position 7
        other_steps = [graphed.forward(ids[i:i + 1], i, other) for i in range(4, 9)]  # another cache between
        for i in range(7, 15):
            token = ids[(i * 7) % 20:(i * 7) % 20 + 1]
            assert _close(graphed.forward(token, i, b), eager.forward(token, i, a)), i
        assert replayer.captures == 2  # one graph for each cache
        fresh = eager.new_cache(32)
        eager.forward(ids[:4], 0, fresh)
        for i, got in zip(range(4, 9), other_steps):
            assert _close(got, eager.forward(ids[i:i + 1], i, fresh))
        del other, cache  # (the loop above left `cache` naming it)
        gc.collect()
        assert len(graphed.graphs._graphs) == 1  # a dropped cache's graph goes with it


def test_graphs_are_refused_where_the_eager_route_special_cases(tmp_path):
    for arch, why in (("gemma2", "soft-capped"), ("gemma3", "second rotary base"), ("gpt2", "learned positions")):
        decoder = load_model(save_hf_model(make_hf_model(arch), tmp_path / arch), device="cpu",
                             dtype="float32").decoder
        assert why in graphs_refusal(decoder) and decoder.use_graphs(Eager()) and decoder.graphs is None
    decoder = load_model(save_hf_model(make_hf_model("llama"), tmp_path / "llama"), device="cpu",
                         dtype="float32").decoder
    assert decoder.graphs is None  # the CPU steps eagerly unless asked
    assert decoder.use_graphs(None) is None and decoder.graphs is None
