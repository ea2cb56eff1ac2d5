"""Checks of a session's state shared by the branch, context-window and speculation tests: a tiny model in float64,
and that a session's KV cache and pending logits are exactly a fresh prefill's."""

import dataclasses

import torch

from inference.model.layers import select_backend
from inference.store.loading import load_model
from inference.session.session import Session
from inference.sources.local import LocalDecoder
from tiny import build_decoder, make_hf_model, save_hf_model


def float64_model(arch, folder):
    """The tiny model in float64 (no float32 rounding between a cached and a fresh path), with no EOS."""
    model = load_model(save_hf_model(make_hf_model(arch, seed=5), folder), device="cpu")
    decoder = build_decoder(folder, select_backend("cpu", torch.float64))
    return dataclasses.replace(model, decoder=decoder, config=dataclasses.replace(model.config, eos_ids=()))


def assert_cache_is_fresh(session: Session, ids: list[int] | None = None, tolerance: float = 1e-5) -> None:
    """The cache holds exactly `ids` (the prompt + path by default; K/V equal to a fresh prefill's at positions
    0..) and the pending logits are that prefill's last logits."""
    ids = session.prompt + session.generated if ids is None else ids
    fresh = LocalDecoder(session.model.decoder)
    fresh.start(len(ids))
    logits = fresh.forward(ids, 0)
    cache = session.source.cache
    held = len(ids) - (1 if session.pending_logits is None and session.generated else 0)
    assert cache.length == held
    assert (cache.data[:, :, :, :held] - fresh.cache.data[:, :, :, :held]).abs().max().item() <= tolerance
    if session.pending_logits is not None:
        assert (session.pending_logits - logits).abs().max().item() <= tolerance
