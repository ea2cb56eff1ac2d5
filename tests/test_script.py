"""Lesson scripts: checked with one line naming the action, played headless, and traces turned back into
scripts that replay the same token ids (tiny random models; the CLI in a subprocess)."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from inference.errors import is_expected
from inference.events import Caption, PrefillDone, Rewound, SettingsEvent, StepDone, Stopped, Switched
from inference.lesson import play
from inference.loading import load_model
from inference.script import (Script, ScriptError, apply_settings, load_script, parse_script,
                              settings_dict)
from inference.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.trace import TraceWriter, script_from_trace, trace_lines
from tiny import make_hf_model, save_hf_model

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "resources" / "lessons"
SAMPLED = {"seed": 7, "temperature": 1.5, "top_k": 0, "max_new_tokens": 12}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=11), tmp_path_factory.mktemp("script"))


@pytest.fixture(scope="module")
def model(folder):
    loaded = load_model(folder, device="cpu")
    # No EOS: a random model may end at any step, and these tests count steps.
    loaded.config = dataclasses.replace(loaded.config, eos_ids=())
    return loaded


def _script(actions, **top):
    return {"prompt": "the cat", "settings": SAMPLED, "actions": actions, **top}


def _play(model, data):
    return list(play(Session(model), model, parse_script(data)))


def _trace(model, events):
    writer = TraceWriter()
    return [model.info().to_json()] + [line for e in events for line in writer.lines(e)]


def _steps(events):
    return [(e.index, e.token.id, e.forced) for e in events if isinstance(e, StepDone)]


# --- parsing -------------------------------------------------------------------------------------------
BAD = [
    ([{"prefill": True}, {"stepp": 1}], r'^action 1: unknown action "stepp"'),
    ([{"prefill": True}, {"step": 0}], r'^action 1 \("step"\): step must be >= 1, got 0$'),
    ([{"prefill": True}, {"step": 2.5}], r'^action 1 \("step"\): step must be a whole number, got 2.5$'),
    ([{"prefill": True}, {"step": True}], r'^action 1 \("step"\): step must be a whole number'),
    ([{"prefill": True}, {"rewind": 0}], r'^action 1 \("rewind"\): rewind must be >= 1'),
    ([{"prefill": True}, {"step": 1}, {"set": {"temperature": -1}}],
     r'^action 2 \("set"\): temperature must be >= 0, got -1'),
    ([{"set": {"top_p": 0}}], r'^action 0 \("set"\): top-p must be in \(0, 1\]'),
    ([{"set": {"tempo": 1}}], r'^action 0 \("set"\): unknown setting "tempo"'),
    ([{"set": {"greedy": 1}}], r'^action 0 \("set"\): greedy must be true or false'),
    ([{"set": {"stop": "."}}], r'^action 0 \("set"\): stop must be a list of non-empty strings'),
    ([{"set": {"max_new_tokens": 0}}], r'^action 0 \("set"\): max new tokens must be >= 1'),
    ([{"set": [1]}], r'^action 0 \("set"\): settings must be an object'),
    ([{"prefill": True}, {"seed": -3}], r'^action 1 \("seed"\): seed must be in \[0, '),
    ([{"prefill": True}, {"force": ""}], r'^action 1 \("force"\): force takes a token id'),
    ([{"prefill": True}, {"force": -1}], r'^action 1 \("force"\): force takes a token id'),
    ([{"caption": 3}], r'^action 0 \("caption"\): caption must be a text'),
    ([{"wait": -1}], r'^action 0 \("wait"\): wait \(milliseconds\) must be in \[0, '),
    ([{"prefill": False}], r'^action 0 \("prefill"\): write \{"prefill": true\}'),
    ([{"reset": "yes"}], r'^action 0 \("reset"\): write \{"reset": true\}'),
    ([{"step": 1, "run": True}], r'^action 0: one action per object, got "step", "run"$'),
    ([{}], r"^action 0: an action is an object"),
    (["step"], r'^action 0: an action is an object like \{"step": 3\}, got "step"$'),
]


@pytest.mark.parametrize("actions, message", BAD)
def test_a_bad_action_is_one_line_naming_its_index(actions, message):
    with pytest.raises(ScriptError) as caught:
        parse_script(_script(actions))
    text = str(caught.value)
    assert re.search(message, text), text
    assert "\n" not in text and is_expected(caught.value)


@pytest.mark.parametrize("data, message", [
    ([], r"^script: a lesson script is a JSON object"),
    ({"prompt": "x"}, r'^script: "actions" must be a non-empty list'),
    ({"prompt": "x", "actions": [], "foo": 1}, r'^script: unknown key "foo"'),
    ({"prompt": 3, "actions": [{"prefill": True}]}, r'^script: "prompt" must be a text'),
    ({"prompt_ids": [1, -2], "actions": [{"prefill": True}]}, r'"prompt_ids" must be a non-empty list'),
    ({"prompt_ids": [1], "chat": True, "actions": [{"prefill": True}]}, r'"chat" cannot apply'),
    ({"actions": [{"caption": "hi"}, {"prefill": True}]}, r'^action 1 \("prefill"\): the script has no "prompt"'),
    ({"prompt": "x", "settings": {"top_k": -1}, "actions": [{"run": True}]},
     r"^script settings: top-k must be >= 0"),
    ({"prompt": "x", "chat": "no", "actions": [{"run": True}]}, r'^script: "chat" must be true or false'),
])
def test_a_bad_script_is_one_line(data, message):
    with pytest.raises(ScriptError, match=message):
        parse_script(data)


GOOD_ACTIONS = st.sampled_from([{"prefill": True}, {"step": 2}, {"run": True}, {"set": {"temperature": 0.5}},
                                {"seed": 4}, {"reset": True}, {"rewind": 1}, {"force": " a"}, {"force": 7},
                                {"caption": "c"}, {"wait": 10}])
BAD_ACTIONS = st.sampled_from([{"step": -1}, {"stepp": 1}, {"rewind": "2"}, {"set": {"top_k": 1.5}},
                               {"wait": 0.5}, {"force": None}, {"seed": 1, "step": 1}, {"caption": None},
                               {"set": {"min_p": 2}}, 5, None, {"set": {"temperature": float("nan")}}])


@given(st.lists(GOOD_ACTIONS, max_size=6), BAD_ACTIONS, st.lists(GOOD_ACTIONS, max_size=6))
@hsettings(max_examples=200)
def test_the_first_bad_action_is_named_by_its_index(before, bad, after):
    with pytest.raises(ScriptError) as caught:
        parse_script(_script(before + [bad] + after))
    message = str(caught.value)
    assert message.startswith(f"action {len(before)}") and "\n" not in message


def test_a_good_script_parses_into_frozen_actions():
    script = parse_script(_script([{"prefill": True}, {"step": 3}, {"set": {"temperature": 0.3, "stop": ["."]}},
                                   {"force": " London"}, {"force": 42}, {"caption": "Hi"}, {"wait": 1500}]))
    assert isinstance(script, Script) and script.prompt == "the cat" and not script.chat
    assert [(a.index, a.kind, a.value) for a in script.actions][:2] == [(0, "prefill", None), (1, "step", 3)]
    assert script.actions[2].overrides == {"temperature": 0.3, "stop": (".",)}
    assert script.actions[3].value == " London" and script.actions[4].value == 42
    with pytest.raises(dataclasses.FrozenInstanceError):
        script.actions[0].kind = "run"


def test_settings_from_base_and_overrides():
    base = GenerationSettings(SamplerSettings(temperature=0.7, top_k=20), max_new_tokens=9, seed=1, top_n=5)
    new = apply_settings(base, {"temperature": 1.5, "stop": ["\n", "."], "seed": 3, "greedy": True})
    assert new.sampler == SamplerSettings(temperature=1.5, top_k=20, greedy=True)
    assert (new.stop_strings, new.seed, new.max_new_tokens, new.top_n) == (("\n", "."), 3, 9, 5)
    assert settings_dict(new)["stop"] == ["\n", "."] and apply_settings(base, {}) == base
    with pytest.raises(ValueError, match="min-p"):
        apply_settings(base, {"min_p": 1.5})


def test_a_broken_file_names_itself(tmp_path):
    path = tmp_path / "lesson.json"
    path.write_text('{"prompt": "x", "actions": [{"step": 1},]}')
    with pytest.raises(ScriptError, match=r"^lesson.json: not valid JSON \(line 1, column 41"):
        load_script(path)


# --- the example lessons -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["capital_of_france.json", "capital_of_france.zh-CN.json"])
def test_the_example_lessons_parse_and_show_what_the_issue_asks(name):
    script = load_script(LESSONS / name)
    kinds = [a.kind for a in script.actions]
    assert script.prompt == "The capital of France is" and kinds[kinds.index("prefill") + 1:].count("step") >= 3
    temperatures = [a.overrides.get("temperature") for a in script.actions if a.kind == "set"]
    assert 0.3 in temperatures and 1.5 in temperatures
    # 1.5 redraws the step 0.3 drew: a rewind between them, then one step
    at = [i for i, a in enumerate(script.actions) if a.overrides.get("temperature") == 1.5][0]
    assert "rewind" in kinds[at:] and kinds.index("rewind", at) < kinds.index("step", at)
    forks = [i for i, a in enumerate(script.actions) if a.kind == "force"]
    assert forks and script.actions[forks[0]].value == " London" and kinds[forks[0] - 1] == "rewind"
    assert kinds[-1] != "run" and "run" in kinds and script.overrides["max_new_tokens"] <= 16
    captions = " ".join(a.value for a in script.actions if a.kind == "caption")
    chinese = re.search(r"[\u4e00-\u9fff]", captions) is not None
    assert chinese == name.endswith("zh-CN.json")


def test_both_lessons_play_the_same_actions():
    english, chinese = (load_script(LESSONS / n) for n in ("capital_of_france.json", "capital_of_france.zh-CN.json"))
    strip = lambda s: [(a.kind, a.value) for a in s.actions if a.kind != "caption"]  # noqa: E731
    assert strip(english) == strip(chinese) and english.overrides == chinese.overrides


# --- playing -------------------------------------------------------------------------------------------
def test_a_script_plays_into_the_expected_events(model):
    events = _play(model, _script([
        {"prefill": True}, {"caption": "read"}, {"step": 3}, {"set": {"temperature": 0.3}}, {"rewind": 2},
        {"force": 200}, {"step": 1}, {"seed": 9}, {"reset": True}, {"step": 2}, {"wait": 5000}]))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["SettingsEvent", "PrefillDone", "Caption", "StepDone", "StepDone", "StepDone", "SettingsEvent",
                     "Rewound", "StepDone", "StepDone", "SettingsEvent", "Rewound", "StepDone", "StepDone"]
    assert events[0].settings.seed == 7 and events[0].settings.sampler.temperature == 1.5
    assert events[2] == Caption("read") and events[6].settings.sampler.temperature == 0.3
    first, rewind, forced, after = events[3:6], events[7], events[8], events[9]
    assert (rewind.to_step, rewind.reset, rewind.seed) == (2, False, 7)
    assert (forced.index, forced.token.id, forced.forced, forced.random_u) == (2, 200, True, None)
    assert forced.dist.candidates.logits[:20].tolist() == first[1].dist.candidates.logits[:20].tolist()  # step 2
    assert (after.index, after.forced, after.settings.sampler.temperature) == (3, False, 0.3)
    reset = events[11]
    assert reset.reset and reset.to_step == 1 and reset.seed == 9 and events[12].seed == 9
    assert [e.index for e in events[12:]] == [1, 2]


def test_the_same_seed_redraws_the_same_tokens_after_a_rewind(model):
    events = _play(model, _script([{"prefill": True}, {"step": 6}, {"rewind": 3}, {"step": 4}]))
    steps = [e for e in events if isinstance(e, StepDone)]
    assert [s.token.id for s in steps[:6]] == [s.token.id for s in steps[:2] + steps[6:]]
    assert [s.random_u for s in steps[2:6]] == [s.random_u for s in steps[6:]]


def test_force_text_takes_its_tokens_one_step_each(model):
    events = _play(model, _script([{"prefill": True}, {"force": " the cat"}]))
    forced = [e for e in events if isinstance(e, StepDone)]
    assert [s.token.id for s in forced] == model.tokenizer.encode(" the cat", add_special_tokens=False)
    assert all(s.forced for s in forced) and [s.index for s in forced] == list(range(1, len(forced) + 1))


def test_run_steps_until_a_stop_rule_and_step_after_it_is_refused(model):
    script = _script([{"prefill": True}, {"set": {"max_new_tokens": 5}}, {"run": True}, {"step": 1}])
    events = []
    with pytest.raises(ScriptError) as caught:
        for event in play(Session(model), model, parse_script(script)):
            events.append(event)
    assert [e.index for e in events if isinstance(e, StepDone)] == [1, 2, 3, 4, 5]
    assert isinstance(events[-1], Stopped) and events[-1].reason == "max_new_tokens"
    assert str(caught.value) == 'action 3 ("step"): the max new tokens limit is reached; raise it, rewind or reset'


def test_step_n_ends_quietly_where_a_stop_rule_fires_inside_it(model):
    events = _play(model, _script([{"prefill": True}, {"set": {"max_new_tokens": 2}}, {"step": 5}, {"rewind": 2},
                                   {"step": 1}]))
    assert [e.index for e in events if isinstance(e, StepDone)] == [1, 2, 2]
    assert [type(e).__name__ for e in events].count("Stopped") == 2


@pytest.mark.parametrize("actions, message", [
    ([{"prefill": True}, {"step": 4}, {"rewind": 9}],
     'action 2 ("rewind"): rewind 9 is past the 4 steps taken so far'),
    ([{"step": 1}], 'action 0 ("step"): the prompt has not been read yet: put {"prefill": true} before it'),
    ([{"caption": "x"}, {"rewind": 1}], 'action 1 ("rewind"): the prompt has not been read yet'),
    ([{"prefill": True}, {"force": 100000}], 'action 1 ("force"): token id 100000 is outside the vocabulary'),
])
def test_what_the_session_refuses_names_the_action(model, actions, message):
    with pytest.raises(ScriptError) as caught:
        _play(model, _script(actions))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_prompt_ids_are_read_exactly(model):
    events = _play(model, {"prompt_ids": [5, 77, 200], "actions": [{"prefill": True}, {"step": 1}]})
    assert [t.id for t in events[1].tokens] == [5, 77, 200]


def test_a_too_long_prompt_names_the_prefill(model):
    with pytest.raises(ScriptError, match=r'^action 0 \("prefill"\): the prompt is 200 tokens but the context'):
        _play(model, {"prompt_ids": [5] * 200, "actions": [{"prefill": True}]})


# --- traces ----------------------------------------------------------------------------------------------
def test_the_trace_records_the_settings_in_force_at_every_step(model):
    lines = _trace(model, _play(model, _script([{"prefill": True}, {"step": 2}, {"set": {"top_k": 5}},
                                                {"set": {"top_k": 5}}, {"step": 1}])))
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["model", "settings", "prefill", "step", "step", "settings", "step"]
    assert events[1]["top_k"] == 0 and events[5]["top_k"] == 5 and events[1]["seed"] == 7
    assert set(events[1]) == {"type", "seed", "temperature", "top_k", "top_p", "min_p", "greedy", "max_new_tokens",
                              "stop"}


def test_a_log_without_settings_events_gets_them_from_its_steps(model):
    """The app's log has no settings events: the steps' settings are written, with the prefill's seed."""
    session = Session(model, GenerationSettings(SamplerSettings(temperature=1.5, top_k=0), seed=5))
    log = [session.prefill([5, 77, 200])]
    session.update_settings(dataclasses.replace(session.settings, seed=6))  # applies from the next rewind
    log += list(session.step())
    session.update_settings(dataclasses.replace(session.settings, sampler=SamplerSettings(temperature=0.4)))
    log += list(session.step()) + [session.rewind(2)] + list(session.step())
    events = [json.loads(line) for line in trace_lines(model.info(), log)]
    assert [e["type"] for e in events] == ["model", "settings", "prefill", "settings", "step", "settings", "step",
                                           "rewind", "step"]
    assert events[1]["seed"] == 5 and events[3]["seed"] == 6 and events[5]["temperature"] == 0.4
    assert events[7]["seed"] == 6
    assert _replayed_ids(model, [json.dumps(e) for e in events]) == [(1, log[1].token.id, False),
                                                                     (2, log[2].token.id, False),
                                                                     (2, log[4].token.id, False)]


