"""gui/state/compare.py: log-prob, perplexity and where two paths part, on hand-made steps (no Qt, no model)."""

import dataclasses
import math

import numpy as np
import pytest

from gui.state.compare import (branch_stats, chosen_logit, chosen_p, default_other, edge_p, log_prob, parting_step,
                         path_text, perplexity, same_length_log_probs, shared_prefix)
from inference.events import Candidates, KeptCdf, StepDistribution, StepDone, Token
from inference.settings import SamplerSettings


def make_step(index, token_id, text, p_raw, p_final=None, forced=False, node=0, entropy=1.0, outside=False,
              greedy=False):
    """A step whose candidates are [token_id, 99] (or [98, 99, token_id] when `outside` the top-N)."""
    p_final = p_raw if p_final is None else p_final
    ids = [98, 99, token_id] if outside else [token_id, 99]
    raw = [0.5, 0.2, p_raw] if outside else [p_raw, 1 - p_raw]
    final = [0.6, 0.4, p_final] if outside else [p_final, 1 - p_final]
    candidates = Candidates(np.array(ids), tuple(str(i) for i in ids), np.log(np.maximum(raw, 1e-300)) + 3.0,
                            np.array(raw), np.array(raw), np.array(final))
    dist = StepDistribution(candidates, (), KeptCdf(np.array(ids[:1]), ("a",), np.array([1.0]), 1), entropy,
                            0.0, SamplerSettings(greedy=greedy))
    fields = {f.name for f in dataclasses.fields(StepDone)}
    extra = {k: v for k, v in (("forced", forced), ("node", node)) if k in fields}
    return StepDone(index=index, position=4 + index, token=Token(token_id, text, text), forward_ms=1.0,
                    sample_ms=0.1, kv_used_bytes=0, kv_allocated_bytes=0, context_tokens=5 + index,
                    chosen_rank=0, random_u=None if forced else 0.3, dist=dist, seed=0, **extra)


def test_chosen_probability_logit_and_edge_probability():
    step = make_step(1, 7, " Paris", 0.25, p_final=0.4)
    assert chosen_p(step) == pytest.approx(0.25)
    assert chosen_p(step, "p_final") == pytest.approx(0.4)
    assert chosen_logit(step) == pytest.approx(math.log(0.25) + 3.0)
    assert edge_p(step) == (pytest.approx(0.4), "p_final")
    outside = make_step(2, 42, "x", 0.01, p_final=0.0, outside=True)
    assert chosen_p(outside) == pytest.approx(0.01)
    if "forced" in {f.name for f in dataclasses.fields(StepDone)}:
        forced = make_step(3, 42, "x", 0.01, p_final=0.0, forced=True, outside=True)
        assert edge_p(forced) == (pytest.approx(0.01), "p_raw")  # a forced token shows the model's p
    greedy = make_step(4, 7, "x", 0.3, p_final=1.0, greedy=True)
    assert edge_p(greedy) == (pytest.approx(0.3), "p_raw")  # p final 1 of the argmax says nothing


def test_log_prob_and_perplexity():
    steps = [make_step(1, 7, " a", 0.5), make_step(2, 8, " b", 0.25), make_step(3, 9, " c", 0.125)]
    assert log_prob(steps) == pytest.approx(math.log(0.5) + math.log(0.25) + math.log(0.125))
    assert perplexity(steps) == pytest.approx(4.0)  # exp(-mean ln p) = 1 / geometric mean of p
    assert perplexity(steps[:1]) == pytest.approx(2.0)
    assert log_prob([]) == 0.0 and math.isnan(perplexity([]))
    assert log_prob([make_step(1, 7, "a", 0.0)]) == -math.inf


def test_where_two_paths_part():
    assert shared_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert shared_prefix([], [1]) == 0 and shared_prefix([1, 2], [1, 2]) == 2
    a = [make_step(1, 7, " a", 0.5, node=1), make_step(2, 8, " b", 0.5, node=2), make_step(3, 9, " c", 0.5, node=3)]
    b = a[:1] + [make_step(2, 5, " z", 0.1, node=4), make_step(3, 9, " c", 0.5, node=5)]
    assert parting_step(a, b) == 2
    assert parting_step(a, a) is None and parting_step(a, a[:2]) is None  # one continues the other
    assert parting_step(a[1:], b[1:]) == 2  # compared step by step, whatever the first index


def test_branch_stats():
    steps = [make_step(1, 7, " Paris", 0.5, entropy=2.0), make_step(2, 8, ".", 0.5, entropy=0.5)]
    stats = branch_stats(steps)
    assert stats.text == path_text(steps) == " Paris."
    assert stats.n_steps == 2 and stats.entropies == (2.0, 0.5)
    assert stats.log_prob == pytest.approx(2 * math.log(0.5)) and stats.perplexity == pytest.approx(2.0)


def test_the_default_other_branch_is_the_newest_other_tip():
    assert default_other(5, [3, 5, 9]) == 9 and default_other(9, [3, 5, 9]) == 5
    assert default_other(3, [3]) is None and default_other(None, []) is None


def test_log_probs_of_different_lengths_are_also_given_over_the_same_steps():
    a = [make_step(1, 7, " a", 0.5), make_step(2, 8, " b", 0.5), make_step(3, 9, " c", 0.5)]
    b = [make_step(1, 7, " a", 0.5), make_step(2, 5, " z", 0.3)]
    assert log_prob(a) < log_prob(b)  # the longer one is lower by its length alone...
    n, lp_a, lp_b = same_length_log_probs(a, b)
    assert n == 2 and lp_a == pytest.approx(2 * math.log(0.5)) and lp_b == pytest.approx(math.log(0.5 * 0.3))
    assert lp_a > lp_b  # ...over the same steps, a is the likelier
    assert same_length_log_probs(a, []) == (0, 0.0, 0.0)
