"""Speculative sampling (issue 16) on a tiny random model in float64: with the same seed the same tokens as
without speculation; the accept/reject rule on hand-made distributions (P(accept) = p_final(t), a rejection's
token follows p_final without t, renormalised); and the joint distribution of the first two tokens over
20 000 seeds (chi-square against plain decoding's exact distribution)."""

import dataclasses
from collections import Counter

import pytest
import torch

from inference.session.sampling import distribution, draw
from inference.session.session import Session, draw_seed
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.local import LocalDecoder
from speculate_support import SAMPLED, _generate, _repeating_token, _same_steps, _steps, _verifies, llama  # noqa: F401
from tiny import VOCAB


def test_sampled_same_seed_same_tokens(llama):
    prompts = [_likely_draft_prompt(llama, SAMPLED), [_repeating_token(llama)] * 8]
    runs = [(SAMPLED, seed, prompt) for seed in range(10) for prompt in prompts] + \
        [(SamplerSettings(temperature=1.5, top_k=0, top_p=0.9, min_p=0.05), seed, prompts[0]) for seed in range(3)]
    accepted = 0
    for sampler, seed, prompt in runs:
        _, plain, _ = _generate(llama, prompt, 0, sampler, seed=seed)
        _, spec, _ = _generate(llama, prompt, 4, sampler, seed=seed)
        accepted += sum(v.accepted for v in _verifies(spec))
        for a, b in zip(_steps(plain), _steps(spec), strict=True):
            _same_steps(a, b)
            assert b.seed == seed and b.random_u == float(torch.rand(
                (), generator=torch.Generator().manual_seed(draw_seed(seed, b.index)), dtype=torch.float64))
    assert accepted > 0  # the draws agreed with drafts, and (more often) corrected them


# --- the accept/reject rule --------------------------------------------------------------------------
def _p_value(statistic: float, df: int) -> float:
    """P(X >= statistic) for X chi-square with df degrees of freedom (the regularised upper gamma)."""
    half = lambda x: torch.tensor(x / 2, dtype=torch.float64)  # noqa: E731
    return float(torch.special.gammaincc(half(df), half(statistic)))