def _replayed_ids(model, lines):
    script = parse_script(script_from_trace(lines))
    return _steps(play(Session(model), model, script))


def test_a_trace_turned_into_a_script_replays_its_token_ids(model):
    events = _play(model, _script([
        {"prefill": True}, {"step": 3}, {"set": {"temperature": 0.8, "top_k": 40}}, {"rewind": 2}, {"step": 2},
        {"force": " the cat"}, {"seed": 11}, {"rewind": 4}, {"step": 2}, {"caption": "hi"}, {"set": {"seed": 3}},
        {"reset": True}, {"set": {"greedy": True}}, {"step": 2}, {"set": {"greedy": False, "max_new_tokens": 6}},
        {"run": True}]))
    lines = _trace(model, events)
    script = script_from_trace(lines)
    assert script["prompt_ids"] == [t.id for t in events[1].tokens] and script["settings"]["seed"] == 7
    assert {"caption": "hi"} in script["actions"] and {"reset": True} in script["actions"]
    replayed = list(play(Session(model), model, parse_script(script)))
    assert _steps(replayed) == _steps(events)
    assert [e.random_u for e in replayed if isinstance(e, StepDone)] == \
        [e.random_u for e in events if isinstance(e, StepDone)]


def test_a_branch_switch_replays_as_rewind_and_forced_tokens(model):
    session = Session(model, apply_settings(GenerationSettings(), SAMPLED))
    log = [session.prefill([5, 77, 200, 31])]
    for _ in range(4):
        log += list(session.step())
    first = list(session.generated)
    log += [session.rewind(2)] + list(session.force(9)) + list(session.step())
    second_leaf = session.node
    log.append(session.switch(log[4].node))  # back to the tip of the first branch
    log += list(session.step())
    log.append(session.switch(second_leaf))
    log += list(session.step())
    lines = trace_lines(model.info(), log)
    assert sum('"type": "branch"' in line for line in lines) == 2
    script = parse_script(script_from_trace(lines))
    replay = Session(model)
    replayed = list(play(replay, model, script))
    assert replay.generated == session.generated
    drawn_after_switch = [e for e in log if isinstance(e, StepDone)][-1]
    assert [e for e in replayed if isinstance(e, StepDone)][-1].token.id == drawn_after_switch.token.id
    assert first == session.tree.tokens(log[4].node)


