"""Decoding without a KV cache: every pass re-reads the whole prefix; the logits equal the cached ones."""

import dataclasses

import pytest
import torch

from inference.events import StepDone
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.local import LocalDecoder
from inference.sources.nocache import fresh_source
from tiny import ARCHITECTURES, make_hf_model, save_hf_model

PROMPTS = ([5, 77, 200, 31, 9], [100, 101, 102], list(range(40, 60)))
SAMPLED = SamplerSettings(temperature=1.3, top_k=0)


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def model(request, tmp_path_factory):
    m = load_model(save_hf_model(make_hf_model(request.param, seed=9), tmp_path_factory.mktemp(request.param)),
                   device="cpu", dtype="float32")
    return dataclasses.replace(m, config=dataclasses.replace(m.config, eos_ids=()))


def _run(model, ids, kv_cache, settings):
    session = Session(model, settings)
    session.use_kv_cache(kv_cache)
    session.prefill(ids)
    logits = [session.pending_logits.clone()]
    steps = []
    for _ in range(settings.max_new_tokens - 1):
        steps += [e for e in session.step() if isinstance(e, StepDone)]
        logits.append(session.pending_logits.clone())
    return steps, torch.stack(logits), session


@pytest.mark.parametrize("prompt", PROMPTS)
def test_same_tokens_and_logits_without_the_cache(model, prompt):
    settings = GenerationSettings(SAMPLED, max_new_tokens=12, seed=4)
    cached, cached_logits, _ = _run(model, prompt, True, settings)
    count = model.decoder.forward_count
    plain, plain_logits, session = _run(model, prompt, False, settings)
    assert [s.token.id for s in plain] == [s.token.id for s in cached]
    assert (plain_logits - cached_logits).abs().max().item() <= 1e-4  # float32, two different paths
    assert model.decoder.forward_count - count == 12  # a pass per step, each over the whole prefix
    assert all(s.kv_used_bytes == 0 for s in plain) and session.source.kv_allocated_bytes == 0


def test_switching_mid_generation_and_moves(model):
    settings = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=16, speculate=3)
    reference, _, _ = _run(model, PROMPTS[2], True, dataclasses.replace(settings, speculate=0, max_new_tokens=20))
    session = Session(model, settings)
    session.prefill(PROMPTS[2])
    ids = []
    for turn in range(6):
        session.use_kv_cache(turn % 2 == 1)  # off, on, off, ... between steps
        ids += [e.token.id for e in session.step() if isinstance(e, StepDone)]
    assert ids == [s.token.id for s in reference][:len(ids)]
    session.rewind(2)
    session.use_kv_cache(True)
    again = [e.token.id for e in session.step() if isinstance(e, StepDone)]
    assert again == ids[1:1 + len(again)]


def test_a_local_model_and_its_sources_say_what_they_can_do(model):
    assert not model.remote
    source = model.logits_source()
    assert isinstance(source, LocalDecoder) and not source.remote
    source.start(8)
    logits = source.forward([1, 2, 3], 0)
    assert source.note_of(logits) is None  # logits computed here: nothing left out, nothing to widen
    assert source.widen(logits, SamplerSettings(temperature=2.0), [1, 2, 3]) is logits
    uncached = fresh_source(model.decoder, False, [1, 2, 3], 8)
    assert not uncached.remote and uncached.kv_used_bytes == 0 and uncached.note_of(logits) is None
