"""History.apply fed protocol replies directly: no Qt, no engine."""

from __future__ import annotations

import subprocess
import sys

from inference.attention import AttentionOf
from inference.engine import protocol as p
from inference.events import (ModelInfo, Pending, PrefillDone, Rewound, SessionStatus, StepDone, Stopped, Switched,
                              Token, Verified)
from inference.messages import Message
from inference.settings import GenerationSettings

from gui.state.history import Change, History

INFO = ModelInfo(name="tiny", architecture="llama", n_layers=2, n_heads=2, n_kv_heads=1, head_dim=4, hidden_size=8,
                 vocab_size=32, context_length=64, n_params=1000, dtype="float32", device="cpu",
                 kv_bytes_per_token=64, kv_dtype="float32", kv_element_bytes=4, weights_fingerprint="abc",
                 weights_bytes=4000)
PREFILL = PrefillDone(tokens=(Token(5, " The", " The"),), n_tokens=1, ms=3.0, kv_used_bytes=64,
                      kv_allocated_bytes=128, prompt_text=" The", pending="dist 1")


def step(index: int, node: int, parent: int, token: int = 7) -> StepDone:
    # the distribution is an opaque value to the history: a label stands in for it
    return StepDone(index=index, position=index, token=Token(token, f" t{token}", f" t{token}"), forward_ms=1.0,
                    sample_ms=0.1, kv_used_bytes=64 * index, kv_allocated_bytes=128, context_tokens=1 + index,
                    chosen_rank=0, random_u=0.5, dist=f"dist {index}", seed=0, node=node, parent=parent)


def status(running: bool = False, blocked: Message | None = None) -> SessionStatus:
    return SessionStatus(prefilled=True, running=running, blocked=blocked, n_generated=0,
                         settings=GenerationSettings())


def loaded() -> History:
    """A history whose engine loaded INFO for generation 1 and read the prompt for generation 2."""
    h = History()
    assert h.apply(p.ModelLoaded(INFO, h.load_asked())) == Change.MODEL | Change.STATE | Change.VIEWS
    assert h.apply(p.Prefilled(PREFILL, h.next_generation())) == Change.VIEWS
    return h


def test_a_load_and_a_prefill_give_the_model_and_the_pending_first_step():
    h = loaded()
    assert h.info is INFO and h.weights_check is None and h.tag == 2
    assert h.prefill is PREFILL and h.steps == [] and h.log == [PREFILL]
    shown = h.shown()
    assert shown.index == 1 and shown.pending and shown.dist == "dist 1"


def test_steps_grow_the_path_and_a_new_pending_step_is_shown_next():
    h = loaded()
    first, second = step(1, 1, 0), step(2, 2, 1)
    assert h.apply(p.Stepped((first, second), 2)) == Change.VIEWS
    assert h.steps == [first, second] and h.current.id == 2 and h.log == [PREFILL, first, second]
    assert h.shown().step is second  # the newest drawn step, until the next pending one comes
    assert h.apply(p.PendingStep(Pending(3, "dist 3"), 2)) == Change.VIEWS
    assert h.pending.index == 3
    h.select(None)
    assert h.shown().pending and h.shown().dist == "dist 3"


def test_replies_about_an_older_generation_change_nothing():
    h = loaded()
    stale = p.Stepped((step(1, 1, 0),), 1)  # the tag of the load, before the prefill replaced it
    assert h.apply(stale) == Change.NONE and h.steps == []
    for reply in (p.PendingStep(Pending(1, "x"), 1), p.Ended(Stopped("eos", 0, "", 1.0, 1.0), 1),
                  p.Status(status(), 1), p.Recaptured(AttentionOf(0, None, None), 1)):
        assert h.apply(reply) == Change.NONE
    assert h.stopped is None and h.status is None and h.attention == {} and h.pending.dist == "dist 1"


def test_a_verify_pass_is_kept_by_the_first_step_it_decided():
    h = loaded()
    verify = Verified(index=1, drafted=(), ngram=(), accepted=1, emitted=2, positions=2, forward_ms=2.0)
    h.apply(p.Stepped((verify, step(1, 1, 0), step(2, 2, 1)), 2))
    assert h.verifies == {1: verify} and [s.index for s in h.steps] == [1, 2] and h.log[1] is verify


def test_a_rewind_then_another_token_starts_a_branch_beside_the_first():
    h = loaded()
    h.apply(p.Stepped((step(1, 1, 0), step(2, 2, 1, token=7)), 2))
    rewound = Rewound(to_step=2, node=1, kv_used_bytes=64, kv_allocated_bytes=128, seed=0, pending="dist 2 again")
    assert h.apply(p.RewoundReply(rewound, 2)) == Change.VIEWS
    assert [s.node for s in h.steps] == [1] and h.shown().pending and h.shown().dist == "dist 2 again"
    h.apply(p.Stepped((step(2, 3, 1, token=9),), 2))
    assert [n.id for n in h.leaves()] == [2, 3] and h.nodes[1].children == [h.nodes[2], h.nodes[3]]
    switched = Switched(node=2, to_step=2, reread_tokens=2, ms=4.0, kv_used_bytes=128, kv_allocated_bytes=128,
                        tokens=(7, 7), pending="dist 3 of branch 1")
    assert h.apply(p.SwitchedReply(switched, 2)) == Change.VIEWS
    assert [s.node for s in h.steps] == [1, 2] and h.reread is switched and h.pending.index == 3


