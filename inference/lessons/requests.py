"""The requests of `main.py trace --requests FILE.json` and `--batch N`: what a batch (session/batch.py) serves.

The file is a JSON list of requests, each an object with the keys of a lesson script's prompt and settings
(script.py) and when it arrives:

    [{"prompt": "The capital of France is", "settings": {"seed": 1, "max_new_tokens": 8}},
     {"prompt": "Name a river", "chat": true, "system": "Be brief.", "arrive_at_step": 3},
     {"prompt_ids": [504, 3575, 282], "settings": {"greedy": true}, "arrive_at_step": 5}]

Every key is optional but the prompt (`prompt` or `prompt_ids`); settings default to the command line's, as
in `trace`; `arrive_at_step` (default 0) is the scheduler step the request joins at. Everything is checked
before the model loads; an error is one ScriptError naming the request's index in the list (from 0).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from inference.lessons.script import RequestSpec, ScriptError, apply_settings, decode_json, parse_request, read_text
from inference.messages import say, what
from inference.session.batch import BatchRequest
from inference.session.session import prompt_ids
from inference.settings import GenerationSettings
from inference.store.loading import LoadedModel

MAX_REQUESTS = 256  # they queue for the batch's 16 places


def load_requests(path: str | Path) -> list[RequestSpec]:
    """The checked requests of a file, or a ScriptError naming the file and the place."""
    path = Path(path)
    try:
        return parse_requests(decode_json(read_text(path)))
    except ScriptError as e:  # named after its file once (read_text's own errors already are)
        if str(e).startswith(f"{path.name}:"):
            raise
        raise ScriptError(say("script.in_file", file=path.name, problem=what(e))) from None


def parse_requests(data: Any) -> list[RequestSpec]:
    if not isinstance(data, list) or not data:
        raise ScriptError(say("script.requests_list"))
    if len(data) > MAX_REQUESTS:
        raise ScriptError(say("script.requests_many", count=len(data), high=MAX_REQUESTS))
    return [parse_request(index, item) for index, item in enumerate(data)]


def batch_requests(model: LoadedModel, specs: list[RequestSpec], base: GenerationSettings) -> list[BatchRequest]:
    """The requests with their prompts encoded (as `trace` encodes a prompt) and their settings over `base`."""
    out = []
    for index, spec in enumerate(specs):
        try:
            settings = apply_settings(base, dict(spec.settings))
        except ValueError as e:
            raise ScriptError(say("script.settings_of", where=say("script.request", index=index), problem=what(e))) \
                from None
        ids = list(spec.prompt_ids) if spec.prompt_ids is not None else \
            prompt_ids(model, spec.prompt, chat=spec.chat, system=spec.system)[0]
        out.append(BatchRequest(ids, settings, spec.arrive_at_step))
    return out


def copies(ids: list[int], base: GenerationSettings, n: int) -> list[BatchRequest]:
    """`--batch N`: N requests of the same prompt, all arriving at step 0, with seeds base.seed .. base.seed + N - 1
    (so that sampled requests draw different continuations, each the one `trace --seed` of its seed draws)."""
    return [BatchRequest(list(ids), replace(base, seed=base.seed + i), 0) for i in range(n)]
