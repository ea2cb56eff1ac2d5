"""Many requests at once (session/batch.py): each request equals its solo Session run, whatever runs beside it,
with shared prefixes and chunked prefill; the block pool lends, shares and takes back every block exactly."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from inference.events import BlocksReport, PrefillDone, ScheduleDone, StepDone, Stopped
from inference.session.batch import BatchRequest, Scheduler
from inference.session.paged_cache import BlockPool, PagedView, prefix_hashes
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model
from inference.model.layers import select_backend
from tiny import ARCHITECTURES, VOCAB, build_decoder, make_hf_model, save_hf_model

B = 16  # block tokens
SYSTEM = [(7 * i + 3) % 250 for i in range(2 * B)]  # a 2-block system prompt three requests begin with
LONG = [(11 * i + 5) % 300 for i in range(100)]  # read in chunks of the token budget
BUDGET = 24


def _settings(seed: int, max_new: int, top_n: int, **sampler) -> GenerationSettings:
    return GenerationSettings(SamplerSettings(**sampler), max_new_tokens=max_new, seed=seed, top_n=top_n)


def _mix(top_n: int) -> list[BatchRequest]:
    """8 requests: staggered arrivals, different samplers, seeds and lengths; 1, 3 and 6 begin with SYSTEM
    (3 and 6 arrive after 1 has read it), 4 is the long prompt."""
    s = lambda seed, n, **sampler: _settings(seed, n, top_n, **sampler)  # noqa: E731
    return [
        BatchRequest([5, 77, 200, 31, 9], s(1, 9, temperature=1.5, top_k=0), 0),
        BatchRequest(SYSTEM + [40, 41, 42], s(2, 7, temperature=0.8, top_k=40), 0),
        BatchRequest([120, 3, 3, 3, 99, 17, 250], s(3, 5, greedy=True), 1),
        BatchRequest(SYSTEM + [90, 12], s(4, 8, temperature=1.0, top_p=0.9), 4),
        BatchRequest(LONG, s(5, 6, temperature=1.2, min_p=0.05), 2),
        BatchRequest([1, 2, 3], s(6, 10, temperature=2.0, top_k=5), 3),
        BatchRequest(SYSTEM + [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216],
                     s(7, 4, temperature=0.7, top_k=0, top_p=0.95), 6),
        BatchRequest([300, 301], s(8, 12, temperature=1.0), 9),
    ]


def _no_eos(model):
    model.config = dataclasses.replace(model.config, eos_ids=())  # every request runs to its max new tokens
    return model


FAMILIES = ["llama", "gemma2", "gpt2"]  # the families every batch test runs on; the main one runs on every family


def _tiny(arch: str, tmp_path_factory):
    folder = save_hf_model(make_hf_model(arch, seed=5), tmp_path_factory.mktemp(arch))
    return folder, _no_eos(load_model(folder, device="cpu", dtype="float32"))


@pytest.fixture(scope="module", params=FAMILIES)
def model(request, tmp_path_factory):
    """Llama (the fused-kernel family), Gemma 2 (soft caps, sliding windows of 4, norms after each branch) and
    GPT-2 (learned positions, LayerNorm, biases), float32."""
    return _tiny(request.param, tmp_path_factory)[1]


@pytest.fixture(scope="module", params=[arch for arch in ARCHITECTURES if arch not in FAMILIES])
def other_family(request, tmp_path_factory):
    """Mistral (a sliding window of 6), Qwen2 (biases), Qwen3 (Q/K norms), Phi-3 (partial rotary), Gemma 3
    (local and global rotary bases)."""
    return _tiny(request.param, tmp_path_factory)[1]


@pytest.fixture(scope="module", params=FAMILIES)
def model64(request, tmp_path_factory):
    """The same checkpoints computed in float64 (logits still handed out as float32): the batch's arithmetic
    seen without float32's path-dependent rounding."""
    folder, loaded = _tiny(request.param, tmp_path_factory)
    return dataclasses.replace(loaded, decoder=build_decoder(folder, select_backend("cpu", torch.float64)))


