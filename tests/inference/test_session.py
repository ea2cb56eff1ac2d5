"""Session behaviour: stop rules, reset and seeds, previews, and the KV numbers it reports."""

import pytest
import torch

from inference.events import Pending, StepDone, Stopped
from inference.store.loading import load_model
from inference.settings import SamplerSettings
from inference.errors import NotReady
from inference.session.session import GenerationEnded, Session
from inference.sources.local import LocalDecoder
from inference.settings import GenerationSettings
from tiny import make_hf_model, save_hf_model

PROMPT = [5, 77, 200, 31, 9]
SAMPLED = SamplerSettings(temperature=1.5, top_k=0)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    hf = make_hf_model("llama", seed=11)
    return load_model(save_hf_model(hf, tmp_path_factory.mktemp("m")), device="cpu")


def _tokens(events):
    return [e.token.id for e in events if isinstance(e, StepDone)]


@pytest.fixture()
def no_eos(model, monkeypatch):
    import dataclasses

    monkeypatch.setattr(model, "config", dataclasses.replace(model.config, eos_ids=()))
    return model


def test_max_new_tokens_and_kv_formula(no_eos):
    session = Session(no_eos, GenerationSettings(SAMPLED, max_new_tokens=7, seed=3))
    events = list(session.generate(PROMPT))
    prefill, steps, stop = events[0], events[1:-1], events[-1]
    per_token = no_eos.info().kv_bytes_per_token
    c = no_eos.config
    assert per_token == 2 * c.n_layers * c.n_kv_heads * c.head_dim * 4
    assert prefill.kv_used_bytes == len(PROMPT) * per_token
    assert [s.index for s in steps] == list(range(1, 8))
    for s in steps:
        assert s.kv_used_bytes == (len(PROMPT) + s.index - 1) * per_token
        assert s.position == len(PROMPT) + s.index - 1 and s.context_tokens == s.position + 1
        assert 0.0 <= s.random_u < 1.0 and s.dist.settings == SAMPLED
    assert steps[0].forward_ms == prefill.ms  # step 1 was drawn from the prefill's logits
    assert stop.reason == "max_new_tokens" and stop.n_generated == 7
    with pytest.raises(GenerationEnded):
        list(session.step())
    session.update_settings(GenerationSettings(SAMPLED, max_new_tokens=9, seed=3))
    more = list(session.run())  # a raised limit lets the same generation go on
    assert _tokens(more) and isinstance(more[-1], Stopped) and more[-1].n_generated == 9


def test_reset_reproduces_and_seed_changes(no_eos):
    session = Session(no_eos, GenerationSettings(SAMPLED, max_new_tokens=10, seed=42))
    first = _tokens(session.generate(PROMPT))
    session.reset()
    assert _tokens(session.run()) == first
    session.update_settings(GenerationSettings(SAMPLED, max_new_tokens=10, seed=43))
    session.reset()
    assert _tokens(session.run()) != first
    greedy = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=10, seed=1)
    a = _tokens(Session(no_eos, greedy).generate(PROMPT))
    b = _tokens(Session(no_eos, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=10,
                                                   seed=2)).generate(PROMPT))
    assert a == b


def test_each_step_is_computed_on_the_grown_prefix(no_eos):
    """The distribution of step k equals a fresh forward of prompt + the k-1 tokens drawn before it."""
    session = Session(no_eos, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=5, top_n=8))
    steps = [e for e in session.generate(PROMPT) if isinstance(e, StepDone)]
    decoder = no_eos.decoder
    for k, step in enumerate(steps):
        context = PROMPT + [s.token.id for s in steps[:k]]
        with torch.inference_mode():
            logits = decoder.forward(torch.tensor(context), 0, decoder.new_cache(32))[0]
        assert torch.allclose(torch.from_numpy(step.dist.candidates.logits).float(),
                              logits[torch.from_numpy(step.dist.candidates.ids)], atol=1e-5)
        assert step.token.id == int(torch.argmax(logits))


def test_stop_string_split_across_tokens(no_eos):
    settings = GenerationSettings(SAMPLED, max_new_tokens=24, seed=5)
    free = list(Session(no_eos, settings).generate(PROMPT))
    text = free[-1].text
    steps = [e for e in free if isinstance(e, StepDone)]
    # a stop string made of the end of one token's text and the start of the next one's
    stop = None
    for a, b in zip(steps[2:], steps[3:]):
        candidate = a.token.text[-1:] + b.token.text[:1]
        if len(candidate) == 2 and "\ufffd" not in candidate:
            stop = candidate
            break
    assert stop is not None
    first = text.find(stop)
    events = list(Session(no_eos, GenerationSettings(SAMPLED, max_new_tokens=24, seed=5,
                                                     stop_strings=(stop,))).generate(PROMPT))
    end = events[-1]
    assert end.reason == "stop_string" and end.stop_string == stop
    assert end.text == text[:first] and stop not in end.text
    last_step = [e for e in events if isinstance(e, StepDone)][-1]
    assert last_step.stop_progress == (len(stop),)


