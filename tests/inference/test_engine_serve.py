"""Serve and MeasureBatch over real pipes (engine.py, issue 39): the scheduler's events reach the front-end as
typed replies the restricted unpickler admits, a Pause ends a serve between steps, bad input is one line."""

import pytest
from engine_driver import EngineOverPipes, of, serve

from inference.engine import protocol as p
from inference.events import BlocksReport, PrefillDone, RequestDone, ScheduleDone, StepDone, Stopped
from inference.session.batch import BatchRequest, Scheduler
from inference.session.session import prompt_ids
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

GREEDY = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=6)
SYSTEM = "the cat sat on the mat and the dog sat on the log " * 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("serve")))


def requests():
    sampled = GenerationSettings(SamplerSettings(temperature=0.8), seed=5, max_new_tokens=4)
    return (p.ServeRequest(SYSTEM + "one", settings=GREEDY),
            p.ServeRequest(SYSTEM + "two", settings=sampled, arrive_at_step=1),
            p.ServeRequest("a short one", settings=GREEDY, arrive_at_step=3))


def served(replies):
    return [e for r in of(replies, p.Served) for e in r.events]


def test_serve_sends_every_scheduler_step_and_each_request_equals_the_scheduler_run_here(folder):
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)),
                     p.wrap(p.Serve(requests(), tag=2, block_tokens=8, batch_s=60.0))], finished=2)
    assert [r.command for r in of(replies, p.Finished)] == ["Load", "Serve"]
    started = of(replies, p.ServeStarted)[0]
    assert started.block_tokens == 8 and started.arrive_at_step == (0, 1, 3) and started.tag == 2
    events = served(replies)
    assert all(r.tag == 2 for r in of(replies, p.Served))
    schedules = [e for e in events if isinstance(e, ScheduleDone)]
    blocks = [e for e in events if isinstance(e, BlocksReport)]
    assert [s.step for s in schedules] == list(range(len(schedules))) == [b.step for b in blocks]
    assert all(b.allocated + b.free == started.n_blocks for b in blocks)
    assert blocks[-1].allocated == 0  # every block given back at the end
    done = {e.request: e for e in events if isinstance(e, RequestDone)}
    assert sorted(done) == [0, 1, 2] and done[1].shared_tokens > 0  # request 1 took request 0's system blocks
    # the same requests through the scheduler in this process draw the same tokens
    model = load_model(folder, device="cpu", dtype="float32")
    asked = [BatchRequest(prompt_ids(model, r.prompt)[0], r.settings, r.arrive_at_step) for r in requests()]
    here = [e for e in Scheduler(model, asked, started.n_blocks, 8).run() if isinstance(e, StepDone)]
    there = [e for e in events if isinstance(e, StepDone)]
    assert [(e.request, e.token.id) for e in there] == [(e.request, e.token.id) for e in here]
    assert {e.request for e in events if isinstance(e, PrefillDone)} == {0, 1, 2}
    assert {e.request for e in events if isinstance(e, Stopped)} == {0, 1, 2}


def _serving_a_long_request(folder) -> EngineOverPipes:
    """An engine with the tiny model, serving one request of 400 tokens, its first steps already reported."""
    engine = EngineOverPipes()
    engine.ask(p.Load(folder, "cpu", "float32", 1))
    long = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=400)
    engine.send(p.Serve((p.ServeRequest("the cat", settings=long),), tag=3))
    engine.until(lambda r: isinstance(r, p.Served))
    return engine


def test_a_pause_ends_a_serve_between_steps_and_the_engine_serves_the_next_command(folder):
    engine = _serving_a_long_request(folder)
    try:
        engine.send(p.Pause())
        engine.until(lambda r: isinstance(r, p.Finished) and r.command == "Serve")
        steps = [e for e in served(engine.replies) if isinstance(e, StepDone)]
        assert 0 < len(steps) < 400 and not any(isinstance(e, RequestDone) for e in served(engine.replies))
        status = engine.ask(p.CheckWeights())  # the engine goes on serving
        assert status.command == "CheckWeights"
        last = of(engine.replies, p.Status)[-1].status
        assert not last.prefilled  # the single session starts again from a new prompt
    finally:
        engine.close()