def _by_request(events, kind):
    out: dict[int, list] = {}
    for event in events:
        if isinstance(event, kind):
            out.setdefault(event.request, []).append(event)
    return out


def _full_logits(step: StepDone, vocab: int) -> np.ndarray:
    """The step's raw logits over the whole vocabulary (its candidates, with top_n = the vocabulary), by id."""
    logits = np.full(vocab, np.nan)
    logits[step.dist.candidates.ids] = step.dist.candidates.logits
    return logits


def _check_pool(scheduler: Scheduler) -> None:
    """Every block's reference count is the number of running tables holding it; free = the unreferenced."""
    pool = scheduler.pool
    held = [0] * pool.n_blocks
    for request in scheduler.requests:
        if request.state == "running":
            for block in request.source.table:
                held[block] += 1
    assert held == pool.refs
    assert sorted(pool.free) == [b for b in range(pool.n_blocks) if held[b] == 0]
    assert all(held[b] >= 1 and pool.hash_of[b] == h for h, b in pool.prefix.items())
    assert pool.used_bytes == sum(h > 0 for h in held) * pool.block_tokens * pool.bytes_per_token


def _run(scheduler: Scheduler) -> list:
    events = []
    while not scheduler.done:
        events += scheduler.step()
        _check_pool(scheduler)
        assert scheduler.step_index < 500
    return events


def _tolerance(model, logits: np.ndarray) -> float:
    """1e-5 in float64. In float32, 1e-5 of the largest logit: a batch's rows go through the products as one
    matrix while a solo decode step goes through them as one row, and float32 rounds the two differently (by up
    to 1.4e-5 on these tiny models, as test_parity's test_cached_decode_equals_full_recompute measured; seen
    here up to 2.2e-5 with logits up to 4, and 4.1e-5 with logits up to 38 on the default model)."""
    return 1e-5 if model.decoder.dtype == torch.float64 else 1e-5 * max(1.0, float(np.abs(logits).max()))


def _assert_solo(model, asked: BatchRequest, steps: list[StepDone], stop: Stopped) -> None:
    solo = list(Session(model, asked.settings).generate(asked.prompt))
    solo_steps = [e for e in solo if isinstance(e, StepDone)]
    assert [s.token.id for s in steps] == [s.token.id for s in solo_steps]
    for mine, theirs in zip(steps, solo_steps):
        assert (mine.index, mine.position, mine.random_u, mine.kv_used_bytes, mine.context_tokens) == \
            (theirs.index, theirs.position, theirs.random_u, theirs.kv_used_bytes, theirs.context_tokens)
        expected, got = _full_logits(theirs, model.config.vocab), _full_logits(mine, model.config.vocab)
        np.testing.assert_allclose(got, expected, rtol=0, atol=_tolerance(model, expected))
    assert (stop.reason, stop.n_generated, stop.text) == (solo[-1].reason, solo[-1].n_generated, solo[-1].text)


def test_eight_requests_equal_their_solo_runs(model):
    _eight_requests_equal_their_solo_runs(model)


def test_eight_requests_equal_their_solo_runs_in_every_family(other_family):
    _eight_requests_equal_their_solo_runs(other_family)


def test_eight_requests_equal_their_solo_runs_in_float64(model64):
    _eight_requests_equal_their_solo_runs(model64)


