"""Lesson scripts: checked with one line naming the action, and played headless (tiny random models)."""

import dataclasses
import re

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from inference.errors import is_expected
from inference.events import Caption, StepDone, Stopped
from inference.lessons.lesson import play
from inference.lessons.script import Script, ScriptError, apply_settings, parse_script
from inference.lessons.trace import load_script
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from scripted import ROOT, a_script, folder, model, play_all  # noqa: F401 (fixtures)

LESSONS = ROOT / "resources" / "lessons"


# --- parsing -------------------------------------------------------------------------------------------
BAD = [
    ([{"prefill": True}, {"stepp": 1}], r'^action 1: unknown action "stepp"'),
    ([{"prefill": True}, {"step": 0}], r'^action 1 \("step"\): step must be in \[1, 1048576\], got 0$'),
    ([{"prefill": True}, {"step": 2.5}], r'^action 1 \("step"\): step must be a whole number, got 2.5$'),
    ([{"prefill": True}, {"step": True}], r'^action 1 \("step"\): step must be a whole number'),
    ([{"prefill": True}, {"rewind": 0}], r'^action 1 \("rewind"\): rewind must be in \[1, 1048576\]'),
    ([{"prefill": True}, {"step": 1}, {"set": {"temperature": -1}}],
     r'^action 2 \("set"\): temperature must be >= 0, got -1'),
    ([{"set": {"top_p": 0}}], r'^action 0 \("set"\): top-p must be in \(0, 1\]'),
    ([{"set": {"tempo": 1}}], r'^action 0 \("set"\): unknown setting "tempo"'),
    ([{"set": {"greedy": 1}}], r'^action 0 \("set"\): greedy must be true or false'),
    ([{"set": {"stop": "."}}], r'^action 0 \("set"\): stop must be a list of non-empty strings'),
    ([{"set": {"max_new_tokens": 0}}], r'^action 0 \("set"\): max new tokens must be in \[1, 1048576\]'),
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
        parse_script(a_script(actions))
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
    ({"prompt": "x", "language": 7, "actions": [{"run": True}]}, r'^script: "language" must be a text or null'),
    ({"prompt": "x", "language": "", "actions": [{"run": True}]}, r'^script: "language" must be a text or null'),
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
        parse_script(a_script(before + [bad] + after))
    message = str(caught.value)
    assert message.startswith(f"action {len(before)}") and "\n" not in message


def test_a_good_script_parses_into_frozen_actions():
    script = parse_script(a_script([{"prefill": True}, {"step": 3}, {"set": {"temperature": 0.3, "stop": ["."]}},
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
    assert apply_settings(base, {}) == base
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
    assert (english.language, chinese.language) == (None, "zh_CN")  # the Chinese one is filmed in Chinese


# --- playing -------------------------------------------------------------------------------------------
def test_a_script_plays_into_the_expected_events(model):
    events = play_all(model, a_script([
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
    events = play_all(model, a_script([{"prefill": True}, {"step": 6}, {"rewind": 3}, {"step": 4}]))
    steps = [e for e in events if isinstance(e, StepDone)]
    assert [s.token.id for s in steps[:6]] == [s.token.id for s in steps[:2] + steps[6:]]
    assert [s.random_u for s in steps[2:6]] == [s.random_u for s in steps[6:]]


def test_force_text_takes_its_tokens_one_step_each(model):
    events = play_all(model, a_script([{"prefill": True}, {"force": " the cat"}]))
    forced = [e for e in events if isinstance(e, StepDone)]
    assert [s.token.id for s in forced] == model.tokenizer.encode(" the cat", add_special_tokens=False)
    assert all(s.forced for s in forced) and [s.index for s in forced] == list(range(1, len(forced) + 1))


def test_run_steps_until_a_stop_rule_and_step_after_it_is_refused(model):
    script = a_script([{"prefill": True}, {"set": {"max_new_tokens": 5}}, {"run": True}, {"step": 1}])
    events = []
    with pytest.raises(ScriptError) as caught:
        for event in play(Session(model), model, parse_script(script)):
            events.append(event)
    assert [e.index for e in events if isinstance(e, StepDone)] == [1, 2, 3, 4, 5]
    assert isinstance(events[-1], Stopped) and events[-1].reason == "max_new_tokens"
    assert str(caught.value) == 'action 3 ("step"): the max new tokens limit is reached; raise it, rewind or reset'


def test_step_n_ends_quietly_where_a_stop_rule_fires_inside_it(model):
    events = play_all(model, a_script([{"prefill": True}, {"set": {"max_new_tokens": 2}}, {"step": 5}, {"rewind": 2},
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
        play_all(model, a_script(actions))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_prompt_ids_are_read_exactly(model):
    events = play_all(model, {"prompt_ids": [5, 77, 200], "actions": [{"prefill": True}, {"step": 1}]})
    assert [t.id for t in events[1].tokens] == [5, 77, 200]


def test_a_too_long_prompt_names_the_prefill(model):
    with pytest.raises(ScriptError, match=r'^action 0 \("prefill"\): the prompt is 200 tokens but the context'):
        play_all(model, {"prompt_ids": [5] * 200, "actions": [{"prefill": True}]})
