"""A decode step captured once and replayed (issue 43): static buffers, a graph per cache and size class.

On a GPU an eager decode step is a few hundred small kernel launches and the Python between them: the H200 this
project had measured 12-27 ms a token for the default model, 200-400x the time the GPU needs to read its weights.
A CUDA graph replays the same launches in one call, with no Python in between. A graph fixes the addresses and
shapes it reads, so the step it replays reads everything from static places:
- the token id and its position are copied into two static buffers before each replay (`ids`, `position`);
- the KV cache is the session's own KVCache, whose storage is one tensor of `capacity` positions: its capacity, grown
  GROW_BLOCK positions at a time (kv_cache.py), is the size class. A graph attends over the whole capacity under a
  mask of the positions up to `position` (and within the sliding window), built on the device from the position
  buffer, and writes the step's K/V with index_copy_ at that position; when the cache grows (new storage) its graph
  is captured again, once per class. Each live cache (a branch, a compare) keeps its own graph until it is dropped;
- the rotary cos + i sin of the step's position is gathered on the device from the table of the class's positions;
- the float logits land in a static buffer, handed back as a copy (a session may keep a step's logits).
What a graph step computes is the eager Block's own layer (the projections, norms, rotary and MLP are its methods);
only the cache write and the attention are written here, over the static cache. Families the eager route
special-cases (soft-capped scores, a second rotary base, longrope's re-reads: Gemma 2/3, long Phi-3) and forwards
with a capture (attention, lens) take the eager route.

How a step is captured is the Replayer's business: `CudaGraphs` warms the step up on a side stream and captures it
into a torch.cuda.CUDAGraph (all graphs of a decoder share one memory pool); `Eager`, the CPU stand-in, runs the same
step each time, so every buffer, size class, mask and copy-back above is tested on a machine without a GPU
(tests/inference/test_graph_step.py against the eager decoder).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
import torch.nn.functional as F

Step = Callable[[], None]
GRAPHS_ENV = "TOKENSTEP_CUDA_GRAPHS"  # "0": eager decode steps on CUDA too


class Replayer(Protocol):
    name: str

    def capture(self, step: Step) -> Step:
        """Record `step` (reading and writing only static tensors) and return what replays it; `step` has run
        once when this returns (its outputs are those of the inputs in place)."""


class Eager:
    """The CPU stand-in: 'replaying' runs the step again, through the same static buffers."""

    name = "eager"

    def __init__(self):
        self.captures = 0

    def capture(self, step: Step) -> Step:
        self.captures += 1
        step()
        return step


class CudaGraphs:
    """torch.cuda.CUDAGraph: two warm-up runs on a side stream (cuBLAS and the allocator settle), then the capture,
    into one memory pool for every graph of the decoder."""

    name = "cuda graphs"

    def __init__(self):
        self.captures = 0
        self.pool = torch.cuda.graph_pool_handle()

    def capture(self, step: Step) -> Step:
        self.captures += 1
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            step()
        graph.replay()  # the capture recorded the step without running it: this step's outputs
        return graph.replay


def graphs_refusal(decoder) -> str | None:
    """Why this decoder's steps cannot be captured (None: they can): what the eager route special-cases."""
    c, block = decoder.config, decoder.block
    if block.softcap is not None:
        return "soft-capped attention scores"
    if block.local_rotary is not None:
        return "a second rotary base for windowed layers"
    if decoder.longrope is not None:
        return "longrope re-reads the sequence past its original context"
    if decoder.rotary is None:
        return "learned positions"
    if len({c.window_of(i) for i in range(c.n_layers)}) > 1:
        return "windowed and global layers mixed"
    return None


@dataclass
class _Graph:
    """One cache's graph: the storage and class it was captured for, its rope table and key positions, the replay."""

    storage: torch.Tensor  # the cache's data when captured: a grown cache has new storage
    rope: torch.Tensor  # (capacity, hd / 2) complex: the rotary table of the class's positions
    keys: torch.Tensor  # (capacity,) int64: each key position, for the mask
    replay: Step


class GraphSteps:
    """A decoder's decode steps through `replayer`: the static inputs and outputs, and one graph per live cache."""

    def __init__(self, decoder, replayer: Replayer):
        self.decoder, self.replayer = decoder, replayer
        device = decoder.device
        self.ids = torch.zeros(1, dtype=torch.int64, device=device)
        self.position = torch.zeros(1, dtype=torch.int64, device=device)
        self.logits = torch.zeros(1, decoder.config.vocab, dtype=torch.float32, device=device)
        self._graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # KVCache -> _Graph
        self.replays = 0

    @property
    def captures(self) -> int:
        return self.replayer.captures

    def step(self, ids: torch.Tensor, position: int, cache) -> torch.Tensor:
        """The float logits (1, V) of one token at `position`, its K/V written into `cache` (room reserved)."""
        self.ids.copy_(ids.reshape(1))
        self.position.fill_(position)
        graph = self._graphs.get(cache)
        if graph is None or graph.storage is not cache.data:
            self._graphs[cache] = self._capture(cache)  # runs the step once
        else:
            graph.replay()
        self.replays += 1
        return self.logits.clone()

    def _capture(self, cache) -> _Graph:
        d = self.decoder
        capacity = cache.capacity
        rope = d.rotary(0, capacity)  # the table's own rows: kept alive by the graph that reads them
        keys = torch.arange(capacity, device=d.device)
        graph = _Graph(cache.data, rope, keys, lambda: None)
        layers = cache.layers()  # views of the storage, not the cache: the cache stays collectable (a weak key)
        graph.replay = self.replayer.capture(lambda: self._step(layers, graph))
        return graph

    def _step(self, layers: tuple[torch.Tensor, ...], graph: _Graph) -> None:
        """The decode step on static tensors only: no host read, no shape from a Python value that changes."""
        d = self.decoder
        c, w, block = d.config, d.weights, d.block
        x = block.embed(w.embed, self.ids)  # (1, C)
        rope = graph.rope.index_select(0, self.position)[:, None, :]  # (1, 1, hd / 2)
        allowed = graph.keys <= self.position  # (capacity,)
        window = c.window_of(0)
        if window:
            allowed &= graph.keys > self.position - window
        mask = allowed[None, None, None, :]  # (1, 1, 1, capacity)
        for index, layer in enumerate(w.layers):
            qkv = layer.qkv.normed(x, layer.attn_norm)  # (1, q_dim + 2 kv_dim)
            block.position(qkv, layer, index, 0, rope)  # no second rotary base here: the start is not read
            stored = layers[index]  # (2, KV, capacity, hd)
            stored.index_copy_(2, self.position, qkv[:, c.q_dim:].view(1, 2, c.n_kv_heads, c.head_dim).permute(1, 2, 0, 3))
            q = qkv[:, :c.q_dim].view(1, c.n_heads, 1, c.head_dim)  # (1, H, 1, hd)
            out = F.scaled_dot_product_attention(q, stored[0][None], stored[1][None], attn_mask=mask,
                                                 enable_gqa=c.n_heads != c.n_kv_heads)  # (1, H, 1, hd)
            x = block.residual(x, layer.o, out.reshape(1, c.q_dim), layer.post_attn_norm)
            x = block.residual(x, layer.mlp_out, block.mlp(x, layer), layer.post_mlp_norm)
        self.logits.copy_(d.head_logits(x))