def _eight_requests_equal_their_solo_runs(model):
    asked = _mix(top_n=VOCAB)
    scheduler = Scheduler(model, asked, n_blocks=64, block_tokens=B, token_budget=BUDGET)
    events = _run(scheduler)
    steps, stops = _by_request(events, StepDone), _by_request(events, Stopped)
    for index, request in enumerate(asked):
        assert len(stops[index]) == 1
        _assert_solo(model, request, steps[index], stops[index][0])
    # 3 and 6 took SYSTEM's two blocks from 1 rather than reading them
    tables = {}
    for report in (e for e in events if isinstance(e, BlocksReport)):
        for index, table in report.per_request.items():
            tables.setdefault(index, table)
    assert tables[3][:2] == tables[6][:2] == tables[1][:2]
    assert max(e.shared for e in events if isinstance(e, BlocksReport)) == 2
    chunks = [e for e in events if isinstance(e, ScheduleDone)]
    reads = {i: [c.prefill_chunks[i] for c in chunks if i in c.prefill_chunks] for i in (3, 4, 6)}
    assert sum(reads[3]) == 2 and sum(reads[6]) == len(asked[6].prompt) - 2 * B  # the rest of their prompts
    assert len(reads[4]) > 2 and sum(reads[4]) == len(LONG)  # the long prompt in several chunks
    assert all(c.tokens_in_pass <= BUDGET for c in chunks)
    # every block back, the prefix table empty
    pool = scheduler.pool
    assert pool.n_free == pool.n_blocks and pool.used_bytes == 0 and not pool.prefix and not any(pool.refs)


def test_shared_block_is_freed_only_with_its_last_user(model):
    short = _settings(0, 4, 20, greedy=True)  # finishes at step 3, as 2 joins
    asked = [BatchRequest(SYSTEM + [1], short, 0), BatchRequest(SYSTEM + [2, 3], _settings(1, 9, 20), 2),
             BatchRequest(SYSTEM + [4], _settings(2, 5, 20), 3)]
    scheduler = Scheduler(model, asked, n_blocks=12, block_tokens=B)
    shared, users_seen = None, []
    while not scheduler.done:
        scheduler.step()
        _check_pool(scheduler)
        running = [r for r in scheduler.requests if r.state == "running"]
        if shared is None and running:
            shared = running[0].source.table[:2]
        users = [r.index for r in running if r.source.table[:2] == shared]
        users_seen.append(users)
        for block in shared:  # in use exactly while someone uses it
            assert (block in scheduler.pool.free) == (not users)
    assert [0] in users_seen and [0, 1] in users_seen and [1, 2] in users_seen and [1] in users_seen
    assert users_seen[-1] == []


def test_a_request_waits_while_the_pool_is_full_then_runs(model):
    asked = [BatchRequest(list(range(20, 50)), _settings(1, 10, VOCAB, temperature=1.0), 0),  # 3 blocks
             BatchRequest(list(range(60, 80)), _settings(2, 8, VOCAB, temperature=0.9), 0)]  # 2 blocks
    scheduler = Scheduler(model, asked, n_blocks=4, block_tokens=B)
    events = _run(scheduler)
    schedules = [e for e in events if isinstance(e, ScheduleDone)]
    assert "the pool is full" in schedules[0].waiting[1]
    first_stop = next(i for i, e in enumerate(events) if isinstance(e, Stopped))
    assert not any(isinstance(e, PrefillDone) and e.request == 1 for e in events[:first_stop])
    steps, stops = _by_request(events, StepDone), _by_request(events, Stopped)
    for index, request in enumerate(asked):
        _assert_solo(model, request, steps[index], stops[index][0])
    assert scheduler.pool.n_free == 4


def test_requests_leave_at_their_own_stops(model, monkeypatch):
    """With one token in seven an end of sequence, requests stop early at different steps (one may stop at a
    stop string); each leaves with its blocks given back and each equals its solo run."""
    monkeypatch.setattr(model, "config", dataclasses.replace(model.config, eos_ids=tuple(range(0, VOCAB, 7))))
    asked = [BatchRequest([i + 1, 2 * i + 5, 40], _settings(i, 30, VOCAB, temperature=1.0), i % 3) for i in range(6)]
    asked.append(BatchRequest([9, 8, 7], dataclasses.replace(_settings(7, 30, VOCAB, temperature=1.0),
                                                             stop_strings=("a", "e", "t")), 0))
    scheduler = Scheduler(model, asked, n_blocks=64, block_tokens=B, token_budget=BUDGET)
    events = _run(scheduler)
    steps, stops = _by_request(events, StepDone), _by_request(events, Stopped)
    for index, request in enumerate(asked):
        _assert_solo(model, request, steps[index], stops[index][0])
    assert "eos" in {stops[i][0].reason for i in stops} and len({stops[i][0].n_generated for i in stops}) > 2
    assert scheduler.pool.n_free == scheduler.pool.n_blocks


