"""GGUF -> HF folder conversion, on a tiny GGUF written here the way llama.cpp writes Llama."""

import json

import gguf
import numpy as np
import pytest
import torch

from inference.errors import ModelFormatError
from inference.gguf_import import convert, convert_cached, unpermute_rotary
from inference.loading import load_model
from tiny import BOS_ID, EOS_ID, add_gguf_shape, make_hf_model, save_hf_model


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of Q/K rows (the inverse of what we undo)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(hf, folder, path, quantize_embeddings=False):
    c = hf.config
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    specials = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    tokens = [None] * c.vocab_size
    for text, i in {**vocab, **specials}.items():
        tokens[i] = text
    types = [gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens]
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i], types[i] = f"[PAD{i}]", gguf.TokenType.UNUSED
    w = gguf.GGUFWriter(str(path), "llama")
    add_gguf_shape(w, c)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in tokenizer["model"]["merges"]])
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                 "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
                 "mlp.down_proj.weight": "ffn_down.weight"}
    for name, p in hf.state_dict().items():
        array = p.detach().float().numpy().copy()
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            gname = f"blk.{i}.{per_layer[rest]}"
            if rest == "self_attn.q_proj.weight":
                array = llama_cpp_permute(array, c.num_attention_heads)
            elif rest == "self_attn.k_proj.weight":
                array = llama_cpp_permute(array, c.num_key_value_heads)
        else:
            gname = names[name]
        if gname == "token_embd.weight" and quantize_embeddings:
            w.add_tensor(gname, gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(gname, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    hf = make_hf_model("llama", seed=5)
    folder = save_hf_model(hf, root / "hf")
    return hf, folder, write_gguf(hf, folder, root / "tiny.gguf")


def test_unpermute_inverts_llama_cpp_permutation():
    w = np.arange(8 * 3 * 5, dtype=np.float32).reshape(24, 5)
    assert np.array_equal(unpermute_rotary(llama_cpp_permute(w, 3), 3), w)
    assert not np.array_equal(llama_cpp_permute(w, 3), w)


def test_converted_gguf_matches_the_original_checkpoint(tiny_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    hf, folder, path = tiny_gguf
    converted = convert_cached(path)
    assert converted == convert_cached(path)  # second call reuses the cache
    original = load_model(folder, device="cpu")
    from_gguf = load_model(path, device="cpu")
    assert from_gguf.fingerprint == original.fingerprint
    ids = from_gguf.tokenizer.encode("the thin tin")
    assert ids == original.tokenizer.encode("the thin tin")
    # transformers itself reads the converted folder
    import transformers

    again = transformers.AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32)
    with torch.no_grad():
        assert torch.allclose(again(torch.tensor([ids])).logits, hf(torch.tensor([ids])).logits, atol=1e-5)


def test_quantized_tensors_are_dequantized(tiny_gguf, tmp_path):
    hf, folder, _ = tiny_gguf
    path = write_gguf(hf, folder, tmp_path / "q8.gguf", quantize_embeddings=True)
    out = tmp_path / "out"
    out.mkdir()
    convert(path, out)
    from safetensors.numpy import load_file

    embed = load_file(str(out / "model.safetensors"))["model.embed_tokens.weight"]
    original = hf.model.embed_tokens.weight.detach().numpy()
    assert embed.shape == original.shape
    assert 0 < np.abs(embed - original).max() < 0.02 * np.abs(original).max()


def test_truncated_gguf_is_a_clear_error(tiny_gguf, tmp_path):
    _, _, path = tiny_gguf
    data = path.read_bytes()
    for cut in (10, len(data) // 3, len(data) - 100):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(data[:cut])
        out = tmp_path / f"out{cut}"
        out.mkdir()
        with pytest.raises(ModelFormatError, match=f"cut{cut}.gguf"):
            convert(bad, out)


def test_a_layer_past_the_block_count_is_refused(tiny_gguf, tmp_path):
    """A header that says 1 layer over a file holding 2 (the fuzz test's find): refused while converting,
    naming the GGUF, not left for the load to report against the converted folder's safetensors."""
    import fuzz_mutations as fm

    _, _, path = tiny_gguf
    data = path.read_bytes()
    spot = next(spot for spot in fm.gguf_fields(data) if spot.what == "llama.block_count value")
    bad = tmp_path / "one_layer.gguf"
    bad.write_bytes(fm.overwrite(data, spot, 1))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ModelFormatError, match=r"one_layer\.gguf: tensor 'blk\.1\..*' is not part of the model "
                                               r"its metadata describes \(1 layers\)"):
        convert(bad, out)


def test_not_a_gguf_and_missing_file(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a gguf file at all" * 100)
    with pytest.raises(ModelFormatError, match="not a valid GGUF"):
        convert(junk, tmp_path)
    with pytest.raises(ModelFormatError, match="no such file"):
        convert_cached(tmp_path / "absent.gguf")
