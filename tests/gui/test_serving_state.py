"""The Serving dock's Qt-free state (gui/state/serving.py) fed with a real scheduler's events on a tiny model:
phases per step, the pass-time axis, the block map with shared blocks and partly filled last blocks, numbers."""

import pytest

from gui.state.serving import ABSENT, DECODE, FINISHED, PREFILL, WAITING, Serving
from inference.engine import protocol as p
from inference.events import BlocksReport, ScheduleDone, StepDone
from inference.session.batch import BatchRequest, Scheduler
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

B = 4


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    model = load_model(str(save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("serving"))),
                       device="cpu", dtype="float32")
    greedy = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=5)
    system = list(range(5, 5 + 2 * B))  # two full blocks every prompt begins with
    asked = [BatchRequest(system + [40, 41, 42], greedy, 0), BatchRequest(system + [50], greedy, 1),
             BatchRequest(system + [60, 61], greedy, 2), BatchRequest([70, 71, 72, 73, 74, 75], greedy, 9)]
    scheduler = Scheduler(model, asked, n_blocks=12, block_tokens=B, token_budget=8)
    steps = []
    while not scheduler.done:
        steps.append(scheduler.step())
    return asked, steps


def fed(asked, steps, upto=None):
    s = Serving()
    s.apply(p.ServeStarted(tuple(len(a.prompt) for a in asked), tuple(a.settings.max_new_tokens for a in asked),
                           tuple(a.arrive_at_step for a in asked), 12, B, 1000, 7), tag=7)
    for events in steps[:upto]:
        s.apply(p.Served(tuple(events), 7), tag=7)
    return s


def test_phases_follow_the_schedule_and_the_axis_adds_the_passes(run):
    asked, steps = run
    s = fed(asked, steps)
    schedules = [e for events in steps for e in events if isinstance(e, ScheduleDone)]
    assert s.n_steps == len(schedules) and s.total_ms == pytest.approx(sum(x.forward_ms for x in schedules))
    for track in s.tracks:
        assert len(track.phases) == s.n_steps and track.finished
        for step, phase in enumerate(track.phases):
            sched = schedules[step]
            assert (phase == PREFILL) == (track.index in sched.prefill_chunks)
            assert (phase == DECODE) == (track.index in sched.requests and track.index not in sched.prefill_chunks)
        assert track.phases[0] in (PREFILL, ABSENT) and track.phases[-1] in (FINISHED, DECODE)
        assert [st.request for st in track.steps] == [track.index] * track.n_generated == [track.index] * 5
    assert s.tracks[3].phases[:9] == [ABSENT] * 9  # arrives at step 9
    # the token budget of 8 rows: request 0's 11-token prompt is read in two chunks
    assert [c for c, ph in zip(s.tracks[0].chunks, s.tracks[0].phases) if ph == PREFILL] == [8, 3]
    assert s.n_generated == 20 and s.tokens_per_s == pytest.approx(20 / (s.total_ms / 1000))


def test_the_block_map_shows_shared_prefix_blocks_and_the_last_blocks_fill(run):
    asked, steps = run
    for upto in range(1, len(steps) + 1):
        s = fed(asked, steps, upto)
        report = [e for e in steps[upto - 1] if isinstance(e, BlocksReport)][0]
        cells = s.cells()
        assert len(cells) == 12 and sum(not c.free for c in cells) == report.allocated == s.blocks_used
        assert sum(c.refcount > 1 for c in cells) == report.shared
        for request, table in report.per_request.items():
            held = report.positions[request]
            assert [cells[b].filled for b in table[:-1]] == [B] * (len(table) - 1) or held <= B * (len(table) - 1)
            assert request in cells[table[-1]].owners
        assert s.fragmentation() == sum(len(t) * B - report.positions[r] for r, t in report.per_request.items())
    # some step had the system prompt's two blocks shared by more than one running request
    shared = [fed(asked, steps, u).cells() for u in range(1, len(steps) + 1)]
    assert any(c.refcount >= 2 for cells in shared for c in cells)
    assert fed(asked, steps).blocks_used == 0  # every block given back


def test_numbers_ttft_tpot_and_the_largest_batch(run):
    asked, steps = run
    mid = fed(asked, steps, 4)
    t0 = mid.tracks[0]
    assert t0.steps and not t0.finished
    assert mid.ttft_ms(t0) == pytest.approx(mid.span(t0.step_at[0])[1] - mid.starts_ms[0])
    ctx = mid.context_length()
    assert ctx == max(t.prompt_tokens + t.n_generated for t in mid.tracks if t.phases[-1] in (PREFILL, DECODE, "idle"))
    assert mid.largest_batch() == 12 // -(-ctx // B)
    end = fed(asked, steps)
    assert end.ttft_ms(end.tracks[0]) == end.tracks[0].done.ttft_ms
    assert end.tpot_ms(end.tracks[1]) == end.tracks[1].done.tpot_ms
    assert all(end.request_tokens_per_s(t) > 0 for t in end.tracks)
    waiting = fed(asked, steps, 1)
    assert waiting.tracks[1].phases == [ABSENT] and waiting.tracks[1].waiting_for.startswith("arrives")


def test_replies_of_another_generation_change_nothing(run):
    asked, steps = run
    s = fed(asked, steps, 2)
    assert not s.apply(p.Served(tuple(steps[2]), 6), tag=7) and s.n_steps == 2
    assert [isinstance(e, StepDone) for e in steps[0]]  # events as the engine sends them
    assert s.apply(p.BatchFloor(100, 10.0, 0.01), tag=7) and s.curve.measuring
    s.apply(p.BatchPoint(1, 20.0, 50.0), tag=7)
    s.apply(p.Finished("MeasureBatch", 7, 0), tag=7)
    assert [pt.requests for pt in s.curve.points] == [1] and not s.curve.measuring
