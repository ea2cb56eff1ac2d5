"""The trace as JSON Lines, and a trace turned back into the lesson script that replays it.

A trace records what happened (the README's "Headless trace"): `model`, then `settings` (once, and
again whenever the settings in force change: before the step that first drew under them), `prefill`,
`step` (with `forced`), `rewind` / `reset` (with the seed they put in force), `branch`, `caption` and
`stop`. `main.py trace` and the app's File → Export write it with `TraceWriter`, so both record the same.

Draws are a function of (seed in force, step index), and the seed in force changes only where the prompt
is read, at a reset and at a rewind; so replaying the same settings, seeds and forced tokens draws the same
token ids. `script_from_trace` writes that replay as a script (script.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from inference.events import ModelInfo, Rewound, SettingsEvent, StepDone, Switched
from inference.messages import say, what
from inference.lessons.script import SETTING_KEYS, Script, ScriptError, decode_json, parse_script, read_text
from inference.settings import GenerationSettings


class TraceWriter:
    """Events -> trace lines, with a `settings` line wherever the settings in force change."""

    def __init__(self):
        self._last_settings: str | None = None

    def lines(self, event) -> list[str]:
        """The lines for one event: none for a SettingsEvent that changes nothing."""
        if isinstance(event, SettingsEvent):
            return self._settings(event)
        out = []
        if isinstance(event, StepDone) and event.settings is not None and event.request is None:
            out = self._settings(SettingsEvent(event.settings))
        shift = getattr(event, "shift", None)  # a context shift after the step (context_limit.py)
        return out + [event.to_json()] + ([shift.to_json()] if shift is not None else [])

    def _settings(self, event: SettingsEvent) -> list[str]:
        line = event.to_json()
        if line == self._last_settings:
            return []
        self._last_settings = line
        return [line]


def trace_lines(info: ModelInfo, events: Iterable, settings: GenerationSettings | None = None) -> list[str]:
    """The whole trace of `events` (a session's log, in order) on the model `info` describes.

    A `settings` line follows `model` even where the log has none before the prompt was read: the
    settings of the first step, with the seed its draw used (the seed in force after the prefill); with no
    step either, `settings` (those the front-end has now)."""
    events = list(events)
    writer = TraceWriter()
    lines = [info.to_json()]
    first = _first_settings(events) or (SettingsEvent(settings) if settings is not None else None)
    if first is not None:
        lines += writer.lines(first)
    for event in events:
        lines += writer.lines(event)
    return lines


def _first_settings(events: list) -> SettingsEvent | None:
    """The settings to write after `model`: the log's first, else its first step's; with the seed in force
    after the prefill (that of a step drawn before any rewind, reset or switch re-seeded)."""
    steps = [e for e in events if isinstance(e, StepDone)]
    first = next((e for e in events if isinstance(e, SettingsEvent)), None)
    if first is None and steps and steps[0].settings is not None:
        first = SettingsEvent(steps[0].settings)
    before_move = next((e for e in events if isinstance(e, (StepDone, Rewound, Switched))), None)
    if first is not None and isinstance(before_move, StepDone) and first.settings.seed != before_move.seed:
        first = SettingsEvent(replace(first.settings, seed=before_move.seed))
    return first


# --- a trace back into a script ----------------------------------------------------------------------
def script_from_trace(lines: Iterable[str]) -> dict[str, Any]:
    """A script (as JSON data) that replays the trace's token ids: its prompt ids, its settings, its seeds,
    its forced tokens and its rewinds, resets and branch switches; its captions too.

    Drawn steps become `step N`; a step that may not draw the same token on replay (after a move whose
    seed the trace does not record: a trace written before moves carried it) is forced instead, so the
    ids always match."""
    builder = _ScriptBuilder()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            raise ScriptError(say("trace.not_json", line=number)) from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ScriptError(say("trace.not_event", line=number))
        try:
            builder.add(event)
        except OverflowError:  # int() of 1e400
            raise ScriptError(say("trace.out_of_range", line=number, type=event["type"])) from None
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, ScriptError):
                raise ScriptError(say("trace.line", line=number, problem=what(e))) from None
            raise ScriptError(say("trace.invalid", line=number, type=event["type"], field=str(e))) from None
    return builder.script()


class _ScriptBuilder:
    def __init__(self):
        self.settings: dict[str, Any] | None = None  # the first settings: the script's own
        self.current: dict[str, Any] = {}  # the settings the replay has in force
        self.prompt_ids: list[int] | None = None
        self.prompt_text = ""
        self.actions: list[dict[str, Any]] = []
        self.path: list[int] = []  # token ids of the current branch
        self.drawable = True  # the replay's seed in force is the trace's

    def add(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        handler = {"settings": self._settings, "prefill": self._prefill, "step": self._step,
                   "rewind": self._rewind, "reset": self._rewind, "branch": self._branch,
                   "caption": self._caption}.get(kind)
        if handler is not None:  # `model` and `stop` need no action: a replay stops by the same rules
            handler(event)

    def _settings(self, event: dict[str, Any]) -> None:
        # Replayed one token per step: speculation takes the same tokens (speculate.py), so the script reads
        # the trace's tokens without it (its `step N` counts tokens, where a speculative step may take several).
        absent = {"context_limit": 0, "when_full": "stop"}  # written only when a limit is set
        values = {k: event.get(k, absent.get(k)) for k in SETTING_KEYS if k != "speculate"} | {"speculate": 0}
        if self.settings is None and self.prompt_ids is None:
            self.settings, self.current = dict(values), dict(values)
            return
        changed = {k: v for k, v in values.items() if self.current.get(k) != v}
        if changed:
            self.actions.append({"set": changed})
            self.current.update(changed)

    def _prefill(self, event: dict[str, Any]) -> None:
        ids = [int(t["id"]) for t in event["tokens"]]
        if self.prompt_ids is not None and ids != self.prompt_ids:
            raise ScriptError(say("trace.second_prompt"))
        self.prompt_ids = ids
        self.prompt_text = "".join(str(t["text"]) for t in event["tokens"])
        self.actions.append({"prefill": True})
        self.path, self.drawable = [], True

    def _step(self, event: dict[str, Any]) -> None:
        if self.prompt_ids is None:
            raise ScriptError(say("trace.step_first"))
        index, token = int(event["index"]), int(event["token"]["id"])
        if index != len(self.path) + 1:
            raise ScriptError(say("trace.gap", step=index, previous=len(self.path)))
        self.path.append(token)
        last = self.actions[-1] if self.actions else {}
        if event.get("forced") or not self.drawable:
            self.actions.append({"force": token})
        elif "step" in last:
            last["step"] += 1
        else:
            self.actions.append({"step": 1})

    def _reseed(self, seed: Any) -> None:
        """The replay's next move re-seeds from its settings: make their seed the one the trace put in force."""
        if seed is None:  # a trace from before moves recorded their seed: force what follows
            self.drawable = False
            return
        if self.current.get("seed") != int(seed):
            self.actions.append({"seed": int(seed)})
            self.current["seed"] = int(seed)
        self.drawable = True

    def _rewind(self, event: dict[str, Any]) -> None:
        self._reseed(event.get("seed"))
        if event["type"] == "reset":
            self.actions.append({"reset": True})
            self.path = []
        else:
            to_step = int(event["to_step"])
            self.actions.append({"rewind": to_step})
            del self.path[to_step - 1:]

    def _branch(self, event: dict[str, Any]) -> None:
        """A switch to another branch: back to where the paths part, then its tokens forced. The switch
        re-seeded, so the replay re-seeds too: by a rewind (or a reset) even where nothing is cut."""
        tokens = [int(t) for t in event["tokens"]]
        common = 0
        while common < min(len(tokens), len(self.path)) and tokens[common] == self.path[common]:
            common += 1
        common = min(common, len(self.path) - 1)  # at least one step back, so that the replay re-seeds
        self._reseed(event.get("seed"))
        self.actions.append({"rewind": common + 1} if common >= 0 else {"reset": True})
        common = max(common, 0)
        self.actions += [{"force": t} for t in tokens[common:]]
        self.path = tokens

    def _caption(self, event: dict[str, Any]) -> None:
        self.actions.append({"caption": str(event["text"])})

    def script(self) -> dict[str, Any]:
        if self.prompt_ids is None:
            raise ScriptError(say("trace.no_prefill"))
        data: dict[str, Any] = {"prompt_ids": self.prompt_ids}
        if "\\x" not in self.prompt_text:  # whole characters: the app can send it as text
            data["prompt"] = self.prompt_text
        if self.settings is not None:
            data["settings"] = self.settings
        data["actions"] = self.actions
        return data


def load_script(path: str | Path) -> Script:
    """A script file, or a trace (.jsonl whose first line is its `model` event) turned into one."""
    path = Path(path)
    text = read_text(path)
    first = text.lstrip().split("\n", 1)[0]
    try:
        if _is_trace_line(first):
            return parse_script(script_from_trace(text.splitlines()))
        return parse_script(decode_json(text))
    except ScriptError as e:  # parse_script names the place in the script; the file is named here
        raise ScriptError(say("script.in_file", file=path.name, problem=what(e))) from None


def _is_trace_line(line: str) -> bool:
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(event, dict) and event.get("type") == "model"
