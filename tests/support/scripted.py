"""What the lesson-script tests share: a tiny random model (folder and loaded, without EOS) and helpers."""

import dataclasses
from pathlib import Path

import pytest

from inference.events import StepDone
from inference.lessons.lesson import play
from inference.store.loading import load_model
from inference.lessons.script import parse_script
from inference.session.session import Session
from inference.lessons.trace import TraceWriter
from tiny import make_hf_model, save_hf_model

ROOT = Path(__file__).resolve().parents[2]
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


def a_script(actions, **top):
    """A script on the tiny model's prompt, sampled with a seed."""
    return {"prompt": "the cat", "settings": SAMPLED, "actions": actions, **top}


def play_all(model, data):
    return list(play(Session(model), model, parse_script(data)))


def trace_of(model, events):
    writer = TraceWriter()
    return [model.info().to_json()] + [line for e in events for line in writer.lines(e)]


def steps_of(events):
    return [(e.index, e.token.id, e.forced) for e in events if isinstance(e, StepDone)]
