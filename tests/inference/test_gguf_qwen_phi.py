"""GGUF -> HF folder for Qwen3 and Phi-3, on tiny GGUFs written here the way llama.cpp's converter writes
them: tensor names from gguf's own name map, Q/K rows in HF order (llama.cpp permutes llama only), Phi-3's
fused qkv and gate_up as they are, its longrope factors as `rope_factors_long/short` tensors, its partial
rotary as `rope.dimension_count` and its window as `attention.sliding_window`."""

import json
import math

import gguf
import numpy as np
import pytest
import torch
from tiny import add_gguf_shape, make_hf_model, save_hf_model

from inference.store.gguf.convert import convert_cached
from inference.store.loading import load_model

PROMPT = [5, 77, 200, 31, 9, 140, 250, 3, 60, 61, 62, 63, 64, 65]  # longer than the original context (12)


def _vocabulary(folder, vocab_size):
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    specials = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    tokens = [None] * vocab_size
    for text, i in {**tokenizer["model"]["vocab"], **specials}.items():
        tokens[i] = text
    types = [gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens]
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i], types[i] = f"[PAD{i}]", gguf.TokenType.UNUSED
    merges = [" ".join(m) if isinstance(m, list) else m for m in tokenizer["model"]["merges"]]
    return tokens, types, merges


def _phi3_metadata(w: gguf.GGUFWriter, c) -> None:
    """What llama.cpp's Phi3MiniModel writes beyond the common keys."""
    head_dim = c.hidden_size // c.num_attention_heads
    w.add_rope_dimension_count(int(c.rope_parameters.get("partial_rotary_factor", 1.0) * head_dim))
    w.add_sliding_window(c.sliding_window or 0)
    rope = c.rope_parameters
    if rope.get("rope_type") == "longrope":
        original = rope["original_max_position_embeddings"]
        scale = c.max_position_embeddings / original
        w.add_rope_scaling_orig_ctx_len(original)
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(original)))
        w.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], dtype=np.float32))


def write_gguf(hf, folder, path, arch: str, pre: str = "default", rope_freqs=None):
    c = hf.config
    w = gguf.GGUFWriter(str(path), arch)
    add_gguf_shape(w, c)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    if arch == "qwen3":
        w.add_key_length(c.head_dim)
        w.add_value_length(c.head_dim)
    elif arch == "phi3":
        _phi3_metadata(w, c)
    tokens, types, merges = _vocabulary(folder, c.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(c.bos_token_id)
    w.add_eos_token_id(c.eos_token_id)
    names = gguf.get_tensor_name_map({"qwen3": gguf.MODEL_ARCH.QWEN3, "phi3": gguf.MODEL_ARCH.PHI3,
                                      "llama": gguf.MODEL_ARCH.LLAMA}[arch], c.num_hidden_layers)
    for name, p in hf.state_dict().items():
        if name == "lm_head.weight" and c.tie_word_embeddings:
            continue
        array = p.detach().float().numpy().copy()
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):  # llama.cpp permutes these
            heads = c.num_attention_heads if name.endswith("q_proj.weight") else c.num_key_value_heads
            array = array.reshape(heads, 2, -1, array.shape[1]).swapaxes(1, 2).reshape(array.shape)
        w.add_tensor(names.get_name(name, try_suffixes=(".weight", ".bias")), array)
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


