"""A server's top-N with a tail it did not send (session/server_tail.py): p_temp at T = 1 is p_raw exactly, the
bounds at T != 1 and on p_final hold the whole vocabulary's values, and a top-p that reaches into the tail is cut
visibly (a `server_cap` stage, the tail's share in the step's `server`), never drawn from silently."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from fake_servers import V, Fake, model_logprobs, tokenizer_folder, top, vllm_routes
from inference.events import ServerNote
from inference.session.sampling import distribution
from inference.session.server_tail import server_distribution, tail_tempered
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model

SETTINGS = [SamplerSettings(temperature=1.0, top_k=0), SamplerSettings(temperature=1.0, top_k=50, top_p=0.9),
            SamplerSettings(temperature=0.7, top_k=0), SamplerSettings(temperature=1.5, top_k=0, top_p=0.95),
            SamplerSettings(temperature=1.3, top_k=30, top_p=0.9), SamplerSettings(temperature=0.5, top_k=0, min_p=0.05),
            SamplerSettings(temperature=2.0, top_k=0, min_p=0.02), SamplerSettings(temperature=0.8, top_k=10, top_p=0.5),
            SamplerSettings(temperature=1.0, top_k=0, top_p=0.6, min_p=0.1)]


def served_top(lp: np.ndarray, n: int) -> tuple[torch.Tensor, ServerNote]:
    """What a server sends of the log-distribution `lp`: its top n, -inf elsewhere, and the tail's note."""
    ids = np.argsort(-lp, kind="stable")[:n]
    logits = torch.full((lp.size,), -math.inf, dtype=torch.float64)
    logits[torch.from_numpy(ids)] = torch.from_numpy(lp[ids])
    tail = 1.0 - float(np.exp(lp[ids]).sum())
    return logits, ServerNote(n_top=n, tail_p=max(0.0, tail), tail_count=lp.size - n)


def whole_vocabulary(rng, vocab: int, spread: float, skew: bool) -> np.ndarray:
    logits = rng.normal(size=vocab) * spread
    if skew:  # a long flat tail under a few likely tokens, as a language model's
        logits[rng.choice(vocab, 5, replace=False)] += 6.0
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def test_tail_tempered_holds_every_tail_that_fits_the_note():
    rng = np.random.default_rng(0)
    for _ in range(200):
        count, p_min = int(rng.integers(1, 40)), float(rng.uniform(0.001, 0.05))
        tail = rng.uniform(0, p_min, size=count)  # any tail: each at most p_min
        a = float(rng.choice([0.3, 0.7, 1.0, 1.4, 3.0]))
        low, high = tail_tempered(float(tail.sum()), count, p_min, a)
        truth = float(((tail / p_min) ** a).sum())
        assert low * (1 - 1e-9) <= truth <= high * (1 + 1e-9), (a, low, truth, high)
    assert tail_tempered(0.3, 10, 0.1, 1.0) == pytest.approx((3.0, 3.0))  # T = 1: the tail's mass itself


@pytest.mark.parametrize("s", SETTINGS, ids=str)
def test_bounds_hold_the_whole_vocabularys_values(s):
    rng = np.random.default_rng(hash(str(s)) % 2 ** 32)
    for trial in range(30):
        lp = whole_vocabulary(rng, 300, float(rng.uniform(0.5, 3.0)), skew=trial % 2 == 0)
        n = int(rng.choice([5, 20, 40]))
        logits, note = served_top(lp, n)
        got = server_distribution(logits, note, s)
        truth = distribution(torch.from_numpy(lp), s)  # the sampler over the whole vocabulary
        listed = torch.nonzero(torch.isfinite(logits)).flatten()
        assert torch.equal(got.p_raw[listed], torch.exp(logits[listed]))  # the server's own p, not renormalised
        b = got.bounds
        for name, low, high in (("p_temp", b.p_temp_low, b.p_temp_high), ("p_final", b.p_final_low, b.p_final_high)):
            true = getattr(truth, name)[listed]
            assert bool((low[listed] <= true + 1e-12).all() and (true <= high[listed] + 1e-12).all()), \
                (name, trial, n, (low[listed] - true).max(), (true - high[listed]).max())
        assert b.p_temp_low[listed].le(got.p_temp[listed] + 1e-12).all()
        assert got.p_temp[listed].le(b.p_temp_high[listed] + 1e-12).all()
        true_tail = 1.0 - float(truth.p_final[listed].sum())  # the whole vocabulary's final mass off the list
        assert b.tail_final[1] - 1e-12 <= true_tail <= b.tail_final[2] + 1e-12
        assert float(got.p_final.sum()) == pytest.approx(1.0, abs=1e-12)  # what the draw used: the listed only
        assert set(got.kept_ids.tolist()) <= set(listed.tolist())
        cut = [st for st in got.stages if st.name == "server_cap"]
        assert bool(cut) == (b.tail_final[0] > 0)


