"""Lesson scripts: a JSON file that drives a session, checked before anything runs.

One file drives `main.py trace --script` (inference/lessons/lesson.py plays it headless) and the app (gui/
script_player.py plays it through the controller), so a teacher can prepare a lesson and replay it
identically. The format is in the README's "Lesson scripts":

    {"prompt": "The capital of France is", "chat": false, "system": null,
     "settings": {"seed": 7, "temperature": 1.0, "max_new_tokens": 16},
     "actions": [{"prefill": true}, {"step": 3}, {"set": {"temperature": 0.3}}, {"rewind": 2},
                 {"force": " London"}, {"caption": "A fork."}, {"wait": 1500}, {"run": true}]}

`prompt_ids` (exact token ids) may stand for `prompt`: a trace turned into a script (trace.py) reads
exactly the ids it read. Everything that can be checked without a session is checked by `parse_script`;
what depends on the session (a rewind past the steps taken, a step before the prompt was read) is
checked as each action plays (`refusal`). Either way the error is a `ScriptError`: ONE line naming the
action's index in the `actions` list (counted from 0, as in the JSON) and the problem.

No torch here: the GUI imports this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from inference.messages import Message, say, what
from inference.settings import MAX_NEW_TOKENS, GenerationSettings

# Settings keys a script may set, as they are spelled in the JSON (and in the trace's `settings` event).
SAMPLER_KEYS = ("temperature", "top_k", "top_p", "min_p", "greedy")
SETTING_KEYS = ("seed",) + SAMPLER_KEYS + ("max_new_tokens", "stop", "speculate", "context_limit", "when_full")
# Actions whose value is only a marker: {"prefill": true}.
MARKERS = ("prefill", "run", "reset", "finish")
# Many requests at once (issue 39): `serve` starts them (and runs `steps` scheduler steps, or until all finish),
# `add_request` has one more join at the next scheduler step, `serve_steps` runs more steps, `finish` runs until
# every request has finished, `show_request` shows one request's own steps in the app's views.
SERVING_KINDS = ("serve", "add_request", "serve_steps", "finish", "show_request")
ACTION_KINDS = ("prefill", "run", "reset", "step", "set", "seed", "rewind", "force", "caption", "wait") + SERVING_KINDS
REQUEST_KEYS = ("prompt", "prompt_ids", "chat", "system", "settings", "arrive_at_step")
SERVE_KEYS = ("requests", "block_tokens", "n_blocks", "token_budget", "steps")
MAX_ARRIVAL = 1_000_000  # scheduler steps
MAX_SERVED = 64  # requests of one serve (they queue for the batch's 16 places)
TOP_KEYS = ("title", "language", "prompt", "prompt_ids", "chat", "system", "settings", "actions")
MAX_SEED = 2**63 - 1
MAX_FILE_BYTES = 256 << 20  # a trace of 10 000 steps with 20 candidates each is about 50 MB


class ScriptError(ValueError):
    """A lesson script that cannot be played; the message is one line naming where and what."""


@dataclass(frozen=True)
class Action:
    index: int  # in the script's `actions` list, from 0
    kind: str  # one of ACTION_KINDS
    value: Any = None  # step/rewind/seed/wait: int; caption: str; force: int or str; set: Settings pairs

    @property
    def overrides(self) -> dict[str, Any]:
        """The settings a `set` (or `seed`) action changes, keyed as in the JSON."""
        if self.kind == "seed":
            return {"seed": self.value}
        return dict(self.value) if self.kind == "set" else {}

    def label(self) -> str:
        return f'action {self.index} ("{self.kind}")'

    def error(self, problem: Message | str) -> ScriptError:
        """`problem` (a Message, or a line of English from elsewhere) as this action's ScriptError."""
        return ScriptError(say("script.action", index=self.index, kind=self.kind, problem=problem))


@dataclass(frozen=True)
class RequestSpec:
    """One request of a batch (a `--requests` file's, a `serve` action's) as asked, before its prompt is encoded."""

    prompt: str | None
    prompt_ids: tuple[int, ...] | None
    chat: bool = False
    system: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()  # overrides of the base settings, as in the JSON
    arrive_at_step: int = 0


