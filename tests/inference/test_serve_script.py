"""Lesson scripts' serving actions (issue 39): serve, add_request, serve_steps, finish, show_request. Checked when
the script is read (one line naming the action), refused in order at play, played headless as `trace --script`."""

import json

import pytest

from inference.events import RequestDone, ScheduleDone, SettingsEvent, StepDone
from inference.lessons.lesson import play
from inference.lessons.script import ScriptError, ServeSpec, parse_script
from inference.lessons.trace import TraceWriter
from inference.session.batch import BatchRequest, Scheduler, blocks_for_all
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

SERVE = {"serve": {"requests": [{"prompt_ids": [5, 6, 7, 8, 9, 10]},
                                {"prompt_ids": [5, 6, 7, 8, 11], "arrive_at_step": 1, "settings": {"seed": 3}}],
                   "block_tokens": 4, "steps": 2}}


def script(*actions):
    return {"settings": {"greedy": True, "max_new_tokens": 4}, "actions": list(actions)}


def test_serving_actions_are_read_and_checked_with_one_line_naming_the_action():
    parsed = parse_script(script(SERVE, {"add_request": {"prompt": "hi"}}, {"serve_steps": 2},
                                 {"show_request": 1}, {"finish": True}))
    spec = parsed.actions[0].value
    assert isinstance(spec, ServeSpec) and spec.block_tokens == 4 and spec.steps == 2 and spec.n_blocks == 0
    assert spec.requests[1].arrive_at_step == 1 and spec.requests[1].settings == (("seed", 3),)
    assert parsed.actions[1].value.prompt == "hi" and parsed.actions[2].value == 2
    bad = [({"serve": {"requests": []}}, 'action 0 ("serve"): "requests" must be a list of 1 to 64 requests'),
           ({"serve": {"requests": [{"prompt": "a"}], "pool": 3}}, 'unknown key "pool"'),
           ({"serve": {"requests": [{"chat": True}]}}, 'request 0: it has no "prompt"'),
           ({"add_request": {"prompt": "a", "arrive_at_step": 3}}, "joins at the next scheduler step"),
           ({"serve_steps": 0}, "serve_steps must be in [1,"), ({"finish": 1}, 'write {"finish": true}'),
           ({"show_request": -1}, "show_request must be in [0,")]
    for action, message in bad:
        with pytest.raises(ScriptError) as e:
            parse_script(script(action))
        assert message in str(e.value) and "\n" not in str(e.value)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return load_model(str(save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("lesson"))),
                      device="cpu", dtype="float32")


def test_a_serving_action_before_a_serve_is_refused_at_its_turn(model):
    events = play(Session(model), model, parse_script(script({"caption": "x"}, {"add_request": {"prompt": "a"}})))
    with pytest.raises(ScriptError) as e:
        list(events)
    assert str(e.value).startswith('action 1 ("add_request"): no requests are being served')
    with pytest.raises(ScriptError) as e:
        list(play(Session(model), model, parse_script(script(SERVE, {"show_request": 2}))))
    assert "request 2 is not one of the 2 served" in str(e.value)


def test_a_served_lesson_plays_headless_as_the_scheduler_runs_it(model):
    added = {"prompt_ids": [5, 6, 7, 8, 12, 13], "settings": {"max_new_tokens": 3}}
    lesson = parse_script(script(SERVE, {"add_request": added}, {"show_request": 2}, {"serve_steps": 1},
                                 {"wait": 10}, {"finish": True}, {"finish": True}))
    events = list(play(Session(model), model, lesson))
    greedy = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=4)
    # the same requests by hand: two steps, the third joins at step 2, then to the end
    asked = [BatchRequest([5, 6, 7, 8, 9, 10], greedy, 0),
             BatchRequest([5, 6, 7, 8, 11], GenerationSettings(greedy.sampler, seed=3, max_new_tokens=4), 1)]
    scheduler = Scheduler(model, asked, n_blocks=blocks_for_all(model, asked, 4), block_tokens=4)
    by_hand = scheduler.step() + scheduler.step()
    scheduler.add(BatchRequest([5, 6, 7, 8, 12, 13], GenerationSettings(greedy.sampler, max_new_tokens=3), 0))
    by_hand += list(scheduler.run())
    steps = [(e.request, e.token.id) for e in events if isinstance(e, StepDone)]
    assert steps == [(e.request, e.token.id) for e in by_hand if isinstance(e, StepDone)]
    assert sorted(e.request for e in events if isinstance(e, RequestDone)) == [0, 1, 2]
    assert [e.request for e in events if isinstance(e, SettingsEvent)] == [None, 0, 1, 2]
    assert [e.step for e in events if isinstance(e, ScheduleDone)] == list(range(len(
        [e for e in by_hand if isinstance(e, ScheduleDone)])))
    # in the trace, a batched step brings no settings line of its own: each request's came first, with its index
    writer = TraceWriter()
    lines = [json.loads(line) for e in events for line in writer.lines(e)]
    assert all("request" in line for line in lines[1:] if line["type"] == "settings")
