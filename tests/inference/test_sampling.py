"""Properties of the sampler, over random logits and settings."""

import numpy as np
import torch
from hypothesis import assume, given, strategies as st

from inference.session.sampling import distribution, draw, entropy, top_k_ids
from inference.settings import SamplerSettings

logits_strategy = st.lists(st.floats(-30, 30, allow_nan=False, width=32), min_size=2, max_size=300).map(
    lambda xs: torch.tensor(xs, dtype=torch.float32))
settings_strategy = st.builds(
    SamplerSettings,
    temperature=st.floats(0.05, 5.0),
    top_k=st.integers(0, 400),
    top_p=st.floats(0.01, 1.0),
    min_p=st.floats(0.0, 1.0))


def _kept(p):
    return set(torch.nonzero(p > 0).flatten().tolist())


@given(logits_strategy, settings_strategy)
def test_p_final_is_a_distribution_and_stages_shrink(logits, s):
    d = distribution(logits, s)
    assert abs(float(d.p_final.sum()) - 1.0) < 1e-9
    assert abs(float(d.p_raw.sum()) - 1.0) < 1e-9 and abs(float(d.p_temp.sum()) - 1.0) < 1e-9
    kept_counts = [stage.kept for stage in d.stages]
    assert [stage.name for stage in d.stages] == ["temperature", "top_k", "top_p", "min_p"]
    assert kept_counts == sorted(kept_counts, reverse=True)
    assert kept_counts[-1] == len(_kept(d.p_final)) >= 1
    assert all(0.0 <= stage.removed_mass <= 1.0 for stage in d.stages)


@given(logits_strategy, settings_strategy)
def test_kept_sets_are_nested_stage_by_stage(logits, s):
    """Each stage keeps a subset of what the previous one kept (checked by re-running the prefix)."""
    none = SamplerSettings(s.temperature, 0, 1.0, 0.0)
    after_k = SamplerSettings(s.temperature, s.top_k, 1.0, 0.0)
    after_p = SamplerSettings(s.temperature, s.top_k, s.top_p, 0.0)
    sets = [_kept(distribution(logits, x).p_final) for x in (none, after_k, after_p, s)]
    for earlier, later in zip(sets, sets[1:]):
        assert later <= earlier


@given(logits_strategy, st.integers(1, 400))
def test_top_k_keeps_at_most_k_highest(logits, k):
    d = distribution(logits, SamplerSettings(1.0, k, 1.0, 0.0))
    kept = _kept(d.p_final)
    assert len(kept) <= k
    if kept:
        lowest_kept = min(float(logits[i]) for i in kept)
        dropped = [float(logits[i]) for i in range(len(logits)) if i not in kept and d.p_temp[i] > 0]
        assert all(x <= lowest_kept for x in dropped)
    assert len(top_k_ids(logits.double(), min(k, len(logits)))) == min(k, len(logits))


@given(logits_strategy, st.floats(0.01, 0.999))
def test_top_p_keeps_the_smallest_prefix_reaching_p(logits, top_p):
    d = distribution(logits, SamplerSettings(1.0, 0, top_p, 0.0))
    p = d.p_temp.numpy()
    order = np.lexsort((np.arange(len(p)), -p))  # descending p, ties by id
    kept = _kept(d.p_final)
    n = len(kept)
    assert kept == set(order[:n].tolist())
    mass = p[order[:n]].sum()
    assert mass >= top_p - 1e-9 or n == int((p > 0).sum())
    assert n == 1 or p[order[:n - 1]].sum() < top_p + 1e-9  # one fewer would not reach p


@given(logits_strategy, st.floats(0.0, 1.0))
def test_min_p_keeps_tokens_at_least_min_p_times_the_max(logits, min_p):
    d = distribution(logits, SamplerSettings(1.0, 0, 1.0, min_p))
    p = d.p_temp.numpy()
    expected = set(np.nonzero(p >= min_p * p.max())[0].tolist())
    assert _kept(d.p_final) == expected


@given(logits_strategy, settings_strategy, st.integers(0, 2**31 - 1))
def test_same_seed_same_draws(logits, s, seed):
    d = distribution(logits, s)
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(seed)
        runs.append([draw(d, g) for _ in range(5)])
    assert runs[0] == runs[1]
    for token, u in runs[0]:
        assert d.p_final[token] > 0 and 0.0 <= u < 1.0


@given(logits_strategy, st.integers(0, 1000))
def test_draw_reads_u_against_the_descending_cdf(logits, seed):
    d = distribution(logits, SamplerSettings(1.3, 0, 0.9, 0.0))
    token, u = draw(d, torch.Generator().manual_seed(seed))
    cdf = d.kept_cdf.numpy()
    index = d.kept_ids.tolist().index(token)
    assert u < cdf[index] + 1e-12 and (index == 0 or u >= cdf[index - 1] - 1e-12)