OPS = st.lists(st.one_of(
    st.tuples(st.just("step"), st.integers(1, 3)), st.tuples(st.just("rewind"), st.integers(1, 6)),
    st.tuples(st.just("force"), st.integers(0, 300)), st.tuples(st.just("seed"), st.integers(0, 50)),
    st.tuples(st.just("temperature"), st.sampled_from([0.0, 0.5, 1.0, 2.0])), st.tuples(st.just("reset"), st.none()),
    st.tuples(st.just("switch"), st.integers(0, 40))), min_size=1, max_size=10)


@given(OPS)
@hsettings(max_examples=30)
def test_any_session_history_replays_from_its_trace(model, ops):
    session = Session(model, apply_settings(GenerationSettings(), {**SAMPLED, "max_new_tokens": 64}))
    log = [session.prefill([5, 77, 200])]
    for op, value in ops:
        if op == "step":
            for _ in range(value):
                log += list(session.step())
        elif op == "rewind" and value <= len(session.generated):
            log.append(session.rewind(value))
        elif op == "force":
            log += list(session.force(value))
        elif op == "seed":
            session.update_settings(dataclasses.replace(session.settings, seed=value))
        elif op == "temperature":
            session.update_settings(dataclasses.replace(session.settings, sampler=SamplerSettings(temperature=value)))
        elif op == "reset":
            log.append(session.reset())
        elif op == "switch" and value in session.tree.nodes:
            log.append(session.switch(value))
    replay = Session(model)
    replayed = list(play(replay, model, parse_script(script_from_trace(trace_lines(model.info(), log)))))
    assert replay.generated == session.generated
    drawn = [(s.index, s.token.id) for s in log if isinstance(s, StepDone)]
    assert [(s.index, s.token.id) for s in replayed if isinstance(s, StepDone) and not s.forced] == \
        [(s.index, s.token.id) for s in log if isinstance(s, StepDone) and not s.forced]
    assert set(drawn) >= {(s.index, s.token.id) for s in replayed if isinstance(s, StepDone)}


