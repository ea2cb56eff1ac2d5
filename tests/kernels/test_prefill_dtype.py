"""bfloat16 prefill (inference/model/prefill_dtype.py): long forwards multiply on bfloat16 copies, decode stays
float32, the KV cache stays float32, and the option is refused where it cannot run or would not pay."""

from __future__ import annotations

import pytest
import torch

from inference.model import prefill_dtype
from inference.errors import ModelFormatError
from inference.model.layers import select_backend
from inference.model.prefill_dtype import PREFILL_ROWS, attach, check
from inference.settings import MAX_SPECULATE
from paragraph import PARAGRAPH
from tiny import build_decoder, make_hf_model, save_hf_model

BF16_CPU = {"avx2", "avx512f", "avx512_bf16"}


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama", init_std=0.05), tmp_path_factory.mktemp("llama"))


@pytest.fixture
def tiny(tiny_folder):
    return build_decoder(tiny_folder, select_backend("cpu", torch.float32))


def prefill(decoder, ids, capacity=None):
    cache = decoder.new_cache(capacity or len(ids))
    with torch.inference_mode():
        return decoder.forward(torch.tensor(ids), 0, cache, all_logits=True), cache


def ids_of(n: int, vocab: int) -> list[int]:
    return [(7 * i + 3) % vocab for i in range(n)]


def test_a_long_forward_runs_on_the_copies_and_writes_float32_kv(tiny):
    ids = ids_of(PREFILL_ROWS + 6, tiny.config.vocab)
    reference, ref_cache = prefill(tiny, ids)
    copy_bytes = attach(tiny)
    layer = tiny.weights.layers[0]
    assert copy_bytes == 2 * sum(lin.weight.numel() + (lin.bias.numel() if lin.bias is not None else 0)
                                 for layer in tiny.weights.layers
                                 for lin in (layer.qkv, layer.o, layer.mlp_in, layer.mlp_out))
    assert tiny.prefill_weights.layers[0].qkv.weight.dtype == torch.bfloat16
    assert tiny.prefill_weights.layers[0].attn_norm is layer.attn_norm  # norms, embeddings, head shared
    assert tiny.prefill_weights.embed is tiny.weights.embed and tiny.prefill_weights.lm_head is tiny.weights.lm_head
    mixed, cache = prefill(tiny, ids)
    assert cache.data.dtype == torch.float32 and mixed.dtype == torch.float32
    assert not torch.equal(mixed, reference)  # the copies were read
    n = len(ids)
    scale = ref_cache.data[:, :, :, :n].abs().max()
    assert (cache.data[:, :, :, :n] - ref_cache.data[:, :, :, :n]).abs().max() <= 0.02 * scale
    assert (mixed - reference).abs().max() <= 0.02 * reference.abs().max()
    assert torch.equal(mixed.argmax(-1), reference.argmax(-1))


def test_decode_after_a_bf16_prefill_is_float32(tiny):
    """A one-row step reads only the float32 weights: on the same cache it gives the same logits with
    the copies attached or not."""
    ids = ids_of(PREFILL_ROWS + 2, tiny.config.vocab)
    attach(tiny)
    copies = tiny.prefill_weights
    _, cache = prefill(tiny, ids, len(ids) + 4)
    twin = tiny.new_cache(len(ids) + 4)
    twin.data.copy_(cache.data)
    twin.length = cache.length
    steps = {}
    for name, c, weights in (("with", cache, copies), ("without", twin, None)):
        tiny.prefill_weights = weights
        with torch.inference_mode():
            steps[name] = [tiny.forward(torch.tensor([token]), len(ids) + i, c) for i, token in enumerate((5, 9, 11))]
    for a, b in zip(steps["with"], steps["without"]):
        assert torch.equal(a, b)
    assert torch.equal(cache.data, twin.data)  # and the K/V the steps wrote


