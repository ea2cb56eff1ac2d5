"""The engine loop over real pipes, in this process: typed commands in, typed replies out, one run loop."""


import pytest
from engine_driver import EngineOverPipes, of, serve, steps
from speculate_support import _repeating_token

from inference.engine import protocol as p
from inference.events import SessionStatus, StepDone
from inference.settings import GenerationSettings, SamplerSettings
from inference.store.loading import load_model
from tiny import make_hf_model, save_hf_model

GREEDY = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=40)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(save_hf_model(make_hf_model("llama", seed=3), tmp_path_factory.mktemp("engine")))


def test_a_bad_message_gets_an_error_reply_and_the_engine_goes_on(folder):
    replies = serve(["not an envelope", p.Envelope(p.PROTOCOL_VERSION + 1, p.Step()),
                     p.Envelope(p.PROTOCOL_VERSION, p.Ready(cuda=False)), p.wrap(p.Step()),
                     p.wrap(p.Load(folder, "cpu", "float32", 1))], finished=2)
    failed = of(replies, p.Failed)
    assert "not a protocol message" in failed[0].message
    assert "protocol version" in failed[1].message
    assert "unknown command: Ready" in failed[2].message
    assert "no model is loaded" in failed[3].message and failed[3].expected
    assert of(replies, p.ModelLoaded)[0].tag == 1


def test_run_is_the_session_run_loop_with_batches_and_a_step_limit(folder):
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)),
                     p.wrap(p.Prefill("the cat", False, "", GREEDY, 2)),
                     p.wrap(p.Run(max_steps=5, batch_s=60.0))], finished=3)
    taken = steps(replies)
    assert [s.index for s in taken] == [1, 2, 3, 4, 5]
    # the first step at once, the rest of the run in one batch: 60 s never passed
    assert [len(r.events) for r in of(replies, p.Stepped)] == [1, 4]
    statuses = [r.status for r in of(replies, p.Status)]
    assert any(s.running for s in statuses) and not statuses[-1].running
    assert statuses[-1] == SessionStatus(True, False, None, 5, GREEDY)
    finished = [r.command for r in of(replies, p.Finished)]
    assert finished == ["Load", "Prefill", "Run"]
    assert all(r.tag == 2 for r in of(replies, p.Stepped) + of(replies, p.PendingStep))


def test_pause_ends_a_run_before_its_next_step_and_a_new_prompt_ends_it_too(folder):
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)),
                     p.wrap(p.Prefill("the cat", False, "", GREEDY, 2)),
                     p.wrap(p.Run()), p.wrap(p.Pause()),
                     p.wrap(p.Run()), p.wrap(p.Step()),
                     p.wrap(p.Run()), p.wrap(p.Prefill("a dog", False, "", GREEDY, 3))], finished=7)
    assert [s.index for s in steps(replies)] == [1]  # every run ended before its first step; one Step
    prefilled = of(replies, p.Prefilled)
    assert [r.tag for r in prefilled] == [2, 3]
    assert [r.command for r in of(replies, p.Finished)] == ["Load", "Prefill", "Run", "Run", "Step", "Run",
                                                            "Prefill"]


def test_abort_ends_the_generation_and_settings_preview_without_a_forward(folder):
    hot = GenerationSettings(SamplerSettings(temperature=3.0, top_k=0), max_new_tokens=40)
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)),
                     p.wrap(p.Prefill("the cat", False, "", GREEDY, 2)), p.wrap(p.Configure(hot)),
                     p.wrap(p.Step()), p.wrap(p.Abort()), p.wrap(p.Reset(GREEDY, 3)), p.wrap(p.Step())],
                    finished=7)
    finished = {r.command: r.forward_count for r in of(replies, p.Finished)}
    assert finished["Configure"] == finished["Prefill"]  # the preview reused the prefill's logits
    pending = of(replies, p.PendingStep)
    assert pending[0].event.dist.settings.temperature == 3.0
    ended = of(replies, p.Ended)
    assert [e.event.reason for e in ended] == ["aborted"]
    after_reset = [e for r in of(replies, p.Stepped) if r.tag == 3 for e in r.events]
    assert [s.index for s in after_reset] == [1] and isinstance(after_reset[0], StepDone)


def test_rewind_force_and_switch_over_the_pipe(folder):
    commands = [p.Load(folder, "cpu", "float32", 1), p.Prefill("the cat", False, "", GREEDY, 2),
                p.Step(), p.Step(), p.Step(), p.Rewind(2), p.Force(7), p.Step(), p.Rewind(99), p.Switch(3)]
    replies = serve([p.wrap(c) for c in commands], finished=len(commands))
    taken = steps(replies)
    assert [e.index for e in taken] == [1, 2, 3, 2, 3]
    assert taken[3].forced and taken[3].token.id == 7 and taken[3].parent == taken[0].node
    assert not taken[4].forced
    rewound = of(replies, p.RewoundReply)[0].event
    assert rewound.to_step == 2 and rewound.node == taken[0].node
    assert "rewind 99 is outside" in of(replies, p.Failed)[0].message  # and the engine went on
    switched = of(replies, p.SwitchedReply)[0].event
    assert switched.node == 3 and switched.tokens == tuple(e.token.id for e in taken[:3])
    assert switched.reread_tokens == 2  # steps 2 and 3 of the first branch, in one pass
    assert of(replies, p.PendingStep)[-1].event.index == 4