def test_bad_serves_are_one_line_each_and_nothing_runs(folder):
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)),
                     p.wrap(p.Serve((), tag=2)),
                     p.wrap(p.Serve((p.ServeRequest("the cat", settings=GREEDY),), tag=3, block_tokens=0)),
                     p.wrap(p.Serve((p.ServeRequest("the cat", settings=GREEDY),), tag=4, n_blocks=1,
                                    block_tokens=1))], finished=4)
    failed = of(replies, p.Failed)
    assert len(failed) == 3 and all(f.expected and "\n" not in f.message for f in failed)
    assert "1 to 64 requests" in failed[0].message and "blocks" in failed[2].message
    assert not of(replies, p.Served)


def test_measure_batch_sends_the_floor_then_a_point_per_size(folder):
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)),
                     p.wrap(p.MeasureBatch(sizes=(1, 2), steps=2))], finished=2)
    floor = of(replies, p.BatchFloor)[0]
    assert floor.read_bytes > 0 and floor.gb_per_s > 0 and floor.ms == pytest.approx(
        floor.read_bytes / (floor.gb_per_s * 1e9) * 1000)
    points = of(replies, p.BatchPoint)
    assert [pt.requests for pt in points] == [1, 2]
    assert all(pt.tokens_per_s == pytest.approx(pt.requests / (pt.step_ms / 1000)) for pt in points)


def test_a_new_prompt_ends_a_serve_and_is_served_next_while_settings_wait_for_it(folder):
    engine = _serving_a_long_request(folder)
    try:
        engine.send(p.Configure(GREEDY))
        engine.send(p.Prefill("the dog", False, "", GREEDY, 4))
        engine.until(lambda r: isinstance(r, p.Finished) and r.command == "Prefill")
        finished = [r.command for r in of(engine.replies, p.Finished)]
        assert finished == ["Load", "Serve", "Configure", "Prefill"]
        assert len([e for e in served(engine.replies) if isinstance(e, StepDone)]) < 400
        assert of(engine.replies, p.Prefilled)[-1].tag == 4
    finally:
        engine.close()


def test_a_serve_runs_some_steps_takes_a_new_request_and_goes_on_to_the_end(folder):
    short = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=3)
    engine = EngineOverPipes()
    try:
        engine.ask(p.Load(folder, "cpu", "float32", 1))
        engine.ask(p.Serve(requests()[:2], tag=2, block_tokens=8, max_steps=2))
        assert len([e for e in served(engine.replies) if isinstance(e, ScheduleDone)]) == 2
        engine.ask(p.AddRequests((p.ServeRequest("a late one", settings=short),)))
        added = of(engine.replies, p.RequestsAdded)[0]
        assert added.first == 2 and added.arrive_at_step == (2,) and added.max_new_tokens == (3,)
        engine.ask(p.ServeMore(tag=2))
        engine.ask(p.ServeMore(tag=2))
    finally:
        engine.close()
    replies = engine.replies
    assert [r.command for r in of(replies, p.Finished)] == ["Load", "Serve", "AddRequests", "ServeMore", "ServeMore"]
    events = served(replies)
    schedules = [e for e in events if isinstance(e, ScheduleDone)]
    done = {e.request: e for e in events if isinstance(e, RequestDone)}
    assert sorted(done) == [0, 1, 2] and done[2].arrived_at_step == 2 and done[2].n_generated == 3
    assert [s.step for s in schedules] == list(range(len(schedules)))
    failed = of(replies, p.Failed)  # the last ServeMore: nothing is left to serve
    assert len(failed) == 1 and failed[0].expected and "every request has finished" in failed[0].message