def test_a_speculative_verify_pass_stays_float32(tiny):
    """Up to 1 + MAX_SPECULATE rows (a verify pass) the float32 products run, bit for bit."""
    assert PREFILL_ROWS > 1 + MAX_SPECULATE
    ids = ids_of(1 + MAX_SPECULATE, tiny.config.vocab)
    reference, _ = prefill(tiny, ids)
    attach(tiny)
    mixed, _ = prefill(tiny, ids)
    assert torch.equal(mixed, reference)


def test_the_option_is_checked():
    check("float32", "cuda", "int8", flags=set())  # the default is always allowed
    check("bfloat16", "cpu", "float32", flags=BF16_CPU)
    check("bfloat16", "cpu", "float32", flags={"avx512f", "amx_bf16"})
    with pytest.raises(ModelFormatError, match="avx512_bf16 or amx_bf16"):
        check("bfloat16", "cpu", "float32", flags={"avx2", "fma", "avx512f"})
    for device, dtype in (("cpu", "int8"), ("cpu", "bfloat16"), ("cuda", "float32")):
        with pytest.raises(ModelFormatError, match="float32 weights on CPU"):
            check("bfloat16", device, dtype, flags=BF16_CPU)
    with pytest.raises(ModelFormatError, match="unknown prefill dtype"):
        check("float16", "cpu", "float32", flags=BF16_CPU)


def test_load_model_refuses_before_reading_anything(tmp_path, monkeypatch):
    from inference.store.loading import load_model

    monkeypatch.setattr(prefill_dtype, "cpu_flags", lambda: {"avx2", "fma"})
    with pytest.raises(ModelFormatError, match="avx512_bf16"):
        load_model(tmp_path / "missing", device="cpu", dtype="float32", prefill_dtype="bfloat16")
    with pytest.raises(ModelFormatError, match="float32 weights"):
        load_model(tmp_path / "missing", device="cpu", dtype="int8", prefill_dtype="bfloat16")


def test_the_cli_option():
    from inference.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["trace"]).prefill_dtype == "float32"
    assert parser.parse_args(["trace", "--prefill-dtype", "bfloat16"]).prefill_dtype == "bfloat16"
    with pytest.raises(SystemExit):
        parser.parse_args(["trace", "--prefill-dtype", "int8"])


def test_cpu_flags_are_read():
    flags = prefill_dtype.cpu_flags()
    assert prefill_dtype.cpu_has_bf16(flags) == bool({"avx512_bf16", "amx_bf16"} & flags)


@pytest.fixture
def default_with_copies(default_model):
    decoder = default_model.decoder
    attach(decoder)
    yield default_model
    decoder.prefill_weights, decoder.prefill_min_rows = None, 0


def test_default_model_prefill_within_tolerance_of_float32(default_with_copies):
    """Measured (benchmarks/bench_prefill_dtype.py): over 27 prompts |dlogit| <= 0.59 and |dp| <= 0.016,
    one near-tie (float32's lead 0.009) swapped. Stated here, at every position of a 64-token paragraph:
    logits within 1.0, probabilities within 0.03, the same top-1 wherever float32's lead over its
    runner-up is over 0.06; K/V within 10 % of their largest value; and the copies really read."""
    model = default_with_copies
    decoder = model.decoder
    ids = model.tokenizer.encode(PARAGRAPH)[:64]
    copies = decoder.prefill_weights
    decoder.prefill_weights = None
    reference, ref_cache = prefill(decoder, ids)  # (64, V)
    decoder.prefill_weights = copies
    mixed, cache = prefill(decoder, ids)
    assert 0 < (mixed - reference).abs().max() <= 1.0
    p_ref, p_mix = reference.double().softmax(-1), mixed.double().softmax(-1)
    assert (p_ref - p_mix).abs().max() <= 0.03
    two = p_ref.topk(2, dim=-1).values
    clear = (two[:, 0] - two[:, 1]) > 0.06
    assert clear.sum() >= 32  # most positions are not near-ties
    assert torch.equal(reference.argmax(-1)[clear], mixed.argmax(-1)[clear])
    assert cache.data.dtype == torch.float32
    n = len(ids)
    assert (cache.data[:, :, :, :n] - ref_cache.data[:, :, :, :n]).abs().max() <= 0.1 * ref_cache.data.abs().max()