def test_a_request_stops_when_its_context_window_is_full(model):
    window = model.config.context_length
    asked = [BatchRequest(LONG + LONG[:window - 100 - 3], _settings(9, 20, VOCAB, greedy=True), 0),
             BatchRequest([4, 5, 6], _settings(1, 8, VOCAB, temperature=1.0), 1)]
    scheduler = Scheduler(model, asked, n_blocks=16, block_tokens=B, token_budget=BUDGET)
    events = _run(scheduler)
    steps, stops = _by_request(events, StepDone), _by_request(events, Stopped)
    for index, request in enumerate(asked):
        _assert_solo(model, request, steps[index], stops[index][0])
    assert stops[0][0].reason == "context_full" and stops[0][0].n_generated == 3


def test_batch_full_waits_and_events_serialise(model):
    asked = [BatchRequest([10 + i, 20, 30], _settings(i, 3, 5), 0) for i in range(3)]
    scheduler = Scheduler(model, asked, n_blocks=8, block_tokens=4, max_running=2)
    events = _run(scheduler)
    assert "the batch is full" in next(e for e in events if isinstance(e, ScheduleDone)).waiting[2]
    lines = [json.loads(e.to_json()) for e in events]
    assert {line["type"] for line in lines} == {"schedule", "blocks", "prefill", "step", "stop", "request_done"}
    assert all("request" in line for line in lines if line["type"] in ("prefill", "step", "stop"))
    assert [line["request"] for line in lines if line["type"] == "stop"] == [0, 1, 2]


def test_refusals(model):
    with pytest.raises(ValueError, match="may need 3 blocks"):
        Scheduler(model, [BatchRequest(list(range(30)), _settings(0, 5, 5))], n_blocks=2, block_tokens=B)
    with pytest.raises(ValueError, match="token budget"):
        Scheduler(model, [], n_blocks=2, token_budget=0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Scheduler(model, [BatchRequest([1, VOCAB])], n_blocks=4)
    with pytest.raises(ValueError, match="neither speculates"):
        Scheduler(model, [BatchRequest([1, 2], GenerationSettings(speculate=2))], n_blocks=4)


def test_paged_view_reads_back_what_it_wrote():
    pool = BlockPool(n_layers=2, n_kv_heads=2, head_dim=3, n_blocks=6, dtype=torch.float32, block_tokens=4)
    table = [pool.allocate() for _ in range(3)][::-1]  # blocks out of order: the table says where each lives
    kv = torch.randn(10, 2, 2, 3)
    view = PagedView(pool, table)
    view.write(1, 0, kv[:7])
    keys, values = view.write(1, 7, kv[7:])
    assert torch.equal(keys, kv[:, 0].permute(1, 0, 2)) and torch.equal(values, kv[:, 1].permute(1, 0, 2))
    pool.share(table[:1])
    with pytest.raises(RuntimeError, match="shared"):
        view.write(1, 2, kv[:1])


@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 2), min_size=1, max_size=4), st.integers(0, 5)),
                max_size=30))
def test_block_pool_invariants(moves):
    """Requests start (their prompts' blocks drawn from 3 kinds, so prefixes repeat) and finish in any order:
    reference counts equal the tables holding each block, free blocks are exactly the unreferenced ones, the
    prefix table names only blocks in use, and everything comes back."""
    block_tokens = 2
    pool = BlockPool(n_layers=1, n_kv_heads=1, head_dim=1, n_blocks=12, dtype=torch.float32, block_tokens=block_tokens)
    tables: list[list[int]] = []
    for start, kinds, which in moves:
        if start:
            prompt = [t for k in kinds for t in (k, k)]
            hashes = prefix_hashes(prompt, block_tokens)
            shared = pool.cached_prefix(hashes)
            if pool.n_free < len(hashes) - len(shared):
                continue
            pool.share(shared)
            table = shared + [pool.allocate() for _ in hashes[len(shared):]]
            for h, block in zip(hashes, table):
                pool.publish(h, block)
            tables.append(table)
        elif tables:
            pool.release(tables.pop(which % len(tables)))
        counts = [sum(t.count(b) for t in tables) for b in range(pool.n_blocks)]
        assert counts == pool.refs
        assert sorted(pool.free) == [b for b in range(pool.n_blocks) if counts[b] == 0]
        assert all(pool.refs[b] > 0 and pool.hash_of[b] == h for h, b in pool.prefix.items())
        assert pool.used_bytes == pool.n_used * pool.block_bytes
    for table in tables:
        pool.release(table)
    assert pool.n_free == pool.n_blocks and not pool.prefix