@given(logits_strategy)
def test_temperature_to_zero_gives_argmax(logits):
    top2 = torch.topk(logits, 2).values
    assume(float(top2[0] - top2[1]) > 1e-3)
    best = int(torch.argmax(logits))
    d = distribution(logits, SamplerSettings(temperature=1e-4, top_k=0))
    assert draw(d, torch.Generator().manual_seed(1))[0] == best
    greedy = distribution(logits, SamplerSettings(temperature=0.0))
    assert greedy.greedy and draw(greedy, torch.Generator())[0] == best
    assert greedy.p_final[best] == 1.0 and float(greedy.p_final.sum()) == 1.0


def test_entropy_of_uniform_and_one_hot():
    assert abs(entropy(torch.full((8,), 1 / 8, dtype=torch.float64)) - np.log(8)) < 1e-12
    assert entropy(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)) == 0.0


def test_invalid_settings_are_refused():
    import pytest

    for bad in (SamplerSettings(temperature=-1), SamplerSettings(top_k=-1), SamplerSettings(top_p=0.0),
                SamplerSettings(top_p=1.5), SamplerSettings(min_p=2.0)):
        with pytest.raises(ValueError):
            bad.validate()


def test_sampling_never_changes_the_logits():
    logits = torch.randn(100)
    before = logits.clone()
    d = distribution(logits, SamplerSettings(0.7, 10, 0.9, 0.05))
    draw(d, torch.Generator().manual_seed(0))
    assert torch.equal(logits, before)


@given(logits_strategy)
def test_entropy_from_logits_equals_the_direct_sum(logits):
    d = distribution(logits, SamplerSettings(greedy=True))
    assert abs(d.entropy - entropy(d.p_raw)) < 1e-9
    masked = logits.double().clone()
    masked[0] = float("-inf")
    assume(bool(torch.isfinite(masked).any()))
    d = distribution(masked, SamplerSettings(temperature=0.7, top_k=0))
    assert abs(d.entropy - entropy(d.p_raw)) < 1e-9


@given(logits_strategy, st.sampled_from([1e-320, 5e-324, 1e-300, 1e-30]), st.integers(0, 400))
def test_vanishing_temperature_is_the_argmax_limit_not_nan(logits, temperature, top_k):
    """logits / 1e-320 overflows to inf; the sampler must still give a distribution, all mass on the best
    score (shared equally by exact ties), and draw the best. Only where the temperature is vanishing next to
    the gap between the two best logits: at T = 1e-30 a gap of 1e-41 (subnormal float32 logits) is still a
    fair coin, which the sampler rightly draws as one."""
    values = sorted(set(logits.tolist()), reverse=True)
    assume(len(values) == 1 or (values[0] - values[1]) / temperature > 750)  # exp(-750) underflows
    d = distribution(logits, SamplerSettings(temperature=temperature, top_k=top_k))
    assert torch.isfinite(d.p_final).all() and abs(float(d.p_final.sum()) - 1.0) < 1e-9
    best = float(logits.max())
    assert set(torch.nonzero(d.p_final).flatten().tolist()) <= set(torch.nonzero(logits == best).flatten().tolist())
    assert float(logits[draw(d, torch.Generator().manual_seed(3))[0]]) == best


def test_logits_that_are_not_numbers_are_one_clear_error():
    import pytest

    for bad in (torch.tensor([1.0, float("nan"), 2.0]), torch.full((4,), float("-inf"))):
        for s in (SamplerSettings(), SamplerSettings(greedy=True)):
            with pytest.raises(ValueError, match="not numbers"):
                distribution(bad, s)
    ok = distribution(torch.tensor([0.0, float("-inf"), 1.0]), SamplerSettings())  # a server's top-N: fine
    assert float(ok.p_final[1]) == 0.0


def _top_k_by_definition(scores: torch.Tensor, k: int) -> list[int]:
    """The ids above the k-th highest score, then the lowest ids tied with it, each part ascending."""
    values = scores.tolist()
    threshold = sorted(values, reverse=True)[k - 1]
    above = [i for i, v in enumerate(values) if v > threshold]
    return above + [i for i, v in enumerate(values) if v == threshold][:k - len(above)]


@given(st.integers(1, 70_000), st.integers(1, 600), st.sampled_from(["normal", "few values", "mostly -inf"]),
       st.integers(0, 2 ** 31))
def test_top_k_ids_of_a_vocabulary_are_the_k_highest_ties_by_id(V, k, kind, seed):
    """Vocabularies large enough for the block-maximum prefilter (V >= 4 k x 64), with ties at the
    threshold, -inf scores and sizes that are not a multiple of the block: the same ids as the definition."""
    k = min(k, V)
    g = torch.Generator().manual_seed(seed)
    if kind == "normal":
        scores = torch.randn(V, generator=g, dtype=torch.float64) * 3
    elif kind == "few values":  # ties everywhere, also at the threshold
        scores = torch.randint(0, 6, (V,), generator=g).double()
    else:  # a server's top-N: -inf outside a few ids
        scores = torch.full((V,), float("-inf"), dtype=torch.float64)
        scores[torch.randint(0, V, (min(V, 40),), generator=g)] = torch.randn(min(V, 40), generator=g).double()
    assert top_k_ids(scores, k).tolist() == _top_k_by_definition(scores, k)
    assert top_k_ids(scores.float(), k).tolist() == _top_k_by_definition(scores.float(), k)