def test_an_unusable_trace_is_one_line():
    with pytest.raises(ScriptError, match="^the trace has no prefill event"):
        script_from_trace(['{"type": "model"}'])
    with pytest.raises(ScriptError, match="^trace line 2: not valid JSON"):
        script_from_trace(['{"type": "model"}', "{"])
    with pytest.raises(ScriptError, match='^trace line 2: a "prefill" event without a valid'):
        script_from_trace(['{"type": "model"}', '{"type": "prefill"}'])


# --- the command line ----------------------------------------------------------------------------------
def _cli(folder, script_path):
    return [sys.executable, str(ROOT / "main.py"), "trace", "--model", str(folder), "--script", str(script_path)]


RUN = dict(capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_cli_a_bad_script_exits_2_with_one_line_and_no_output(folder, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_script([{"prefill": True}, {"stepp": 2}])))
    result = subprocess.run(_cli(folder, path), **RUN)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == \
        'error: action 1: unknown action "stepp" (known: prefill, run, reset, step, set, seed, rewind, force, ' \
        'caption, wait)'


def test_cli_plays_a_script_and_replays_its_own_trace(folder, tmp_path):
    path = tmp_path / "lesson.json"
    path.write_text(json.dumps(_script([{"prefill": True}, {"step": 3}, {"rewind": 2}, {"force": " the"},
                                        {"caption": "fork"}, {"set": {"max_new_tokens": 6}}, {"run": True}])))
    result = subprocess.run(_cli(folder, path), **RUN)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events][:3] == ["model", "settings", "prefill"] and events[-1]["type"] == "stop"
    assert [e["type"] for e in events].count("rewind") == 1 and {"type": "caption", "text": "fork"} in events
    assert [e["forced"] for e in events if e["type"] == "step"] == [False] * 3 + [True] + [False] * 4
    trace = tmp_path / "trace.jsonl"
    trace.write_text(result.stdout)
    again = subprocess.run(_cli(folder, trace), **RUN)
    assert again.returncode == 0, again.stderr
    ids = lambda out: [(e["index"], e["token"]["id"]) for e in map(json.loads, out.splitlines())  # noqa: E731
                       if e["type"] == "step"]
    assert ids(again.stdout) == ids(result.stdout)


def test_cli_a_play_time_error_keeps_whole_lines_and_exits_2(folder, tmp_path):
    path = tmp_path / "late.json"
    path.write_text(json.dumps(_script([{"prefill": True}, {"step": 2}, {"rewind": 5}])))
    result = subprocess.run(_cli(folder, path), **RUN)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == 'error: action 2 ("rewind"): rewind 5 is past the 2 steps ' \
                                                     'taken so far'
    assert [json.loads(line)["type"] for line in result.stdout.splitlines()] == \
        ["model", "settings", "prefill", "step", "step"]
