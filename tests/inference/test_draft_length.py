"""The draft-length chooser (issue 38, draft_length.py): its decisions on pinned costs (no timings), the acceptance
it watches, the costs it measures, and the same tokens as plain decoding whatever it decides."""

import statistics

import pytest

from inference.events import Verified
from inference.session.draft_length import ENV, DraftLength, PassCosts, prior
from speculate_support import GREEDY, SAMPLED, _generate, _repeating_token, _steps, _verifies, llama  # noqa: F401
from test_speculate import PROMPTS

SLOPES = (0.05, 0.25, 0.6, 1.5)


def chooser(acceptance: float, slope: float = 0.25, n: int = 8) -> DraftLength:
    drafts = DraftLength(PassCosts([1 + slope]))
    drafts.acceptance = [acceptance] * n
    return drafts


def test_low_acceptance_drafts_nothing_and_high_drafts_the_most():
    for slope in SLOPES:
        assert chooser(0.02, slope).choose(8).n == 0
        assert chooser(slope / 2, slope).choose(8).n == 0  # one draft at cost 1 + s pays only if kept more than s
    assert chooser(0.99, 0.05).choose(8).n == 8
    assert chooser(0.99, 0.25).choose(8).n == 8
    assert chooser(0.99, 0.25).choose(3).n == 3  # never past the maximum it is given
    assert chooser(0.99, 0.25).choose(0).n == 0
    assert chooser(0.99, 1.5).choose(8).n == 0  # a pass dearer than the tokens it could give: plain steps
    assert chooser(0.02, 1.1).choose(8, fed=True).n == 0
    drafts = chooser(0.5, 0.6)
    assert drafts.choose(8).n == 0  # after a pass, nothing pays
    assert drafts.choose(8, fed=True).n > 0  # after a plain step, a rejected first draft costs no pass


def test_the_length_grows_with_acceptance_and_shrinks_with_cost():
    for slope in SLOPES:
        lengths = [chooser(p / 100, slope).choose(8).n for p in range(0, 101, 2)]
        assert lengths == sorted(lengths), slope
        fed = [chooser(p / 100, slope).choose(8, fed=True).n for p in range(0, 101, 2)]
        assert fed == sorted(fed), slope
        assert all(a >= b for a, b in zip(fed, lengths))  # the first draft checked for free: never shorter
    for p in (0.3, 0.6, 0.9):
        lengths = [chooser(p, slope).choose(8).n for slope in SLOPES]
        assert lengths == sorted(lengths, reverse=True), p
    assert len({chooser(p / 100).choose(8).n for p in range(0, 101, 2)}) >= 4  # not two values only


def test_the_choice_says_why():
    choice = chooser(0.5).choose(8)
    assert choice.n_max == 8 and choice.acceptance == (0.5,) * 8 and choice.step_ms is None
    assert choice.expected_tokens == pytest.approx(sum(0.5 ** k for k in range(choice.n + 1)))
    assert choice.cost_steps == pytest.approx(1 + 0.25 * choice.n)
    assert choice.expected_tokens / choice.cost_steps > 1
    assert DraftLength(PassCosts([1.25])).choose(4).acceptance == (0.5,) * 4  # never watched: the prior


def test_a_watched_draft_counts_each_position_until_the_first_miss():
    drafts = DraftLength(PassCosts([1.25]))
    drafts.watch([7, 8, 9, 10], at=2)
    drafts.saw([1, 2, 7])
    assert drafts.watching and drafts.acceptance == [0.75]  # a first observation: the mean of it and the prior
    drafts.saw([1, 2, 7, 8, 5, 10])  # 8 kept, 5 for 9 missed: the watch ends there (10 is not counted)
    assert not drafts.watching and drafts.acceptance == [0.75, 0.75, 0.25] and drafts.seen == [1, 1, 1]
    drafts.watch([3], at=6)
    drafts.saw([1, 2, 7, 8, 5, 10, 3])
    assert not drafts.watching and drafts.acceptance[0] == pytest.approx(0.75 + 0.25 / 3)  # a running mean: 1 / 3
    for _ in range(10):  # later observations weigh ACCEPTANCE_WEIGHT: the estimate follows a change in the text
        drafts.watch([3], at=7)
        drafts.saw([1, 2, 7, 8, 5, 10, 3, 4])
    assert drafts.acceptance[0] < 0.1


