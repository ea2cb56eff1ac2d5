"""One step's vocabulary statistics in one kernel call (inference/kernels/csrc/vocab.h) against the torch ops
they replace, and the tokenizer's cached candidate texts against `peek`. Skipped where the kernels
cannot be built."""

import math

import pytest
import torch
from hypothesis import given, strategies as st

from inference import kernels
from inference.session import sampling
from inference.session.sampling import distribution
from inference.settings import SamplerSettings

ops = kernels.ops()
pytestmark = pytest.mark.kernels


def _logits(V: int, kind: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(V, generator=g) * 4
    if kind == "few values":  # ties everywhere, the maximum among them
        x = torch.randint(0, 3, (V,), generator=g).float()
    elif kind == "some -inf":  # a server's top-N: -inf outside it
        x[torch.rand(V, generator=g) < 0.7] = float("-inf")
        x[int(torch.randint(0, V, (1,), generator=g))] = 1.5
    elif kind == "huge range":  # most exp(x - max) underflow to 0 in float64
        x = x * 300
    return x


def _by_torch(logits, s):
    saved = sampling._by_kernel
    sampling._by_kernel = lambda *args: None
    try:
        return distribution(logits, s)
    finally:
        sampling._by_kernel = saved


def _top_by_definition(x: torch.Tensor, n: int) -> list[int]:
    """Highest first, ties to the lower id."""
    return sorted(range(x.numel()), key=lambda i: (-float(x[i]), i))[:n]


@given(st.integers(1, 5000), st.integers(1, 80), st.sampled_from(["normal", "few values", "some -inf", "huge range"]),
       st.integers(0, 2**31 - 1), st.booleans())
def test_the_kernel_distribution_equals_the_torch_one(V, top_n, kind, seed, greedy):
    x = _logits(V, kind, seed)
    s = SamplerSettings(greedy=greedy) if greedy else SamplerSettings(temperature=0.7, top_k=50, top_p=0.9)
    fast, slow = distribution(x, s, top_n=top_n), _by_torch(x, s)
    assert fast.top is not None and slow.top is None
    assert torch.allclose(fast.p_raw, slow.p_raw, rtol=1e-13, atol=1e-300)
    assert math.isclose(fast.entropy, slow.entropy, rel_tol=1e-9, abs_tol=1e-12)
    assert [(st.name, st.kept) for st in fast.stages] == [(st.name, st.kept) for st in slow.stages]
    assert all(math.isclose(a.removed_mass, b.removed_mass, abs_tol=1e-12) for a, b in zip(fast.stages, slow.stages))
    assert torch.equal(fast.kept_ids, slow.kept_ids)
    assert torch.allclose(fast.p_final, slow.p_final, rtol=1e-12, atol=1e-300)
    ids, values = fast.top
    assert ids.tolist() == _top_by_definition(x, min(top_n, V))
    assert values.tolist() == [float(x[i]) for i in ids]


@given(st.integers(1, 3000), st.sampled_from(["normal", "few values", "huge range"]), st.integers(0, 2**31 - 1),
       st.booleans())
def test_bfloat16_logits_are_read_by_the_kernel_as_their_float32_values(V, kind, seed, greedy):
    """Issue 43: a GPU model's bfloat16 (or float16) logits come to the host as they are (sources/local.py); the
    sampler copies them to float32 (exact) and takes the kernel path, the distribution of the same values in float32,
    bit for bit, where it took ~15 float64 torch ops before."""
    x = _logits(V, kind, seed).to(torch.bfloat16)
    s = SamplerSettings(greedy=greedy) if greedy else SamplerSettings(temperature=0.8, top_k=40, min_p=0.02)
    used = []
    original = sampling._by_kernel
    sampling._by_kernel = lambda *args: used.append(original(*args)) or used[-1]
    try:
        low, same = distribution(x, s, top_n=10), distribution(x.float(), s, top_n=10)
        half = distribution(x.to(torch.float16), s, top_n=10) if kind != "huge range" else same  # float16 overflows
    finally:
        sampling._by_kernel = original
    assert used and all(raw is not None for raw in used)
    for got in (low, half):
        assert torch.equal(got.p_raw, same.p_raw) and torch.equal(got.p_final, same.p_final)
        assert torch.equal(got.kept_ids, same.kept_ids) and got.entropy == same.entropy
        assert got.stages == same.stages and got.top[0].tolist() == same.top[0].tolist()


def test_exp_is_within_two_ulp_of_the_library_exp():
    t = torch.cat([-torch.rand(200_000, dtype=torch.float64) * 760, torch.tensor(
        [0.0, -1e-300, -0.5 * math.log(2), -708.39, -708.4, -744.4, -745.1, -745.2, -800.0, float("-inf")],
        dtype=torch.float64)])
    got, want = ops.exp_nonpositive(t), torch.exp(t)
    assert torch.equal(got == 0, want == 0)  # underflow at the same place
    nonzero = want > 0
    ulp = torch.nextafter(want[nonzero], torch.tensor(math.inf, dtype=torch.float64)) - want[nonzero]
    assert ((got[nonzero] - want[nonzero]).abs() / ulp).max() <= 2


def test_logits_with_nan_or_no_finite_maximum_fall_back_to_the_clear_error():
    for bad in (torch.tensor([1.0, float("nan"), 2.0]), torch.full((4,), float("-inf")),
                torch.cat([torch.randn(300), torch.tensor([float("nan")])])):  # NaN past the first top_n entries
        for s in (SamplerSettings(), SamplerSettings(greedy=True)):
            with pytest.raises(ValueError, match="not numbers"):
                distribution(bad, s, top_n=20)
    with_inf = distribution(torch.tensor([0.0, float("inf"), 1.0]), SamplerSettings(greedy=True), top_n=2)
    assert with_inf.top is None  # +inf: the torch path decides, as before


def test_the_report_reads_its_candidates_off_the_kernel_top(tmp_path, monkeypatch):
    from tiny import make_hf_model, save_hf_model

    from inference.store.loading import load_model
    from inference.session.session import GenerationSettings, Session

    used = []
    original = sampling._by_kernel
    monkeypatch.setattr(sampling, "_by_kernel", lambda *args: used.append(original(*args)) or used[-1])
    model = load_model(save_hf_model(make_hf_model("llama"), tmp_path), device="cpu", dtype="float32")
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=4, top_n=7))
    events = [e for e in session.generate([5, 77, 200]) if hasattr(e, "token")]
    assert events and used and all(raw is not None and len(raw.top[0]) == 7 for raw in used)
    for e in events:
        c = e.dist.candidates
        assert len(c.ids) == 7 and list(c.logits) == sorted(c.logits, reverse=True)
        assert c.ids[0] == e.token.id and c.p_final[0] == 1.0 and e.chosen_rank == 0


def test_cached_texts_read_as_peek_does(tmp_path):
    from tiny import make_hf_model, save_hf_model

    from inference.text.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_folder(save_hf_model(make_hf_model("llama"), tmp_path))
    ids = list(range(tokenizer.vocab_size + 3))  # past the vocabulary: "<id N>"
    stream = tokenizer.stream()
    assert stream.peek_many(ids) == tuple(stream.peek(i) for i in ids)
    assert tokenizer.texts_alone(torch.tensor(ids).numpy()) == tuple(stream.peek(i) for i in ids)
    half = next(i for i in range(256) if tokenizer.token_bytes(i) == b"\xc3")  # the first byte of "é"
    stream.push(half)  # a character pending: each candidate reads as what it would complete
    pending = stream.peek_many(ids)
    assert pending == tuple(stream.peek(i) for i in ids) and pending != tokenizer.texts_alone(ids)
