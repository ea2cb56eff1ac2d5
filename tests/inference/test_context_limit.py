"""A context limit on purpose (inference/session/context_limit.py): the context_full stop at the limit, and the
drop-oldest context shift, whose cache and next logits must equal a fresh prefill of the kept tokens."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from app_driver import idle, settle, wait_until, window_fixture
from inference.cli import main
from inference.errors import NotReady
from inference.events import StepDone, Stopped
from inference.model.layers import select_backend
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from session_checks import assert_cache_is_fresh
from tiny import build_decoder, make_hf_model, save_hf_model

PROMPT = [5, 77, 200, 31, 9, 14, 250, 3, 88, 120, 61, 7, 199, 42, 11, 301, 56, 97, 230, 18]  # 20 tokens
SAMPLED = SamplerSettings(temperature=1.5, top_k=0)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", seed=5), tmp_path_factory.mktemp("llama"))


@pytest.fixture(scope="module")
def llama(folder):
    """The tiny Llama in float64 (no rounding between a cached and a fresh path), with no EOS."""
    model = load_model(folder, device="cpu")
    decoder = build_decoder(folder, select_backend("cpu", torch.float64))
    return dataclasses.replace(model, decoder=decoder, config=dataclasses.replace(model.config, eos_ids=()))


def _session(model, when_full="stop", limit=32, max_new=60, sampler=SAMPLED):
    return Session(model, GenerationSettings(sampler, max_new_tokens=max_new, context_limit=limit,
                                             when_full=when_full, seed=3))


def assert_window_is_fresh(session: Session) -> None:
    """The cache holds exactly the kept tokens (a fresh prefill of them at positions 0..), to float64 rounding."""
    assert_cache_is_fresh(session, session.window_ids(), tolerance=1e-9)


def test_run_stops_at_the_context_limit(llama):
    session = _session(llama)
    session.prefill(PROMPT)
    events = list(session.run())
    assert isinstance(events[-1], Stopped) and events[-1].reason == "context_full"
    assert session.n_context == 32 and len(session.generated) == 12
    assert "context_full" in str(session.blocked())
    steps = [e for e in events if isinstance(e, StepDone)]
    assert all(s.shift is None for s in steps) and steps[-1].context_tokens == 32


def test_drop_oldest_goes_on_with_a_fresh_cache(llama):
    session = _session(llama, "drop-oldest")
    session.prefill(PROMPT)
    steps = []
    while not any(s.shift for s in steps):
        steps += [e for e in session.step() if isinstance(e, StepDone)]
    shift = steps[-1].shift
    assert len(steps) == 12 and shift.step == 12  # the token that filled the 32 positions
    assert (shift.dropped, shift.kept, shift.first_dropped, shift.window) == (15, 17, 1, 32)
    everything = session.prompt + session.generated
    assert session.window_ids() == everything[:1] + everything[16:] and len(session.window_ids()) == 17
    assert_window_is_fresh(session)  # the re-read pass: the pending logits of a fresh forward over them
    for _ in range(5):  # and the steps after it read on at the shifted positions
        steps += [e for e in session.step() if isinstance(e, StepDone)]
        assert_window_is_fresh(session)
    assert steps[-1].position == 17 + 5 - 1 and steps[-1].context_tokens == 22


def test_drop_oldest_runs_past_the_limit_shifting_again(llama):
    session = _session(llama, "drop-oldest", max_new=40)
    session.prefill(PROMPT)
    events = list(session.run())
    assert events[-1].reason == "max_new_tokens" and session.n_context == 60 > 32
    shifts = [e.shift for e in events if isinstance(e, StepDone) and e.shift is not None]
    assert [s.step for s in shifts] == [12, 27] and shifts[1].first_dropped == 16
    assert session.dropped == 30 and session.n_window == 30
    assert_window_is_fresh(session)


def test_no_kv_cache_shifts_to_the_same_logits(llama):
    cached, uncached = _session(llama, "drop-oldest"), _session(llama, "drop-oldest")
    uncached.use_kv_cache(False)
    for session in (cached, uncached):
        session.prefill(PROMPT)
        for _ in range(16):
            list(session.step())
    assert cached.generated == uncached.generated and cached.shifts and uncached.shifts
    assert (cached.pending_logits - uncached.pending_logits).abs().max().item() <= 1e-9


def test_after_a_shift_rewind_is_refused_and_reset_rereads_the_prompt(llama):
    session = _session(llama, "drop-oldest")
    session.prefill(PROMPT)
    for _ in range(13):
        list(session.step())
    with pytest.raises(NotReady, match="shifted at step 12"):
        session.rewind(3)
    with pytest.raises(NotReady, match="shifted"):
        session.switch(1)
    first = session.tree.path(session.node)[0]
    rewound = session.reset()
    assert session.shifts == () and session.generated == [] and rewound.reset
    assert_window_is_fresh(session)  # the prompt's dropped positions were read again
    session.switch(first)  # branches work again: the switch re-reads its path
    assert_window_is_fresh(session)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="context limit"):
        GenerationSettings(context_limit=2).validate()
    with pytest.raises(ValueError, match="when full"):
        GenerationSettings(when_full="wrap").validate()
    with pytest.raises(ValueError, match="speculation and drop-oldest"):
        GenerationSettings(speculate=4, when_full="drop-oldest").validate()


def test_a_prompt_longer_than_the_limit_is_refused(llama):
    with pytest.raises(ValueError, match="context limit"):
        _session(llama, limit=16).prefill(PROMPT)


def _trace(folder, capsys, *options):
    rc = main(["trace", "--model", str(folder), "--prompt", "hello",
               "--max-new-tokens", "30", "--seed", "1", *options])
    assert rc == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_trace_options(folder, capsys):
    stop = _trace(folder, capsys, "--context-limit", "16")
    assert stop[-1]["type"] == "stop" and stop[-1]["reason"] == "context_full"
    n_prompt = next(e for e in stop if e["type"] == "prefill")["n_tokens"]
    assert stop[-1]["n_generated"] == 16 - n_prompt
    settings = next(e for e in stop if e["type"] == "settings")
    assert (settings["context_limit"], settings["when_full"]) == (16, "stop")
    shifted = _trace(folder, capsys, "--context-limit", "16", "--when-full", "drop-oldest")
    kinds = [e["type"] for e in shifted]
    assert shifted[-1]["reason"] == "max_new_tokens" and "context_shift" in kinds
    shift = shifted[kinds.index("context_shift")]
    assert kinds[kinds.index("context_shift") - 1] == "step"  # after the step that filled the window
    assert shifted[kinds.index("context_shift") - 1]["index"] == 16 - n_prompt
    assert (shift["dropped"], shift["kept"], shift["reread_tokens"], shift["window"]) == (7, 9, 8, 16)
    with pytest.raises(SystemExit):
        main(["trace", "--context-limit", "2"])


# --- the app: the Controls' context limit, the Context view's greyed dropped tokens (pytest-qt) ---------
PROMPT_20 = "Count: 1, 2, 3, 4, 5, 6,"  # 20 tokens; greedy, the model counts on past a context shift


window = window_fixture("context_limit")


def _prefill_and_run(win, when_full: str):
    ctl, c = win.controls, win.controller
    ctl.chat.setChecked(False)
    ctl.greedy.setChecked(True)
    ctl.max_new.setValue(40)
    ctl.context_limit.setValue(32)
    ctl.when_full.setCurrentIndex(ctl.when_full.findData(when_full))
    ctl.prompt.setPlainText(PROMPT_20)
    win.actions["prefill"].trigger()
    wait_until(lambda: c.prefilled and not c.steps and c.prefill_event.prompt_text == PROMPT_20 and idle(c))
    assert c.prefill_event.n_tokens == 20
    win.actions["run"].trigger()
    wait_until(lambda: c.stopped is not None and idle(c))
    settle(win)
    return c, win.views["context"]


def test_app_run_ends_with_context_full_at_the_limit(window):
    c, view = _prefill_and_run(window, "stop")
    assert c.stopped.reason == "context_full" and len(c.steps) == 12
    assert view.canvas.dropped == 0 and "of 32 positions in the context limit" in view.summary.text()


def test_app_drop_oldest_goes_on_and_greys_the_dropped_tokens(window):
    c, view = _prefill_and_run(window, "drop-oldest")
    assert c.stopped.reason == "max_new_tokens" and len(c.steps) == 40  # 60 tokens through a window of 32
    assert [s.index for s in c.steps if s.shift] == [12, 27]
    chips = view.canvas.chips
    assert view.canvas.dropped == 30
    assert [i for i, chip in enumerate(chips) if chip.dropped_at == 12] == list(range(1, 16))
    assert [i for i, chip in enumerate(chips) if chip.dropped_at == 27] == list(range(16, 31))
    assert chips[0].dropped_at is None and chips[31].dropped_at is None
    assert view.canvas.tooltips[5].startswith("dropped from the context at step 12")
    assert "2 context shifts (drop-oldest) dropped the 30 oldest tokens" in view.summary.text()
    assert "the model reads 30 of 32 positions in the context limit" in view.summary.text()
    c.select(10)  # a step before the first shift: nothing was dropped yet when the model read it
    settle(window)
    assert view.canvas.dropped == 0
    c.select(None)


def test_after_the_context_full_stop_drop_oldest_or_a_higher_limit_goes_on(llama):
    session = _session(llama)
    session.prefill(PROMPT)
    list(session.run())
    assert session.stopped.reason == "context_full" and session.blocked()
    session.update_settings(dataclasses.replace(session.settings, when_full="drop-oldest"))
    assert session.blocked() is None
    steps = [e for e in session.step() if isinstance(e, StepDone)]
    assert steps[0].index == 13 and steps[0].shift is not None and steps[0].shift.kept == 17
    assert_window_is_fresh(session)
    session.update_settings(dataclasses.replace(session.settings, when_full="stop", context_limit=48))
    list(session.step())
    assert session.stopped is None and session.n_window == 18  # 17 after the shift, one more
    assert_window_is_fresh(session)
