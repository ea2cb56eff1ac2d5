"""Play a lesson script on a session, headless: the events `main.py trace --script` prints.

The app plays the same scripts through its controller (gui/lessons/script_player.py) and checks each action
with the same rules (script.refusal), so both refuse the same actions with the same line. `wait` only
paces the app, and `show_request` only picks what its views show; here they do nothing.

The serving actions (issue 39) drive a batch scheduler (session/batch.py) beside the script's own session: `serve`
starts one (each request's settings, with its `request`, first), `add_request` has a request join at the next
scheduler step, `serve_steps` and `finish` run its steps; their events are those of `trace --requests`.
"""

from __future__ import annotations

from typing import Iterator

from inference.errors import NotReady
from inference.events import (BlocksReport, Caption, PrefillDone, RequestDone, Rewound, ScheduleDone, SettingsEvent,
                              StepDone, Stopped)
from inference.messages import say, what
from inference.store.loading import LoadedModel
from inference.lessons.requests import batch_requests
from inference.lessons.script import Action, Script, ScriptError, apply_settings, refusal
from inference.session.batch import Scheduler, blocks_for_all
from inference.session.session import Session, prompt_ids

Event = PrefillDone | StepDone | Stopped | Rewound | SettingsEvent | Caption | ScheduleDone | BlocksReport | RequestDone


class Serving:
    """The serve a script started (None before its `serve`)."""

    def __init__(self):
        self.scheduler: Scheduler | None = None

    @property
    def served(self) -> int:
        return len(self.scheduler.requests) if self.scheduler is not None else 0

    @property
    def done(self) -> bool:
        return self.scheduler is None or self.scheduler.done

    def steps(self, n: int) -> Iterator[Event]:
        """n scheduler steps (0: until every request has finished)."""
        taken = 0
        while not self.scheduler.done and (not n or taken < n):
            yield from self.scheduler.step()
            taken += 1


def script_settings(session: Session, script: Script) -> SettingsEvent:
    """Put the script's settings over the session's (a CLI's flags, a model's defaults) in force."""
    try:
        settings = apply_settings(session.settings, script.overrides)
    except ValueError as e:
        raise ScriptError(say("script.settings", problem=what(e))) from None
    session.update_settings(settings)
    return SettingsEvent(session.settings)


def play(session: Session, model: LoadedModel, script: Script) -> Iterator[Event]:
    """Every event of the script, in order: its settings first, then what each action reports.

    Raises ScriptError (one line naming the action) at the first action that cannot play; the events
    before it have been yielded."""
    yield script_settings(session, script)
    serving = Serving()
    for action in script.actions:
        why = refusal(action, session.prefilled, len(session.generated), session.blocked(), serving.served)
        if why is not None:
            raise why
        try:
            yield from _play(session, model, script, action, serving)
        except ScriptError:
            raise
        except (ValueError, NotReady) as e:  # what the session refuses (a prompt too long, an id too big)
            raise action.error(what(e)) from None


def _play(session: Session, model: LoadedModel, script: Script, action: Action, serving: Serving) -> Iterator[Event]:
    kind = action.kind
    if kind == "prefill":
        yield from _prefill(session, model, script)
    elif kind == "step":
        for _ in range(action.value):
            if session.blocked():  # a stop rule fired inside this action: its Stopped was reported
                return
            yield from session.step()
    elif kind == "run":
        yield from session.run()
    elif kind in ("set", "seed"):
        settings = apply_settings(session.settings, action.overrides)
        if settings != session.settings:
            session.update_settings(settings)
            yield SettingsEvent(settings)
    elif kind == "reset":
        yield session.reset()
    elif kind == "rewind":
        yield session.rewind(action.value)
    elif kind == "force":
        yield from session.force(action.value)
    elif kind == "caption":
        yield Caption(action.value)
    elif kind == "serve":
        spec = action.value
        asked = batch_requests(model, list(spec.requests), session.settings)
        serving.scheduler = Scheduler(model, asked, spec.n_blocks or blocks_for_all(model, asked, spec.block_tokens),
                                      spec.block_tokens, spec.token_budget)
        for index, request in enumerate(asked):
            yield SettingsEvent(request.settings, request=index)
        yield from serving.steps(spec.steps)
    elif kind == "add_request":
        asked = batch_requests(model, [action.value], session.settings)[0]
        index = serving.scheduler.add(asked)
        yield SettingsEvent(asked.settings, request=index)
    elif kind in ("serve_steps", "finish"):
        yield from serving.steps(action.value or 0)
    # "wait" paces the app only, "show_request" picks what its views show


def _prefill(session: Session, model: LoadedModel, script: Script) -> Iterator[Event]:
    if script.prompt_ids is not None:
        ids, text = list(script.prompt_ids), model.tokenizer.decode(list(script.prompt_ids))
    else:
        ids, text = prompt_ids(model, script.prompt, chat=script.chat, system=script.system)
    yield session.prefill(ids, text)
    if session.stopped is not None:  # the prompt filled the context window
        yield session.stopped
