"""What the speculation tests share: the float64 tiny Llama, a generation with or without drafts and its events, a
token the model repeats, and the check that a speculative step reports what a plain one does."""

import pytest
import torch

from inference.events import StepDone, Verified
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.sources.local import LocalDecoder
from session_checks import float64_model

GREEDY = SamplerSettings(greedy=True)
SAMPLED = SamplerSettings(temperature=0.7, top_k=5)  # peaked enough that drafts are often accepted


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return float64_model("llama", tmp_path_factory.mktemp("llama"))


def _steps(events):
    return [e for e in events if isinstance(e, StepDone)]


def _verifies(events):
    return [e for e in events if isinstance(e, Verified)]


def _generate(model, prompt, speculate, sampler=GREEDY, n=24, seed=0):
    """(session, every event of a run to `n` tokens, forward passes it took)."""
    session = Session(model, GenerationSettings(sampler, max_new_tokens=n, seed=seed, speculate=speculate))
    session.prefill(prompt)
    before = session.forward_count
    events = list(session.run())
    return session, events, session.forward_count - before


_REPEATING: dict[str, int] = {}


def _repeating_token(model) -> int:
    """A token the model continues with itself after eight of it: repeated, a prompt whose greedy text
    repeats it (so prompt lookup drafts what the model writes)."""
    if model.folder.name not in _REPEATING:
        fresh = LocalDecoder(model.decoder)
        fresh.start(8)
        for t in range(model.config.vocab):
            fresh.crop(0)
            if int(torch.argmax(fresh.forward([t] * 8, 0))) == t:
                _REPEATING[model.folder.name] = t
                break
        else:
            raise AssertionError("no token of this tiny model continues itself")
    return _REPEATING[model.folder.name]


# Gemma 2's soft-capped decode step scores its window directly while a verify pass goes through the causal
# mask: the float64 sums differ in the last bit, and the float logits by one float32 ulp at most.
LOGIT_TOLERANCE = {"gemma2": 2.0 ** -20}


def _same_steps(a: StepDone, b: StepDone, tolerance: float = 1e-9) -> None:
    """Step b (speculative) reports what step a (one token per pass) reported, bar timings."""
    assert (a.index, a.position, a.token, a.context_tokens, a.kv_used_bytes, a.chosen_rank, a.random_u) == \
        (b.index, b.position, b.token, b.context_tokens, b.kv_used_bytes, b.chosen_rank, b.random_u)
    assert list(a.dist.candidates.ids) == list(b.dist.candidates.ids)
    assert abs(a.dist.candidates.logits - b.dist.candidates.logits).max() <= tolerance
    assert abs(a.entropy - b.entropy) <= tolerance
    assert [(s.name, s.kept) for s in a.dist.stages] == [(s.name, s.kept) for s in b.dist.stages]
    assert all(abs(s.removed_mass - t.removed_mass) <= tolerance for s, t in zip(a.dist.stages, b.dist.stages))