def test_a_verify_pass_comes_before_the_steps_it_decided(folder):
    import dataclasses

    from inference.events import Verified

    # a token the model continues with itself: prompt lookup drafts what the greedy draw then takes, so verify
    # passes run (a pass runs only when the known draw keeps the draft's first token)
    repeating = _repeating_token(load_model(folder, device="cpu", dtype="float32"))
    spec = dataclasses.replace(GREEDY, speculate=4, max_new_tokens=24)
    commands = [p.Load(folder, "cpu", "float32", 1), p.Prefill("", False, "", spec, 2, ids=(repeating,) * 8),
                p.Run(max_steps=0)]
    replies = serve([p.wrap(c) for c in commands], finished=len(commands))
    events = [e for r in of(replies, p.Stepped) for e in r.events]
    verifies = [(i, e) for i, e in enumerate(events) if isinstance(e, Verified)]
    assert verifies, "a repeated pattern drafts"
    for at, v in verifies:
        decided = events[at + 1:at + 1 + v.emitted]
        assert [e.index for e in decided] == list(range(v.index, v.index + v.emitted))
        assert all(e.verified_by == v.index for e in decided)
        assert [e.token.id for e in decided[:v.accepted]] == [t.id for t in v.drafted[:v.accepted]]
    plain = serve([p.wrap(c) for c in commands[:1] + [dataclasses.replace(commands[1], settings=GREEDY)]
                   + commands[2:]], finished=len(commands))
    assert [e.token.id for e in events if isinstance(e, StepDone)] == [e.token.id for e in steps(plain)][:24]


def test_the_weights_are_hashed_again_when_a_generation_ends_and_on_demand(folder):
    short = GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=3)
    commands = [p.Load(folder, "cpu", "float32", 1), p.Prefill("the cat", False, "", short, 2),
                p.Step(), p.Step(), p.Step(), p.CheckWeights()]
    replies = serve([p.wrap(c) for c in commands], finished=len(commands))
    checks = of(replies, p.WeightsChecked)
    assert len(checks) == 2  # after the generation's stop, and the one asked for
    loaded = of(replies, p.ModelLoaded)[0].info.weights_fingerprint
    assert all(c.at_load == c.now == loaded and c.ms > 0 for c in checks)
    ended = next(i for i, r in enumerate(replies) if isinstance(r, p.Ended))
    # the step that ended is answered first (the front-end's buttons come back), then the hash follows
    assert [type(r) for r in replies[ended + 1:ended + 4]] == [p.Status, p.Finished, p.WeightsChecked]


def test_pause_and_abort_at_the_step_shown_take_back_the_steps_after_it(folder):
    """A paced front-end shows fewer steps than the engine took: Pause/Abort at_step end the generation there."""
    # inside a run: the Pause waits in the pipe, so the run reads it before its first step
    replies = serve([p.wrap(p.Load(folder, "cpu", "float32", 1)), p.wrap(p.Prefill("the cat", False, "", GREEDY, 2)),
                     p.wrap(p.Step()), p.wrap(p.Step()), p.wrap(p.Step()),
                     p.wrap(p.Run(max_steps=5)), p.wrap(p.Pause(at_step=2))], finished=7)
    retracted = of(replies, p.Retracted)
    assert len(retracted) == 1 and retracted[0].event.to_step == 3 and retracted[0].tag == 2
    assert retracted[0].dropped == ()  # step 3 was made by Step, not by the run: it stays a branch
    assert [s.index for s in steps(replies)] == [1, 2, 3]
    assert of(replies, p.PendingStep)[-1].event.index == 3
    assert [r.command for r in of(replies, p.Finished)][-2:] == ["Run", "Pause"]

    # after the run ended: Pause then Abort, each at a step before the engine's newest
    engine = EngineOverPipes()
    try:
        engine.ask(p.Load(folder, "cpu", "float32", 1))
        engine.ask(p.Prefill("the cat", False, "", GREEDY, 2))
        engine.ask(p.Run(max_steps=6))
        ran = steps(engine.replies)
        assert [s.index for s in ran] == [1, 2, 3, 4, 5, 6]
        engine.ask(p.Pause(at_step=4))
        paused = of(engine.replies, p.Retracted)[-1]
        assert paused.event.to_step == 5 and paused.dropped == (ran[4].node, ran[5].node)
        assert of(engine.replies, p.PendingStep)[-1].event.index == 5
        assert not of(engine.replies, p.Ended)
        engine.ask(p.Step())
        again = steps(engine.replies)[-1]
        assert again.index == 5 and again.token.id == ran[4].token.id and again.node != ran[4].node
        engine.ask(p.Abort(at_step=2))
        aborted = of(engine.replies, p.Retracted)[-1]
        assert aborted.event.to_step == 3 and aborted.dropped == ()  # the Step's node: not made by a run
        ended = of(engine.replies, p.Ended)
        assert [(e.event.reason, e.event.n_generated) for e in ended] == [("aborted", 2)]
        assert of(engine.replies, p.Status)[-1].status.n_generated == 2
        assert not of(engine.replies, p.Failed)
    finally:
        engine.close()
