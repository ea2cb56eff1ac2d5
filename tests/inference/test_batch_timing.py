"""A batched request's times (session/batch.py): its prefill, steps and rates are the wall time of the passes it
had rows in, and its completion record (RequestDone) times its first token and each token after from its arrival.

Every pass is made to take at least PASS_S longer (a sleep around the real pass), so the passes dominate what a
request waits for and the bounds below hold on a loaded machine; a request's own work between passes (its
draws) is charged within SLACK_MS per step."""

import dataclasses
import json
import time

import pytest

from inference.events import PrefillDone, RequestDone, ScheduleDone, StepDone, Stopped
from inference.session import batch
from inference.session.batch import BatchRequest, Scheduler
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

PASS_S = 0.05
SLACK_MS = 25.0  # a request's own work (its draws, its session's bookkeeping) per step, on a shared 2-core machine


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = save_hf_model(make_hf_model("llama", seed=5), tmp_path_factory.mktemp("llama"))
    loaded = load_model(folder, device="cpu", dtype="float32")
    loaded.config = dataclasses.replace(loaded.config, eos_ids=())  # every request runs to its max new tokens
    return loaded


@pytest.fixture
def slow_passes(monkeypatch):
    real = batch.forward_chunks

    def slow(decoder, chunks):
        time.sleep(PASS_S)
        return real(decoder, chunks)

    monkeypatch.setattr(batch, "forward_chunks", slow)


def _settings(seed: int, max_new: int) -> GenerationSettings:
    return GenerationSettings(SamplerSettings(temperature=1.0, top_k=0), max_new_tokens=max_new, seed=seed, top_n=5)


def _run(scheduler: Scheduler) -> list[list]:
    """Each scheduler step's events."""
    steps = []
    while not scheduler.done:
        steps.append(scheduler.step())
    return steps


def _mix() -> list[BatchRequest]:
    """A long prompt read in chunks of the budget (10 tokens), a short one beside it, one arriving later."""
    return [BatchRequest(list(range(30, 72)), _settings(1, 5), 0), BatchRequest([5, 6, 7], _settings(2, 8), 0),
            BatchRequest([9, 8, 7, 6], _settings(3, 4), 3)]


def test_prefill_steps_and_rates_are_the_passes_a_request_was_in(model, slow_passes):
    steps = _run(Scheduler(model, _mix(), n_blocks=32, block_tokens=4, token_budget=10))
    for index, asked in enumerate(_mix()):
        schedules = [(events[0], events) for events in steps]
        read_prompt = [s.forward_ms for s, _ in schedules if index in s.prefill_chunks]
        prefill = next(e for events in steps for e in events if isinstance(e, PrefillDone) and e.request == index)
        assert sum(read_prompt) <= prefill.ms <= sum(read_prompt) + SLACK_MS
        if index == 0:
            assert len(read_prompt) == 5  # 42 tokens, at most 10 a pass beside the others' rows
        decode_passes = []
        for schedule, events in schedules:
            for step in (e for e in events if isinstance(e, StepDone) and e.request == index):
                # step 1's logits came with the prompt; step k's from the pass that read token k - 1, this one
                expected = prefill.ms if step.index == 1 else schedule.forward_ms
                assert expected <= step.forward_ms <= expected + SLACK_MS
                if step.index > 1:
                    decode_passes.append(schedule.forward_ms)
        stop = next(e for events in steps for e in events if isinstance(e, Stopped) and e.request == index)
        n = asked.settings.max_new_tokens
        assert stop.n_generated == n and len(decode_passes) == n - 1 and min(decode_passes) >= PASS_S * 1000
        assert stop.prefill_tokens_per_s == pytest.approx(len(asked.prompt) / (prefill.ms / 1000))
        # n tokens: n - 1 passes for the tokens fed back, and n draws of its own
        assert n / ((sum(decode_passes) + n * SLACK_MS) / 1000) <= stop.decode_tokens_per_s <= \
            n / (sum(decode_passes) / 1000)


def test_a_finished_request_reports_its_time_to_first_token_and_per_token(model, slow_passes):
    """Request 1 waits for the pool until 0 finishes: its queue time and time to first token count the passes
    it waited through; its time per output token is the passes between its first and last token."""
    asked = [BatchRequest(list(range(20, 30)), _settings(1, 6), 0), BatchRequest(list(range(40, 48)), _settings(2, 5), 1)]
    steps = _run(Scheduler(model, asked, n_blocks=4, block_tokens=4))
    events = [e for step in steps for e in step]
    done = {e.request: e for e in events if isinstance(e, RequestDone)}
    assert set(done) == {0, 1}
    for index, record in done.items():
        stop_at = next(i for i, e in enumerate(events) if isinstance(e, Stopped) and e.request == index)
        assert events[stop_at + 1] is record  # the record follows its stop
        assert (record.reason, record.n_generated, record.prompt_tokens) == \
            (events[stop_at].reason, asked[index].settings.max_new_tokens, len(asked[index].prompt))
        first_step = next(i for i, step in enumerate(steps) if any(
            isinstance(e, StepDone) and e.request == index and e.index == 1 for e in step))
        waited = [step[0].forward_ms for step in steps[record.arrived_at_step:first_step + 1]]
        assert sum(waited) <= record.ttft_ms <= sum(waited) + SLACK_MS * len(waited)
        between = [step[0].forward_ms for step in steps[first_step + 1:record.finished_at_step + 1]]
        assert len(between) == record.n_generated - 1
        tpot = sum(between) / len(between)
        assert tpot <= record.tpot_ms <= tpot + SLACK_MS
        assert record.ttft_ms + (record.n_generated - 1) * record.tpot_ms <= record.total_ms
    assert done[0].queue_ms < SLACK_MS and done[0].admitted_at_step == 0
    # 1 arrived at step 1 and waited for 0's blocks: the passes of steps 1 .. 0's finish
    assert done[1].admitted_at_step == done[0].finished_at_step + 1
    waited = [step[0].forward_ms for step in steps[1:done[1].admitted_at_step]]
    assert sum(waited) <= done[1].queue_ms <= sum(waited) + SLACK_MS * len(waited)
    line = json.loads(done[1].to_json())
    assert line["type"] == "request_done" and line["request"] == 1 and line["ttft_ms"] == done[1].ttft_ms
    assert isinstance(steps[0][0], ScheduleDone)


def test_a_request_with_one_token_has_no_time_per_token(model):
    steps = _run(Scheduler(model, [BatchRequest([1, 2, 3], _settings(0, 1), 0)], n_blocks=2, block_tokens=4))
    record = next(e for step in steps for e in step if isinstance(e, RequestDone))
    assert record.n_generated == 1 and record.tpot_ms is None and record.ttft_ms > 0
    assert json.loads(record.to_json())["tpot_ms"] is None