def test_at_temperature_one_p_temp_is_p_raw_exactly_and_without_a_tail_everything_is_exact():
    lp = whole_vocabulary(np.random.default_rng(3), 300, 2.0, skew=True)
    logits, note = served_top(lp, 20)
    for s in (SamplerSettings(greedy=True), SamplerSettings(temperature=1.0, top_k=0),
              SamplerSettings(temperature=1.0, top_k=5, top_p=0.5)):
        d = server_distribution(logits, note, s)
        assert torch.equal(d.p_temp, d.p_raw)
    s = SamplerSettings(temperature=0.6, top_k=10)  # top-k within the N: the tail is out, p_final exact
    d = server_distribution(logits, note, s)
    assert torch.allclose(d.bounds.p_final_low, d.p_final, atol=1e-12)
    assert torch.allclose(d.bounds.p_final_high, d.p_final, atol=1e-12)
    assert torch.allclose(d.p_final, distribution(torch.from_numpy(lp), s).p_final, atol=1e-12)
    assert float((d.bounds.p_temp_high - d.bounds.p_temp_low).max()) > 0  # but p_temp needs the tail


@pytest.fixture
def vllm20(tmp_path):
    """A fake vLLM that lists at most 20 log-probabilities (its --max-logprobs) and the model connected to it."""
    folder = tokenizer_folder(tmp_path)
    fake = Fake(vllm_routes(folder, cap=20))
    yield fake, load_model(fake.url, tokenizer=str(folder))
    fake.stop()


def whole_truth(context: list[int], s: SamplerSettings):
    return distribution(torch.from_numpy(model_logprobs(context)), s)


def test_a_server_step_reports_the_servers_p_and_t1_p_temp_equal_to_it(vllm20):
    fake, model = vllm20
    prompt = [70, 71, 72]
    for s in (SamplerSettings(greedy=True), SamplerSettings(temperature=1.0, top_k=0, top_p=0.9)):
        session = Session(model, GenerationSettings(sampler=s, max_new_tokens=3, seed=5))
        session.prefill(prompt)
        for event in (e for e in session.run() if hasattr(e, "token")):
            for c in json.loads(event.to_json())["candidates"]:
                assert abs(c["p_temp"] - c["p_raw"]) <= 1e-9  # the old code renormalised over the 20 listed
                assert c["p_raw"] == pytest.approx(math.exp(c["logit"]), abs=1e-12)


def test_at_another_temperature_the_event_carries_bounds_that_hold_the_truth(vllm20):
    fake, model = vllm20
    prompt = [70, 71, 72]
    s = SamplerSettings(temperature=1.4, top_k=0, top_p=0.9)
    session = Session(model, GenerationSettings(sampler=s, max_new_tokens=4, seed=2))
    session.prefill(prompt)
    context = list(prompt)
    for event in (e for e in session.run() if hasattr(e, "token")):
        truth = whole_truth(context, s)
        line = json.loads(event.to_json())
        for c in line["candidates"]:
            low, high = c["p_temp_bounds"]
            assert low <= float(truth.p_temp[c["id"]]) + 1e-12 and float(truth.p_temp[c["id"]]) <= high + 1e-12
            assert low < high and low <= c["p_temp"] <= high
            low, high = c["p_final_bounds"]
            assert low - 1e-12 <= float(truth.p_final[c["id"]]) <= high + 1e-12
        context.append(event.token.id)