def test_context_full(no_eos):
    window = no_eos.config.context_length
    prompt = (PROMPT * 40)[: window - 3]
    events = list(Session(no_eos, GenerationSettings(SAMPLED, max_new_tokens=50)).generate(prompt))
    assert events[-1].reason == "context_full" and events[-1].n_generated == 3
    assert events[-2].context_tokens == window
    with pytest.raises(ValueError, match="context window"):
        Session(no_eos).prefill(PROMPT * 40)


def test_abort_between_steps(no_eos):
    session = Session(no_eos, GenerationSettings(SAMPLED, max_new_tokens=50))
    session.prefill(PROMPT)
    seen = []
    for event in session.run():
        seen.append(event)
        if len(seen) == 3:
            session.abort()
    assert isinstance(seen[-1], Stopped) and seen[-1].reason == "aborted" and seen[-1].n_generated == 3
    assert len(_tokens(session.run())) > 0  # after an abort, stepping goes on from where it was


class CertainEos(LocalDecoder):
    """The model's own source, except that every distribution puts all its mass on EOS."""

    def __init__(self, decoder, eos: int):
        super().__init__(decoder)
        self.eos = eos

    def forward(self, ids, start, capture=None):
        logits = super().forward(ids, start, capture)
        certain = torch.full_like(logits, -1e9)
        certain[self.eos] = 10.0
        return certain


def test_eos_stops(model):
    eos = model.config.eos_ids[0]
    session = Session(model, GenerationSettings(SAMPLED, max_new_tokens=5), source=CertainEos(model.decoder, eos))
    session.prefill(PROMPT)
    events = list(session.step())
    assert events[-1].reason == "eos" and events[0].token.id == eos and events[0].token.special
    assert events[-1].text == ""


def test_preview_runs_no_forward_and_follows_settings(no_eos):
    session = Session(no_eos, GenerationSettings(SamplerSettings(temperature=1.0, top_k=0), max_new_tokens=5))
    session.prefill(PROMPT)
    count = session.forward_count
    hot = session.preview(SamplerSettings(temperature=3.0, top_k=0))
    cold = session.preview(SamplerSettings(temperature=0.3, top_k=0))
    assert session.forward_count == count
    assert isinstance(hot, Pending) and hot.index == 1
    assert hot.dist.candidates.p_temp[0] < cold.dist.candidates.p_temp[0]
    assert (hot.dist.candidates.p_raw == cold.dist.candidates.p_raw).all()


def test_bad_prompts(model):
    session = Session(model)
    with pytest.raises(ValueError, match="empty"):
        session.prefill([])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        session.prefill([model.config.vocab + 1])
    with pytest.raises(NotReady, match="prefill"):
        list(Session(model).step())


def test_attention_capture_rows_sum_to_one(no_eos):
    session = Session(no_eos, GenerationSettings(SAMPLED, max_new_tokens=3), capture_attention=True)
    events = list(session.generate(PROMPT))
    c = no_eos.config
    assert events[0].attention.shape == (c.n_layers, c.n_heads, len(PROMPT))
    step2 = events[2]
    assert step2.attention.shape == (c.n_layers, c.n_heads, len(PROMPT) + 1)
    assert abs(step2.attention.sum(-1) - 1).max() < 1e-5


def test_long_prompt_prefills_in_chunks_with_progress(no_eos, monkeypatch):
    import inference.session.session as session_module

    prompt = (PROMPT * 30)[:100]
    whole = Session(no_eos, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=4))
    expected = [e.token.id for e in whole.generate(prompt) if isinstance(e, StepDone)]
    monkeypatch.setattr(session_module, "PREFILL_CHUNK", 32)
    seen = []
    chunked = Session(no_eos, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=4))
    chunked.prefill(prompt, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert seen == [("prefill", 32, 100), ("prefill", 64, 100), ("prefill", 96, 100), ("prefill", 100, 100)]
    assert [e.token.id for e in chunked.run() if isinstance(e, StepDone)] == expected
    whole.reset()
    chunked.reset()
    assert torch.allclose(chunked.pending_logits, whole.pending_logits, atol=1e-5)


def test_chosen_rank_and_entropy_match_the_full_vocabulary(no_eos):
    """Both are computed with shortcuts (from the top-N candidates, from one dot product)."""
    from inference.session.sampling import entropy

    settings = GenerationSettings(SamplerSettings(temperature=2.0, top_k=0), max_new_tokens=40, seed=5,
                                  top_n=3)
    session = Session(no_eos, settings)
    session.prefill(PROMPT)
    steps, logits = [], []
    while session.stopped is None:
        logits.append(session.pending_logits)
        steps += [e for e in session.step() if isinstance(e, StepDone)]
    ranks = [int((lg > lg[s.token.id]).sum()) for s, lg in zip(steps, logits)]
    assert [s.chosen_rank for s in steps] == ranks
    assert any(r >= 3 for r in ranks) and any(r < 3 for r in ranks)  # both paths ran
    for s, lg in zip(steps, logits):
        assert abs(s.entropy - entropy(torch.softmax(lg.double(), 0))) < 1e-9