def test_default_model_requests_equal_solo_runs(default_model):
    model = _no_eos(dataclasses.replace(default_model))
    assert model.decoder.prefill_weights is None  # float32 throughout, as the batch reads it
    encode, vocab = model.tokenizer.encode, model.config.vocab
    prefix = encode("You are a helpful assistant. Answer in one short sentence, and be kind. "
                    "The user asks about the capital cities of Europe and their rivers.")  # 29 tokens
    asked = [BatchRequest(prefix + encode(" The capital of France is"), _settings(1, 4, vocab), 0),
             BatchRequest(prefix + encode(" Name a river in Germany:"), _settings(2, 4, vocab, greedy=True), 1),
             BatchRequest(encode("Once upon a time"), _settings(3, 5, vocab, temperature=0.7), 1)]
    scheduler = Scheduler(model, asked, n_blocks=16, block_tokens=B, token_budget=32)
    events = _run(scheduler)
    steps, stops = _by_request(events, StepDone), _by_request(events, Stopped)
    for index, request in enumerate(asked):
        _assert_solo(model, request, steps[index], stops[index][0])
    assert max(e.shared for e in events if isinstance(e, BlocksReport)) == 1  # the prefix's one full block
    assert scheduler.pool.n_free == scheduler.pool.n_blocks


def test_decode_rows_attend_over_their_blocks_in_one_call(model, monkeypatch):
    """The fused decode's families on float32 run a whole pass, every layer and every request's rows, in one
    decode_rows call over the blocks where they lie; where the kernels run only a model's attention (no soft-cap, no
    sliding window), a pass's decode rows attend in one attend_paged call a layer; Gemma 2's capped, windowed layers
    take the per-request route. Either way each request equals its solo run (the tests above)."""
    kernels = model.decoder.block.kernels
    if kernels is None:
        pytest.skip("the own kernels do not run on this machine")
    rows_per_call = {"decode_rows": [], "attend_paged": []}

    class Counting:
        def __getattr__(self, name):
            return getattr(kernels, name)

        def attend_paged(self, qkv, *rest):
            rows_per_call["attend_paged"].append(qkv.shape[0])
            return kernels.attend_paged(qkv, *rest)

        def decode_rows(self, x, *rest):
            rows_per_call["decode_rows"].append(x.shape[0])
            return kernels.decode_rows(x, *rest)

    monkeypatch.setattr(model.decoder.block, "kernels", Counting())
    asked = [BatchRequest(list(range(3 + i, 20 + 3 * i)), _settings(i, 6, 20, greedy=True)) for i in range(3)]
    steps = _by_request(_run(Scheduler(model, asked, n_blocks=16, block_tokens=B)), StepDone)
    assert all(len(steps[i]) == 6 for i in range(3))
    c = model.config
    if model.decoder.takes_rows(2):
        assert max(rows_per_call["decode_rows"]) == 3 and rows_per_call["attend_paged"] == []
    elif c.attn_softcap is not None or any(c.window_of(i) for i in range(c.n_layers)):
        assert rows_per_call == {"decode_rows": [], "attend_paged": []}
    else:
        assert max(rows_per_call["attend_paged"]) == 3 and len(rows_per_call["attend_paged"]) % c.n_layers == 0
