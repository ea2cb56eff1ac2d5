"""Decode throughput against the batch size, measured on this machine, and the weights-read floor (issue 39's
curve: why a batch's tokens/s grows with its size while each step's time barely moves).

For each size N, N requests (different windows of one text, greedy, end of sequence ignored) go through the
scheduler (batch.py); once all N decode (every pass N decode rows, no prompt chunk), `steps` scheduler steps are
timed: tokens/s = N / the median step. The floor is what a decode step cannot beat: the bytes it reads (every
weight once, whatever N: a pass reads the weights once for all its rows) over a streaming read's speed.
benchmarks/bench_batch.py is the careful version (rounds, sizes in alternating order); this one is the short
run the Serving dock asks for.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import torch

from inference.events import ScheduleDone
from inference.model.quant import RescoredHead
from inference.session.batch import BatchRequest, Scheduler, blocks_for_all
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import LoadedModel

PROMPT_TOKENS = 16
WARM_STEPS = 2  # all-decode steps before the timed ones
STREAM_BYTES = 256 << 20  # much larger than any cache: a read of it runs at memory speed
TEXT = ("The river ran past the old mill, where the miller's children watched boats carry grain, wool and "
        "timber down to the harbour town. Every spring the water rose and every autumn it fell, and the people "
        "who lived along its banks measured their years by it, telling stories of floods, of droughts, of the "
        "winter it froze so hard that a fair was held on the ice and sheep were roasted beside the bridge.")


def decode_read_bytes(weights, config) -> int:
    """Bytes one decode step reads: every matrix, bias, scale and norm once; of the embedding table (and
    learned positions) one row; of an int8 head's float rows the rescored ones."""
    def size(t):
        return t.numel() * t.element_size()

    head_rows = weights.lm_head.float_rows if isinstance(weights.lm_head, RescoredHead) else None
    tables = [t for t in (weights.embed, weights.pos_embed, head_rows) if t is not None]
    total = sum(size(t) for t in weights.tensors() if all(t is not table for table in tables))
    row = size(weights.embed[0])
    total += row * (2 if weights.pos_embed is not None else 1)
    if weights.lm_head.weight is weights.embed:  # a tied float head reads the whole table
        total += size(weights.embed)
    if head_rows is not None:
        total += weights.lm_head.rescored * row
    return total


def stream_gb_per_s(n_bytes: int = STREAM_BYTES, repeats: int = 5) -> float:
    """A streaming read's speed: the median of `repeats` sums over `n_bytes` of float32."""
    data = torch.ones(n_bytes // 4, dtype=torch.float32)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        data.sum()
        times.append(time.perf_counter() - started)
    return n_bytes / statistics.median(times) / 1e9


def floor_ms(model: LoadedModel) -> tuple[int, float, float]:
    """(bytes a decode step reads, GB/s of a streaming read, the floor in ms)."""
    read = decode_read_bytes(model.decoder.weights, model.config)
    gb_per_s = stream_gb_per_s()
    return read, gb_per_s, read / (gb_per_s * 1e9) * 1000


def prompts(model: LoadedModel, n: int) -> list[list[int]]:
    """n different prompts of PROMPT_TOKENS tokens (windows of TEXT at different offsets)."""
    ids = model.tokenizer.encode(TEXT + " " + TEXT)
    step = max(1, (len(ids) - PROMPT_TOKENS) // max(n, 1))
    return [ids[i * step:i * step + PROMPT_TOKENS] for i in range(n)]


def timed_steps(model: LoadedModel, asked: list[BatchRequest], steps: int) -> tuple[list[float], list[float]]:
    """Each of `steps` scheduler steps' wall ms and its pass's ms, once every request of `asked` decodes (the
    prefills, then WARM_STEPS all-decode steps first). The requests must not finish inside: give them room."""
    n = len(asked)
    scheduler = Scheduler(model, asked, blocks_for_all(model, asked))
    warm = 0
    while warm < WARM_STEPS:  # the prefills (chunks), then a couple of all-decode steps
        schedule = scheduler.step()[0]
        warm = warm + 1 if not schedule.prefill_chunks and schedule.tokens_in_pass == n else 0
    step_ms, pass_ms = [], []
    for _ in range(steps):
        started = time.perf_counter()
        schedule = scheduler.step()[0]
        step_ms.append((time.perf_counter() - started) * 1000)
        assert isinstance(schedule, ScheduleDone) and schedule.tokens_in_pass == n and not schedule.prefill_chunks
        pass_ms.append(schedule.forward_ms)
    return step_ms, pass_ms


def measure(model: LoadedModel, n: int, steps: int) -> float:
    """The median scheduler step (ms) with n requests all decoding."""
    model = dataclasses.replace(model, config=dataclasses.replace(model.config, eos_ids=()))
    settings = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=steps + WARM_STEPS + 8, top_n=5)
    return statistics.median(timed_steps(model, [BatchRequest(prompt, settings) for prompt in prompts(model, n)],
                                         steps)[0])