def test_rejections_shrink_the_draft_and_kept_drafts_grow_it_back():
    drafts, generated = DraftLength(PassCosts([1.25])), []
    lengths = []
    for kept in [False] * 12 + [True] * 12:
        drafts.watch([5, 6, 7, 8], at=len(generated))
        generated += [5, 6, 7, 8] if kept else [4]
        drafts.saw(generated)
        lengths.append(drafts.choose(4).n)
    assert lengths[11] == 0 and lengths[-1] == 4
    assert lengths[:12] == sorted(lengths[:12], reverse=True) and lengths[12:] == sorted(lengths[12:])


def test_costs_are_measured_per_positions_read_or_pinned():
    costs = PassCosts()
    assert costs.cost(1) == 1.0 and costs.cost(5) == prior(5) == pytest.approx(1.55)  # nothing timed: the prior
    assert 1 < prior(2) < prior(9) < 2 * prior(2)  # the weights read once for all positions: a pass costs little more
    costs.timed_step(10.0)
    assert costs.cost(5) == prior(5)  # no pass timed yet
    costs.timed_pass(5, 20.0)
    assert costs.step_ms == 10.0 and costs.cost(5) == pytest.approx(2.0)  # the prior, scaled as the one timing says
    assert costs.cost(3) == pytest.approx(prior(3) * 2.0 / prior(5))  # an M not measured: the prior, scaled alike
    costs.timed_pass(2, 15.0)
    scale = statistics.median([2.0 / prior(5), 1.5 / prior(2)])  # every M timed, not the nearest one alone
    assert costs.cost(3) == pytest.approx(prior(3) * scale) and costs.cost(5) == pytest.approx(prior(5) * scale)
    costs.timed_pass(5, 30.0)
    costs.timed_pass(5, 900.0)  # a burst of another process's work
    assert costs.cost(5) == pytest.approx(3.0)  # the median of the latest
    for ms in (1000.0, 11.0, 9.0):  # a first step's one-off cost prices nothing for long
        costs.timed_step(ms)
    assert costs.step_ms == pytest.approx(10.5)
    pinned = PassCosts([1.2, 1.3])
    pinned.timed_step(10.0)
    pinned.timed_pass(2, 50.0)
    assert (pinned.step_ms, pinned.cost(2), pinned.cost(3), pinned.cost(4)) == (None, 1.2, 1.3, pytest.approx(1.4))


def test_the_costs_are_pinned_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV, "0.5")
    assert PassCosts.from_env().cost(3) == pytest.approx(2.0)
    monkeypatch.setenv(ENV, "1.1, 1.4")
    assert PassCosts.from_env().cost(4) == pytest.approx(1.7)
    monkeypatch.delenv(ENV)
    assert PassCosts.from_env().pinned is None
    monkeypatch.setenv(ENV, "cheap")
    with pytest.raises(ValueError, match=ENV):
        PassCosts.from_env()


# --- the same tokens whatever it decides --------------------------------------------------------------------
@pytest.mark.parametrize("slope", [0.01, 0.25, 3.0])
def test_the_same_tokens_whatever_the_costs(llama, monkeypatch, slope):
    monkeypatch.setenv(ENV, str(slope))
    lengths, verifies = set(), 0
    for sampler in (GREEDY, SAMPLED):
        for prompt in [*PROMPTS, [_repeating_token(llama)] * 8]:
            _, plain, plain_passes = _generate(llama, prompt, 0, sampler, seed=3)
            _, spec, spec_passes = _generate(llama, prompt, 8, sampler, seed=3)
            assert [s.token.id for s in _steps(spec)] == [s.token.id for s in _steps(plain)], prompt
            assert [s.random_u for s in _steps(spec)] == [s.random_u for s in _steps(plain)]
            assert spec_passes <= plain_passes
            lengths |= {len(v.drafted) for v in _verifies(spec)}
            verifies += len(_verifies(spec))
    if slope >= 3.0:
        assert verifies == 0  # no draft can pay for a pass that dear: plain decoding
    else:
        assert verifies > 0 and max(lengths) > 1


def test_a_run_after_a_reset_drafts_as_the_first_did(llama):
    from inference.session.session import Session
    from inference.settings import GenerationSettings

    session = Session(llama, GenerationSettings(GREEDY, max_new_tokens=24, speculate=6))
    session.prefill([_repeating_token(llama)] * 8)
    first = [e for e in session.run() if isinstance(e, Verified)]
    session.reset()
    again = [e for e in session.run() if isinstance(e, Verified)]
    assert first and [(v.index, v.drafted, v.acceptance) for v in again] == \
        [(v.index, v.drafted, v.acceptance) for v in first]