CASES = {
    "qwen3": ("qwen3", {}),
    "qwen3-tied": ("qwen3", {"tie_word_embeddings": True}),
    "phi3-window": ("phi3", {"sliding_window": 5}),
    "phi3-longrope": ("phi3", {"max_position_embeddings": 64, "original_max_position_embeddings": 12,
                               "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.3 * i for i in range(6)],
                                                "long_factor": [2.0 + 0.5 * i for i in range(6)]}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gguf_round_trip_matches_the_original(case, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    arch, overrides = CASES[case]
    hf = make_hf_model(arch, seed=4, **overrides)
    folder = save_hf_model(hf, tmp_path / "hf")
    path = write_gguf(hf, folder, tmp_path / f"{case}.gguf", arch)
    original = load_model(folder, device="cpu", dtype="float32")
    from_gguf = load_model(path, device="cpu", dtype="float32")
    assert from_gguf.fingerprint == original.fingerprint
    for field in ("family", "head_dim", "rope_dim", "qk_norm", "sliding_window", "tie_embeddings"):
        assert getattr(from_gguf.config, field) == getattr(original.config, field), field
    decoder = from_gguf.decoder
    cache = decoder.new_cache(8)
    with torch.inference_mode():
        decoder.forward(torch.tensor(PROMPT[:8]), 0, cache)
        for n in range(8, len(PROMPT)):  # decode steps, across longrope's original context too
            logits = decoder.forward(torch.tensor(PROMPT[n:n + 1]), n, cache)[0]
            with torch.no_grad():
                expected = hf(torch.tensor([PROMPT[:n + 1]])).logits[0, -1]
            assert (logits - expected).abs().max().item() <= 1e-4, n
    # transformers itself reads the converted folder (config form included)
    import transformers

    again = transformers.AutoModelForCausalLM.from_pretrained(convert_cached(path), dtype=torch.float32)
    with torch.no_grad():
        got, want = again(torch.tensor([PROMPT])).logits, hf(torch.tensor([PROMPT])).logits
    assert (got - want).abs().max().item() <= 1e-4


def test_phi4_mini_pre_tokenizer_splits_as_gpt4o(tmp_path, monkeypatch):
    """Phi-4-mini's GGUF names the o200k split "gpt-4o": words split by case with the contraction kept on,
    digits in threes, a '/' leading the word after it (llama3's split would keep "HelloWorld" whole)."""
    from tokenizers import Tokenizer

    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    hf = make_hf_model("phi3")
    folder = save_hf_model(hf, tmp_path / "hf")
    converted = convert_cached(write_gguf(hf, folder, tmp_path / "phi4.gguf", "phi3", pre="gpt-4o"))
    split = Tokenizer.from_file(str(converted / "tokenizer.json")).pre_tokenizer
    pieces = [piece for piece, _ in split.pre_tokenize_str("HelloWorld's 123456 a/b")]
    assert pieces == ["Hello", "World's", "Ġ", "123", "456", "Ġa", "/b"]


def llama_cpp_rope_freqs(c) -> list[float]:
    """What llama.cpp's converter writes for HF's llama3 rope scaling (its rope_freqs tensor)."""
    rope = c.rope_parameters
    dim = c.hidden_size // c.num_attention_heads
    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    out = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return out


LLAMA3 = {"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}


def test_llama3_rope_freqs_read_back_as_llama3_scaling(tmp_path, monkeypatch):
    """Llama 3.2's GGUF keeps its rope as rope_freqs divisors (one of them between 1 and the factor here):
    read back as the llama3 scaling they came from, the logits equal the original's."""
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    hf = make_hf_model("llama", seed=2, **LLAMA3)
    freqs = llama_cpp_rope_freqs(hf.config)
    assert 1.0 in freqs and 32.0 in freqs and any(1.0 < f < 32.0 for f in freqs)
    folder = save_hf_model(hf, tmp_path / "hf")
    path = write_gguf(hf, folder, tmp_path / "llama3.gguf", "llama", rope_freqs=freqs)
    original = load_model(folder, device="cpu", dtype="float32")
    from_gguf = load_model(path, device="cpu", dtype="float32")
    assert from_gguf.config.rope_scaling == original.config.rope_scaling
    assert from_gguf.fingerprint == original.fingerprint
    with torch.inference_mode():
        got = from_gguf.decoder.forward(torch.tensor(PROMPT), 0, from_gguf.decoder.new_cache(16), all_logits=True)
    with torch.no_grad():
        assert (got - hf(torch.tensor([PROMPT])).logits[0]).abs().max().item() <= 1e-4


def test_rope_freqs_of_another_shape_are_one_clear_error(tmp_path, monkeypatch):
    from inference.errors import ModelFormatError

    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    hf = make_hf_model("llama", seed=2, **LLAMA3)
    folder = save_hf_model(hf, tmp_path / "hf")
    freqs = [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 32.0]
    with pytest.raises(ModelFormatError, match="not llama3 rope scaling"):
        load_model(write_gguf(hf, folder, tmp_path / "odd.gguf", "llama", rope_freqs=freqs), device="cpu")
