"""GGUF -> HF folder conversion, on a tiny GGUF written here the way llama.cpp writes Llama."""


import numpy as np
import pytest
import torch

from inference.errors import ModelFormatError
from inference.store.gguf.convert import convert, convert_cached, unpermute_rotary
from inference.store.loading import load_model
from gguf_writer import llama_cpp_permute, write_gguf
from tiny import make_hf_model, save_hf_model


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