@dataclass(frozen=True)
class ServeSpec:
    """A `serve` action: the requests, the paged cache's shape, and how many scheduler steps to run now."""

    requests: tuple[RequestSpec, ...]
    block_tokens: int = 16
    n_blocks: int = 0  # 0: enough for every request at once
    token_budget: int = 256
    steps: int = 0  # 0: until every request has finished


@dataclass(frozen=True)
class Script:
    prompt: str | None  # the text to read (with prompt_ids: only what the app sends; the ids rule)
    prompt_ids: tuple[int, ...] | None  # exact ids (a script made from a trace)
    chat: bool
    system: str | None
    settings: tuple[tuple[str, Any], ...]  # overrides of the player's base settings, as in the JSON
    actions: tuple[Action, ...]
    title: str = ""
    language: str | None = None  # the app's language the lesson is written for ("zh_CN"): a recording uses it

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(self.settings)


# --- settings ------------------------------------------------------------------------------------------
def apply_settings(base: GenerationSettings, overrides: Mapping[str, Any]) -> GenerationSettings:
    """`base` with the script's keys replaced; raises ValueError when a value is out of range."""
    sampler = replace(base.sampler, **{k: v for k, v in overrides.items() if k in SAMPLER_KEYS})
    changed = {"sampler": sampler}
    if "seed" in overrides:
        changed["seed"] = overrides["seed"]
    for key in ("max_new_tokens", "speculate", "context_limit", "when_full"):
        if key in overrides:
            changed[key] = overrides[key]
    if "stop" in overrides:
        changed["stop_strings"] = tuple(overrides["stop"])
    return replace(base, **changed).validate()


