"""Traces: the settings in force at every step, and a trace turned back into a script that replays the same
token ids (tiny random models; the CLI in a subprocess)."""

import dataclasses
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from inference.events import StepDone
from inference.lessons.lesson import play
from inference.lessons.script import ScriptError, apply_settings, parse_script
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.lessons.trace import script_from_trace, trace_lines
from scripted import ROOT, SAMPLED, a_script, folder, model, play_all, steps_of, trace_of  # noqa: F401 (fixtures)


# --- traces ----------------------------------------------------------------------------------------------
def test_the_trace_records_the_settings_in_force_at_every_step(model):
    lines = trace_of(model, play_all(model, a_script([{"prefill": True}, {"step": 2}, {"set": {"top_k": 5}},
                                                {"set": {"top_k": 5}}, {"step": 1}])))
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["model", "settings", "prefill", "step", "step", "settings", "step"]
    assert events[1]["top_k"] == 0 and events[5]["top_k"] == 5 and events[1]["seed"] == 7
    assert set(events[1]) == {"type", "seed", "temperature", "top_k", "top_p", "min_p", "greedy", "max_new_tokens",
                              "stop", "speculate"}


def test_a_log_without_settings_events_gets_them_from_its_steps(model):
    """The app's log has no settings events: the steps' settings are written, with the prefill's seed."""
    session = Session(model, GenerationSettings(SamplerSettings(temperature=1.5, top_k=0), seed=5))
    log = [session.prefill([5, 77, 200])]
    session.update_settings(dataclasses.replace(session.settings, seed=6))  # applies from the next rewind
    log += list(session.step())
    session.update_settings(dataclasses.replace(session.settings, sampler=SamplerSettings(temperature=0.4)))
    log += list(session.step()) + [session.rewind(2)] + list(session.step())
    only_prefill = [json.loads(line) for line in trace_lines(model.info(), log[:1], session.settings)]
    assert [e["type"] for e in only_prefill] == ["model", "settings", "prefill"] and only_prefill[1]["seed"] == 6
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
    return steps_of(play(Session(model), model, script))


def test_a_trace_turned_into_a_script_replays_its_token_ids(model):
    events = play_all(model, a_script([
        {"prefill": True}, {"step": 3}, {"set": {"temperature": 0.8, "top_k": 40}}, {"rewind": 2}, {"step": 2},
        {"force": " the cat"}, {"seed": 11}, {"rewind": 4}, {"step": 2}, {"caption": "hi"}, {"set": {"seed": 3}},
        {"reset": True}, {"set": {"greedy": True}}, {"step": 2}, {"set": {"greedy": False, "max_new_tokens": 6}},
        {"run": True}]))
    lines = trace_of(model, events)
    script = script_from_trace(lines)
    assert script["prompt_ids"] == [t.id for t in events[1].tokens] and script["settings"]["seed"] == 7
    assert {"caption": "hi"} in script["actions"] and {"reset": True} in script["actions"]
    replayed = list(play(Session(model), model, parse_script(script)))
    assert steps_of(replayed) == steps_of(events)
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
    path.write_text(json.dumps(a_script([{"prefill": True}, {"stepp": 2}])))
    result = subprocess.run(_cli(folder, path), **RUN)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == \
        f'error: {path.name}: action 1: unknown action "stepp" (known: prefill, run, reset, step, set, seed, rewind, ' \
        'force, caption, wait, serve, add_request, serve_steps, finish, show_request)'  # the file named, as every
    # bad input's line does


def test_cli_plays_a_script_and_replays_its_own_trace(folder, tmp_path):
    path = tmp_path / "lesson.json"
    path.write_text(json.dumps(a_script([{"prefill": True}, {"step": 3}, {"rewind": 2}, {"force": " the"},
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
    path.write_text(json.dumps(a_script([{"prefill": True}, {"step": 2}, {"rewind": 5}])))
    result = subprocess.run(_cli(folder, path), **RUN)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == 'error: action 2 ("rewind"): rewind 5 is past the 2 steps ' \
                                                     'taken so far'
    assert [json.loads(line)["type"] for line in result.stdout.splitlines()] == \
        ["model", "settings", "prefill", "step", "step"]


def test_a_lesson_sets_a_context_limit_and_shows_the_full_stop(model):
    """A lesson can run in a small window on purpose: the context_full stop, or a shift with drop-oldest."""
    from inference.events import Stopped

    prompt_ids = list(range(20, 40))  # 20 tokens
    for when_full, reason in (("stop", "context_full"), ("drop-oldest", "max_new_tokens")):
        script = parse_script({"prompt_ids": prompt_ids, "settings": {"greedy": True, "max_new_tokens": 30,
                                                                        "context_limit": 32, "when_full": when_full},
                               "actions": [{"prefill": True}, {"run": True}]})
        events = list(play(Session(model), model, script))
        stops = [e for e in events if isinstance(e, Stopped)]
        assert stops and stops[-1].reason == reason
        n = len(steps_of(events))
        assert n == (32 - 20 if when_full == "stop" else 30)  # past the limit only with drop-oldest
    with pytest.raises(ScriptError, match="when_full"):
        parse_script({"prompt": "x", "settings": {"when_full": "wrap"}, "actions": []})