def _pooled(cells: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """Cells (expected, observed...) with an expected count under 5 pooled into one, smallest first."""
    cells = sorted(cells)
    pool = [0.0] * len(cells[0])
    while cells and (cells[0][0] < 5 or 0 < pool[0] < 5):
        pool = [p + c for p, c in zip(pool, cells.pop(0))]
    return cells + ([tuple(pool)] if pool[0] > 0 else [])


def _goodness_of_fit_p(observed, expected) -> float:
    cells = _pooled(list(zip(expected, observed)))
    return _p_value(sum((o - e) ** 2 / e for e, o in cells), len(cells) - 1)


def test_p_value_matches_known_chi_square_quantiles():
    for statistic, df, p in ((3.841459, 1, 0.05), (11.0705, 5, 0.05), (6.634897, 1, 0.01), (24.72497, 11, 0.01)):
        assert abs(_p_value(statistic, df) - p) < 1e-5


HAND_MADE = [[0.5, 0.3, 0.15, 0.05], [0.05, 0.05, 0.2, 0.7], [0.25, 0.25, 0.25, 0.25], [0.9, 0.06, 0.03, 0.01]]


@pytest.mark.parametrize("probs", HAND_MADE)
@pytest.mark.parametrize("sampler", [SamplerSettings(top_k=0), SamplerSettings(top_k=3)], ids=["all", "top3"])
def test_accept_with_p_final_and_correct_from_the_rest(probs, sampler):
    """The rule the session applies to a draft token t: draw step k as always and keep t iff the draw is t.
    Then P(accept) = p_final(t), and a rejection's token follows p_final without t, renormalised."""
    dist = distribution(torch.log(torch.tensor(probs, dtype=torch.float64)), sampler)
    p = dist.p_final.tolist()
    n = 20_000
    draws = [draw(dist, torch.Generator().manual_seed(draw_seed(seed, 3)))[0] for seed in range(n)]
    for t in range(len(probs)):
        accepted = sum(d == t for d in draws)
        assert abs(accepted / n - p[t]) <= 5 * (p[t] * (1 - p[t]) / n) ** 0.5 + 1e-12
        rejected = Counter(d for d in draws if d != t)
        rest = [q if i != t else 0.0 for i, q in enumerate(p)]
        expected = [q / sum(rest) * (n - accepted) for q in rest]
        assert all(rejected[i] == 0 for i, e in enumerate(expected) if e == 0)
        kept = [i for i, e in enumerate(expected) if e > 0]
        if len(kept) > 1:
            assert _goodness_of_fit_p([rejected[i] for i in kept], [expected[i] for i in kept]) > 0.001


# --- the output distribution -------------------------------------------------------------------------
def _likely_draft_prompt(model, sampler) -> list[int]:
    """[a, b, c, a, b]: lookup drafts c, the c most likely next (so both accepts and rejects are common)."""
    a, b = 5, 77

    def p_c(c):
        fresh = LocalDecoder(model.decoder)
        fresh.start(5)
        return float(distribution(fresh.forward([a, b, c, a, b], 0), sampler).p_final[c])
    best = max(range(VOCAB), key=p_c)
    assert 0.2 < p_c(best) < 0.9
    return [a, b, best, a, b]


def _first_pairs(model, prompt, sampler, speculate, seeds) -> tuple[list[tuple[int, int]], int]:
    """The first two tokens drawn with each of `seeds`, and how many verify passes accepted a draft token."""
    settings = GenerationSettings(sampler, max_new_tokens=2, top_n=1, speculate=speculate)
    session = Session(model, settings)
    session.prefill(prompt)
    pairs, accepting = [], 0
    for seed in seeds:
        session.update_settings(dataclasses.replace(settings, seed=seed))
        session.reset()
        events = list(session.run())
        pairs.append(tuple(s.token.id for s in _steps(events)))
        accepting += sum(v.accepted > 0 for v in _verifies(events))
    return pairs, accepting


def test_speculation_keeps_the_joint_distribution_of_two_tokens(llama):
    """20 000 seeds: the first two tokens drawn with speculation follow the exact joint distribution of
    plain decoding, p(t1) p(t2 | t1) (chi-square); on 2 000 of the seeds plain decoding draws the very same
    pairs, so its empirical distribution is the same too."""
    sampler = SamplerSettings(temperature=1.0, top_k=4)
    prompt = _likely_draft_prompt(llama, sampler)
    n = 20_000
    spec, accepting = _first_pairs(llama, prompt, sampler, 4, range(n))
    assert 0.1 * n < accepting < 0.95 * n  # both rules ran often: acceptance and correction
    assert _first_pairs(llama, prompt, sampler, 0, range(2000))[0] == spec[:2000]
    fresh = LocalDecoder(llama.decoder)
    fresh.start(len(prompt) + 1)
    p1 = distribution(fresh.forward(prompt, 0), sampler).p_final
    p2 = {}
    for t1 in torch.nonzero(p1).flatten().tolist():
        fresh.crop(len(prompt))
        p2[t1] = distribution(fresh.forward([t1], len(prompt)), sampler).p_final
    cells = [(t1, t2) for t1 in sorted(p2) for t2 in torch.nonzero(p2[t1]).flatten().tolist()]
    counts = Counter(spec)
    assert set(counts) <= set(cells) and len(cells) >= 8

    def fits(first) -> float:  # the sample against p(t2 | t1) after a first token distributed as `first`
        return _goodness_of_fit_p([counts[c] for c in cells], [float(first[t1] * p2[t1][t2]) * n for t1, t2 in cells])
    assert fits(p1) > 0.001
    # the test has the power to see the classic mistake: a rejected draft redrawn from p_final with t kept in
    draft, q = prompt[2], p1.clone()
    q *= 1 - p1[draft]
    q[draft] += p1[draft]
    assert fits(q) < 1e-6