def _integer(value: Any, what: str, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(say("script.whole_number", what=what, value=_show(value)))
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(say("script.at_least", what=what, low=low, value=value) if high is None else
                         say("script.in_range", what=what, low=low, high=high, value=value))
    return value


def _real(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(say("script.number", what=what, value=_show(value)))
    return float(value)


def _setting(key: str, value: Any) -> Any:
    """One settings value checked for its type (its range is checked by the settings' validate())."""
    if key == "seed":
        return _integer(value, "seed", 0, MAX_SEED)
    if key in ("top_k", "max_new_tokens", "speculate", "context_limit"):
        return _integer(value, key)  # its range: validate()
    if key == "when_full":
        if value not in ("stop", "drop-oldest"):
            raise ValueError(say("script.when_full", value=_show(value)))
        return value
    if key == "greedy":
        if not isinstance(value, bool):
            raise ValueError(say("script.greedy", value=_show(value)))
        return value
    if key == "stop":
        if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
            raise ValueError(say("script.stop", value=_show(value)))
        return tuple(value)
    return _real(value, key)


def _object_of(data: Any, known, not_object: Message, error: type[Exception] = ValueError,
               where: Message | None = None, unknown: str = "script.unknown_key") -> dict:
    """`data` checked to be an object holding only `known` keys: else `error` with `not_object`, or naming the
    first unknown key (`unknown`: its message's code; after `where`, when given)."""
    if not isinstance(data, dict):
        raise error(not_object)
    extra = [k for k in data if k not in known]
    if extra:
        found = say(unknown, key=extra[0], known=", ".join(known))
        raise error(found if where is None else say("script.in_place", where=where, problem=found))
    return data


def parse_settings(data: Any) -> tuple[tuple[str, Any], ...]:
    """Settings overrides checked for unknown keys, types and ranges (ValueError names the problem)."""
    _object_of(data, SETTING_KEYS, say("script.settings_object", value=_show(data)), unknown="script.unknown_setting")
    pairs = tuple((k, _setting(k, data[k])) for k in SETTING_KEYS if k in data)
    apply_settings(GenerationSettings(), dict(pairs))  # the ranges: the settings' own rules
    return pairs


# --- files -------------------------------------------------------------------------------------------
def read_text(path: Path) -> str:
    """A script's (or trace's, or batch's requests') file as text; a ScriptError naming it when it cannot be."""
    try:
        if not path.exists():
            raise ScriptError(say("script.no_file", file=path.name))
        if not path.is_file():  # a FIFO or a device would be read forever
            raise ScriptError(say("script.not_file", file=path.name))
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ScriptError(say("script.too_big", file=path.name, size=path.stat().st_size / 1e6,
                                  limit=MAX_FILE_BYTES >> 20))
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ScriptError(say("script.not_utf8", file=path.name)) from None
    except OSError as e:  # unreadable: permissions, a folder's race
        raise ScriptError(say("script.file_unreadable", file=path.name, why=e.strerror or str(e))) from None


def decode_json(text: str) -> Any:
    """The JSON value of `text`, or a ScriptError saying where it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ScriptError(say("script.not_json", line=e.lineno, column=e.colno, why=e.msg)) from None
    except RecursionError:
        raise ScriptError(say("script.nested")) from None


# --- parsing -------------------------------------------------------------------------------------------
def _action_value(kind: str, value: Any) -> Any:
    if kind in MARKERS:
        if value is not True:
            raise ValueError(say("script.marker", kind=kind, value=_show(value)))
        return None
    if kind in ("step", "rewind"):
        return _integer(value, kind, 1, MAX_NEW_TOKENS)
    if kind == "serve_steps":
        return _integer(value, kind, 1, MAX_ARRIVAL)
    if kind == "show_request":
        return _integer(value, kind, 0, MAX_SERVED - 1)
    if kind == "serve":
        return parse_serve(value)
    if kind == "add_request":
        if isinstance(value, dict) and "arrive_at_step" in value:
            raise ValueError(say("script.added_arrival"))
        try:
            return parse_request(0, value, say("script.the_request"))
        except ScriptError as e:
            raise ValueError(what(e)) from None
    if kind == "seed":
        return _integer(value, "seed", 0, MAX_SEED)
    if kind == "wait":
        return _integer(value, "wait (milliseconds)", 0, 3_600_000)
    if kind == "caption":
        if not isinstance(value, str):
            raise ValueError(say("script.caption", value=_show(value)))
        return value
    if kind == "force":
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise ValueError(say("script.force", value=_show(value)))
    return parse_settings(value)  # set


def parse_request(index: int, data: Any, where: Message | None = None) -> RequestSpec:
    """One request object (`--requests` file, `serve`, `add_request`) checked; an error names it."""
    where = where or say("script.request", index=index)
    _object_of(data, REQUEST_KEYS, say("script.request_object", where=where), ScriptError, where)
    prompt, ids = parse_prompt(data, where)
    if prompt is None and ids is None:
        raise ScriptError(say("script.request_no_prompt", where=where))
    chat, system, arrives = data.get("chat", False), data.get("system"), data.get("arrive_at_step", 0)
    if not isinstance(chat, bool):
        raise ScriptError(say("script.key", where=where, key="chat", kind=say("script.a_bool")))
    if system is not None and not isinstance(system, str):
        raise ScriptError(say("script.key", where=where, key="system", kind=say("script.a_text_or_null")))
    if isinstance(arrives, bool) or not isinstance(arrives, int) or not 0 <= arrives <= MAX_ARRIVAL:
        raise ScriptError(say("script.key", where=where, key="arrive_at_step",
                              kind=say("script.a_step_number", high=MAX_ARRIVAL)))
    try:
        settings = parse_settings(data.get("settings", {}))
    except ValueError as e:
        raise ScriptError(say("script.settings_of", where=where, problem=what(e))) from None
    return RequestSpec(prompt, ids, chat, system or None, settings, arrives)


def parse_serve(data: Any) -> ServeSpec:
    """A `serve` action's value checked (ValueError names the problem)."""
    _object_of(data, SERVE_KEYS, say("script.serve_object", value=_show(data)))
    requests = data.get("requests")
    if not isinstance(requests, list) or not 1 <= len(requests) <= MAX_SERVED:
        raise ValueError(say("script.serve_requests", high=MAX_SERVED))
    try:
        specs = tuple(parse_request(i, r) for i, r in enumerate(requests))
    except ScriptError as e:
        raise ValueError(what(e)) from None
    return ServeSpec(specs, _integer(data.get("block_tokens", 16), "block_tokens", 1, 4096),
                     _integer(data.get("n_blocks", 0), "n_blocks", 0, 1_000_000),
                     _integer(data.get("token_budget", 256), "token_budget", 1, 1_000_000),
                     _integer(data.get("steps", 0), "steps", 0, MAX_ARRIVAL))


def parse_action(index: int, data: Any) -> Action:
    if not isinstance(data, dict) or not data:
        raise ScriptError(say("script.action_object", index=index, value=_show(data)))
    if len(data) > 1:
        raise ScriptError(say("script.one_action", index=index, keys=", ".join(f'"{k}"' for k in data)))
    (kind, value), = data.items()
    if kind not in ACTION_KINDS:
        raise ScriptError(say("script.unknown_action", index=index, kind=kind, known=", ".join(ACTION_KINDS)))
    action = Action(index, kind)
    try:
        return Action(index, kind, _action_value(kind, value))
    except ValueError as e:
        raise action.error(what(e)) from None


def parse_prompt(data: dict, where: Message | None = None) -> tuple[str | None, tuple[int, ...] | None]:
    """The "prompt" text and the "prompt_ids" of a script (or of a batch's request: requests.py), checked;
    an error names `where`."""
    where = where or say("script.script")
    prompt, ids = data.get("prompt"), data.get("prompt_ids")
    if prompt is not None and not isinstance(prompt, str):
        raise ScriptError(say("script.key_got", where=where, key="prompt", kind=say("script.a_text"),
                              value=_show(prompt)))
    if ids is not None:
        if not isinstance(ids, list) or not ids or not all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise ScriptError(say("script.key_got", where=where, key="prompt_ids", kind=say("script.a_list_of_ids"),
                                  value=_show(ids)))
        if data.get("chat"):
            raise ScriptError(say("script.ids_and_chat", where=where))
        ids = tuple(ids)
    return prompt, ids


def parse_script(data: Any) -> Script:
    """A checked Script from the decoded JSON, or a ScriptError naming the first problem."""
    script = say("script.script")
    _object_of(data, TOP_KEYS, say("script.not_a_script", value=_show(data)), ScriptError, script)
    prompt, ids = parse_prompt(data)
    chat, system, title = data.get("chat", False), data.get("system"), data.get("title", "")
    if not isinstance(chat, bool):
        raise ScriptError(say("script.key_got", where=script, key="chat", kind=say("script.a_bool"), value=_show(chat)))
    if system is not None and not isinstance(system, str):
        raise ScriptError(say("script.key_got", where=script, key="system", kind=say("script.a_text_or_null"),
                              value=_show(system)))
    if not isinstance(title, str):
        raise ScriptError(say("script.key_got", where=script, key="title", kind=say("script.a_text"),
                              value=_show(title)))
    language = data.get("language")
    if language is not None and not (isinstance(language, str) and language):
        raise ScriptError(say("script.key_got", where=script, key="language", kind=say("script.a_text_or_null"),
                              value=_show(language)))
    try:
        settings = parse_settings(data.get("settings", {}))
    except ValueError as e:
        raise ScriptError(say("script.settings", problem=what(e))) from None
    actions = data.get("actions")
    if not isinstance(actions, list) or not actions:
        raise ScriptError(say("script.key_got", where=script, key="actions", kind=say("script.a_list"),
                              value=_show(actions)))
    parsed = tuple(parse_action(i, a) for i, a in enumerate(actions))
    reads = next((a for a in parsed if a.kind == "prefill"), None)
    if reads is not None and prompt is None and ids is None:
        raise reads.error(say("script.no_prompt"))
    return Script(prompt=prompt, prompt_ids=ids, chat=chat, system=system or None, settings=settings,
                  actions=parsed, title=title, language=language)


# --- what depends on the session: checked as each action plays -------------------------------------------
def refusal(action: Action, prefilled: bool, n_steps: int, blocked: Message | None,
            served: int = 0) -> ScriptError | None:
    """Why `action` cannot play now (None when it can): `blocked` is the session's reason a step would
    be refused ("" when it would be taken); `served`: requests of the serve under way (0: none). Serving steps
    once every request has finished do nothing (a request may end early on its end-of-sequence token)."""
    if action.kind in SERVING_KINDS[1:] and not served:
        return action.error(say("script.not_served"))
    if action.kind == "show_request" and action.value >= served:
        return action.error(say("script.not_a_request", request=action.value, served=served))
    if action.kind in ("step", "run", "force", "rewind", "reset") and not prefilled:
        return action.error(say("script.not_prefilled"))
    if action.kind == "rewind" and action.value > n_steps:
        return action.error(say("script.rewind_past", step=action.value, steps=n_steps))
    if action.kind in ("step", "run", "force") and blocked:
        return action.error(blocked)
    return None


def _show(value: Any) -> str:
    """A value as the JSON had it, cut short: messages stay one line."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."
