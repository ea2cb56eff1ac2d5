"""Rewind, force, switch and the branch tree, on tiny random models of every architecture, in float64: the
cache after any move must equal a fresh prefill of the current path."""

import dataclasses
import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from inference.events import StepDone, Stopped
from inference.session.session import Session, draw_seed
from inference.settings import GenerationSettings, SamplerSettings
from tiny import ARCHITECTURES
from moves import apply_move
from session_checks import assert_cache_is_fresh, float64_model

PROMPT = [5, 77, 200, 31, 9]
SAMPLED = SamplerSettings(temperature=1.5, top_k=0)


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def model(request, tmp_path_factory):
    return float64_model(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return float64_model("llama", tmp_path_factory.mktemp("llama64"))


def _steps(events):
    return [e for e in events if isinstance(e, StepDone)]


def test_rewind_force_and_switch_back(model):
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=20))
    session.prefill(PROMPT)
    first = _steps([e for _ in range(6) for e in session.step()])
    count = session.forward_count
    rewound = session.rewind(3)
    assert session.forward_count == count  # the pending distribution was kept: no forward pass
    assert rewound.to_step == 3 and session.generated == [s.token.id for s in first[:2]]
    assert rewound.kv_used_bytes == (len(PROMPT) + 2) * session.source.cache.bytes_per_token
    assert torch.equal(session.pending_logits, session.kept.get(first[1].node).logits)
    assert rewound.pending.candidates.logits.tolist() == first[2].dist.candidates.logits.tolist()
    assert_cache_is_fresh(session)

    other = int(torch.topk(session.pending_logits, 2).indices[1])  # the runner-up, not the greedy choice
    forced = _steps(session.force(other))
    assert forced[0].forced and forced[0].random_u is None and forced[0].token.id == other
    assert forced[0].dist.candidates.logits.tolist() == first[2].dist.candidates.logits.tolist()
    assert forced[0].node != first[2].node and forced[0].parent == first[1].node
    _steps([e for _ in range(2) for e in session.step()])
    assert_cache_is_fresh(session)
    assert len([n for n in session.tree.nodes.values() if not n.children]) == 2  # both branches kept

    count = session.forward_count
    switched = session.switch(first[-1].node)
    assert session.generated == [s.token.id for s in first]
    assert switched.reread_tokens == 4 and switched.to_step == 6  # steps 3-6 differ from the fork on
    assert session.forward_count == count + 1  # ONE parallel pass
    assert_cache_is_fresh(session)


def test_same_token_after_rewind_follows_the_branch(llama):
    session = Session(llama, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=20))
    session.prefill(PROMPT)
    first = _steps([e for _ in range(4) for e in session.step()])
    session.rewind(2)
    again = _steps([e for _ in range(3) for e in session.step()])
    assert [s.node for s in again] == [s.node for s in first[1:]]
    assert len(session.tree.nodes) == 5


def test_seeded_redraw_reproduces_and_another_seed_differs(llama):
    s = GenerationSettings(SAMPLED, max_new_tokens=40, seed=7)
    session = Session(llama, s)
    session.prefill(PROMPT)
    first = _steps([e for _ in range(8) for e in session.step()])
    session.rewind(4)
    again = _steps([e for _ in range(5) for e in session.step()])
    assert [(e.token.id, e.random_u) for e in again] == [(e.token.id, e.random_u) for e in first[3:]]
    session.update_settings(dataclasses.replace(s, seed=8))
    session.rewind(4)
    other = _steps([e for _ in range(5) for e in session.step()])
    assert [e.random_u for e in other] != [e.random_u for e in first[3:]]
    assert all(e.seed == 8 for e in other)
    u = float(torch.rand((), generator=torch.Generator().manual_seed(draw_seed(8, 4)), dtype=torch.float64))
    assert other[0].random_u == u  # step 4's u is a function of (seed, 4) alone