def test_a_top_p_reaching_into_the_tail_is_cut_visibly_and_the_draw_stays_in_the_list(vllm20):
    fake, model = vllm20
    s = SamplerSettings(temperature=1.3, top_k=0, top_p=0.95)  # the issue's: the nucleus reaches past the 20
    session = Session(model, GenerationSettings(sampler=s, max_new_tokens=6, seed=1))
    prompt = [70, 71, 72]
    assert session.prefill(prompt).pending.server.n_top == 20  # widened, but the cap lists no more
    cut = 0
    for event in (e for e in session.run() if hasattr(e, "token")):
        line = json.loads(event.to_json())
        listed = {c["id"] for c in line["candidates"][:20]}
        assert event.token.id in listed  # drawn among the tokens the server listed
        share = line["server"]["tail_kept"]
        stages = {st["name"]: st for st in line["stages"]}
        assert 0 <= share["low"] <= share["high"] <= 1
        if share["removed"] > 0:
            cut += 1
            assert stages["server_cap"]["removed_mass"] == pytest.approx(share["removed"])
            assert share["low"] <= share["removed"] <= share["high"]
        assert sum(c["p_final"] for c in line["candidates"]) == pytest.approx(1.0, abs=1e-9)
    assert cut > 0


@pytest.mark.parametrize("temperature", [0.02, 0.2, 5.0, 50.0])
def test_far_apart_log_probabilities_at_extreme_temperatures_stay_finite_and_bounded(temperature):
    """A listed token 150 nats below the top at T 0.02 (a weight of e^-7500 relative to it), a tail of 1e-60: no
    overflow, no NaN, and the bounds still hold the whole vocabulary's values."""
    lp = np.concatenate([np.linspace(-0.01, -150.0, 20), np.full(280, -200.0)])
    lp = lp - np.log(np.exp(lp - lp.max()).sum()) - lp.max()
    logits, note = served_top(lp, 20)
    for s in (SamplerSettings(temperature=temperature, top_k=0), SamplerSettings(temperature=temperature, top_k=0,
                                                                                 top_p=0.99, min_p=0.001)):
        got = server_distribution(logits, note, s)
        truth = distribution(torch.from_numpy(lp), s)
        listed = torch.nonzero(torch.isfinite(logits)).flatten()
        b = got.bounds
        for t in (got.p_temp, got.p_final, b.p_temp_low, b.p_temp_high, b.p_final_low, b.p_final_high):
            assert bool(torch.isfinite(t).all())
        assert bool((b.p_temp_low[listed] <= truth.p_temp[listed] + 1e-12).all())
        assert bool((truth.p_temp[listed] <= b.p_temp_high[listed] + 1e-12).all())
        assert bool((b.p_final_low[listed] <= truth.p_final[listed] + 1e-12).all())
        assert bool((truth.p_final[listed] <= b.p_final_high[listed] + 1e-12).all())
        assert float(got.p_final.sum()) == pytest.approx(1.0)


def test_a_server_capped_below_top_n_lists_only_what_it_sent(tmp_path):
    """vLLM at --max-logprobs 5 with top-n 20: the candidates are the 5 listed tokens (the other 15 rows were -inf
    logits, and the trace's JSON refused them: 'Out of range float values'); a forced unlisted token's logit is null."""
    folder = tokenizer_folder(tmp_path)
    fake = Fake(vllm_routes(folder, cap=5))
    try:
        model = load_model(fake.url, tokenizer=str(folder))
        session = Session(model, GenerationSettings(sampler=SamplerSettings(temperature=0.9, top_k=0, top_p=0.9),
                                                    max_new_tokens=3, seed=2))
        session.prefill([70, 71, 72])
        event = next(e for e in session.step() if hasattr(e, "token"))
        line = json.loads(event.to_json())
        assert len(line["candidates"]) == 5 and all(c["logit"] is not None for c in line["candidates"])
        listed = top([70, 71, 72, event.token.id], 5)[0]
        unlisted = next(i for i in range(V) if i not in listed)
        forced = json.loads(next(e for e in session.force(unlisted) if hasattr(e, "token")).to_json())
        assert forced["candidates"][-1]["id"] == unlisted and forced["candidates"][-1]["logit"] is None
        assert forced["chosen_rank"] == 5 and forced["candidates"][-1]["p_raw"] == 0.0
    finally:
        fake.stop()