def test_a_take_back_leaves_the_shown_step_and_drops_what_the_playback_held_back():
    """Pause during a paced Run: the engine had reported steps 1-4 (step 3 with a verify pass, and its end);
    the screen showed step 2. The take-back (p.Retracted) cuts the path, the tree and the log at step 2 and
    keeps the step on screen shown."""
    h = loaded()
    verify = Verified(index=3, drafted=(), ngram=(), accepted=1, emitted=2, positions=2, forward_ms=2.0)
    h.apply(p.Stepped((step(1, 1, 0), step(2, 2, 1), verify, step(3, 3, 2), step(4, 4, 3)), 2))
    h.apply(p.Ended(Stopped("max_new_tokens", 4, "", 1.0, 1.0), 2))
    h.hold()
    h.reveal(2)
    h.select(2)
    back = Rewound(to_step=3, node=2, kv_used_bytes=128, kv_allocated_bytes=256, seed=0, pending="dist 3 again")
    assert h.apply(p.Retracted(back, (3, 4), 2)) == Change.STATE | Change.VIEWS
    assert [s.node for s in h.steps] == [1, 2] and set(h.nodes) == {0, 1, 2} and h.nodes[2].children == []
    assert h.verifies == {} and h.stopped is None and h.log == [PREFILL, h.steps[0], h.steps[1]]
    assert h.pending.index == 3 and h.pending.dist == "dist 3 again"
    h.release()
    assert h.shown_index() == 2 and h.shown().step is h.steps[1]  # still the step the class was looking at


def test_the_end_and_the_status_change_what_can_be_done():
    h = loaded()
    running = status(running=True)
    assert h.apply(p.Status(running, 2)) == Change.STATE | Change.VIEWS
    assert h.apply(p.Status(running, 2)) == Change.NONE  # the same status again: nothing to redraw
    stop = Stopped("max_new_tokens", 0, "", 10.0, 20.0)
    assert h.apply(p.Ended(stop, 2)) == Change.STATE | Change.VIEWS
    assert h.stopped is stop and h.log[-1] is stop


def test_a_failed_load_keeps_the_session_and_its_tag():
    h = loaded()
    assert h.load_asked() == 3
    assert h.apply(p.LoadFailed("no such model")) == Change.STATE
    assert h.tag == 2 and h.info is INFO and h.prefill is PREFILL
    assert h.apply(p.PendingStep(Pending(1, "dist 1 again"), 2)) == Change.VIEWS  # still heard


def test_a_new_model_forgets_the_session_but_not_what_the_engine_is():
    h = loaded()
    h.apply(p.Ready(cuda=False))
    h.apply(p.Finished("Step", 1, forward_count=4))  # about an older generation: the count is the engine's
    checked = p.WeightsChecked("abc", "abc", 12.0)
    assert h.apply(checked) == Change.WEIGHTS and h.weights_check is checked
    assert h.forward_count == 4 and h.cuda_available is False
    other = ModelInfo(**{**INFO.__dict__, "name": "other"})
    h.apply(p.ModelLoaded(other, h.load_asked()))
    assert h.info is other and h.prefill is None and h.steps == [] and h.weights_check is None
    assert h.apply(p.ModelInfoChanged(INFO)) == Change.WEIGHTS | Change.VIEWS and h.info is INFO


def test_a_recomputed_attention_is_kept_by_its_node():
    h = loaded()
    attention = AttentionOf(0, None, None)
    assert h.apply(p.Recaptured(attention, 2)) == Change.VIEWS and h.attention == {0: attention}


def test_link_replies_change_no_state():
    h = loaded()
    for reply in (p.Progress("load", 1, 2), p.Failed("bad", "", True), p.Cancelled()):
        assert h.apply(reply) == Change.NONE


def test_the_lost_engine_leaves_nothing_running_and_the_model_only_when_it_comes_back():
    h = loaded()
    h.apply(p.Status(status(running=True), 2))
    h.engine_lost(model_kept=True)
    assert h.status is None and h.info is INFO and h.prefill is PREFILL
    h.engine_lost(model_kept=False)
    assert h.info is None


def test_the_state_imports_neither_qt_nor_torch():
    code = ("import sys, gui.state.history, gui.state.compare, gui.state.timing_data, gui.state.format, "
            "gui.state.speculation; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'pyqtgraph', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