def test_force_text_and_errors(llama):
    session = Session(llama, GenerationSettings(SAMPLED, max_new_tokens=20, seed=1))
    with pytest.raises(Exception, match="prefill"):
        session.rewind(1)
    session.prefill(PROMPT)
    ids = llama.tokenizer.encode(" the cat", add_special_tokens=False)
    forced = _steps(session.force(" the cat"))
    assert [e.token.id for e in forced] == ids and all(e.forced for e in forced)
    for bad in (0, len(ids) + 1):
        with pytest.raises(ValueError, match="outside"):
            session.rewind(bad)
    with pytest.raises(ValueError, match="vocabulary"):
        list(session.force(10**6))
    with pytest.raises(ValueError, match="empty"):
        list(session.force(""))
    with pytest.raises(ValueError, match="no node"):
        session.switch(999)
    assert_cache_is_fresh(session)


def test_dropped_logits_cost_one_forward(llama):
    session = Session(llama, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=20))
    session.prefill(PROMPT)
    session.kept.budget = 1  # over budget at once: only the prompt's and the newest node's are kept
    _steps([e for _ in range(5) for e in session.step()])
    count = session.forward_count
    rewound = session.rewind(3)
    assert session.forward_count == count + 1 and rewound.forward_ms > 0
    assert_cache_is_fresh(session)


def test_stop_then_rewind_goes_on(llama):
    session = Session(llama, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=3))
    session.prefill(PROMPT)
    events = list(session.run())
    assert isinstance(events[-1], Stopped) and session.blocked()
    session.rewind(2)
    assert session.stopped is None and not session.blocked()
    assert _steps(session.step())[0].index == 2


OPS = st.lists(st.tuples(st.sampled_from(["step", "rewind", "force", "reset", "switch"]),
                         st.integers(0, 10**6)), min_size=1, max_size=12)


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_any_moves_leave_the_cache_fresh(llama, ops):
    session = Session(llama, GenerationSettings(SAMPLED, max_new_tokens=8, seed=3))
    session.prefill(PROMPT)
    for op, r in ops:
        apply_move(session, op, r)
        assert session.generated == session.tree.tokens(session.node)
        assert_cache_is_fresh(session)


def test_partial_characters_read_the_same_in_candidates_and_stream(llama):
    """"你" is three byte tokens here: the first two carry bytes (\\xNN), the third the character — in
    the step's token and in its candidate list alike."""
    session = Session(llama, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=20, top_n=400))
    session.prefill(PROMPT)
    steps = _steps(session.force("你"))
    assert [json.loads(s.to_json())["token"]["text"] for s in steps] == ["\\xE4", "\\xBD", "你"]
    for s in steps:
        c = s.dist.candidates
        assert c.texts[list(c.ids).index(s.token.id)] == s.token.shown_text
    assert session.text == "你"


def test_retract_takes_back_what_the_last_run_made_after_the_step_shown(model):
    """Pause or stop at the step a paced front-end shows: the run's later steps leave the path and the tree;
    the nodes that were there before the run stay; the cache is that of the shorter path, and the next
    draws are those the run had taken (same seed, same steps)."""
    settings = GenerationSettings(SAMPLED, max_new_tokens=20)
    session = Session(model, settings)
    session.prefill(PROMPT)
    before = _steps([e for _ in range(2) for e in session.step()])  # made by hand, seen
    session.rewind(1)
    ran = _steps(session.run(max_steps=6))  # follows step 1 again (same draw), then makes new nodes
    assert [s.index for s in ran] == [1, 2, 3, 4, 5, 6] and ran[1].node == before[1].node
    nodes = set(session.tree.nodes)
    rewound, dropped = session.retract(3)
    assert rewound.to_step == 4 and session.generated == [s.token.id for s in ran[:3]]
    assert dropped == tuple(s.node for s in ran[3:])  # nodes 4..6 of this run; step 2's node was there before
    assert set(session.tree.nodes) == nodes - set(dropped) and session.node == ran[2].node
    assert all(session.kept.get(node) is None for node in dropped)
    assert_cache_is_fresh(session)
    again = _steps(session.run(max_steps=3))
    assert [s.token.id for s in again] == [s.token.id for s in ran[3:]]
    assert [s.dist.candidates.logits.tolist() for s in again] == [s.dist.candidates.logits.tolist() for s in ran[3:]]
    assert session.retract(6) is None  # nothing after the newest step
    rewound, dropped = session.retract(0)  # back to the prompt: all the second run made goes
    assert rewound.to_step == 1 and session.generated == [] and set(dropped) == {s.node for s in again}
    assert_cache_is_fresh(session)
