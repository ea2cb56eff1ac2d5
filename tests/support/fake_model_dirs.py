"""Fake model folders for the catalog and picker tests: a Hugging Face hub cache (blobs and symlinks as
huggingface_hub lays them out) with good, unsupported, broken and half-downloaded snapshots, GGUF files in a user's
folder and an LM Studio home."""

import hashlib
import json
import os
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from gguf_writer import write_gguf
from tiny import make_hf_model, save_hf_model


def hub_snapshot(hub: Path, repo_id: str, files: dict, revision: str, current: bool = True) -> Path:
    """A snapshot as huggingface_hub writes it: content in blobs/<sha256>, relative symlinks in snapshots/."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for name, content in files.items():
        data = content.read_bytes() if isinstance(content, Path) else content
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.symlink_to(os.path.relpath(blob, link.parent))
    if current:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture(scope="module")
def fake_models(tmp_path_factory):
    """A hub cache (a tiny Llama, an unsupported architecture, a broken and a half-downloaded snapshot), a
    user folder of GGUF files (a tiny Llama, an unsupported architecture, a truncated one) and a home with
    an LM Studio folder."""
    root = tmp_path_factory.mktemp("catalog")
    hf = make_hf_model("llama", seed=3)
    saved = save_hf_model(hf, root / "saved")
    hub = root / "hub"
    llama_files = {p.name: p for p in saved.iterdir()}
    hub_snapshot(hub, "tiny/llama", {"config.json": llama_files["config.json"]}, "0ld", current=False)
    llama_and_a_copy = {**llama_files, "config-copy.json": llama_files["config.json"]}  # two links, one blob
    llama = hub_snapshot(hub, "tiny/llama", llama_and_a_copy, "c0ffee")
    nope_weights = root / "nope.safetensors"
    save_file({"wte": np.zeros((10, 4), np.float32), "norm": np.ones(4, np.float32)}, str(nope_weights))
    nope_config = {"architectures": ["NopeForCausalLM"], "model_type": "nope", "max_position_embeddings": 2048}
    nope = hub_snapshot(hub, "acme/nope", {"config.json": json.dumps(nope_config).encode(),
                                           "model.safetensors": nope_weights,
                                           "tokenizer.json": llama_files["tokenizer.json"]}, "beef")
    broken = hub_snapshot(hub, "acme/broken", {"config.json": b"{}"}, "dead")
    (broken / "config.json").resolve().unlink()  # a dangling link: the blob is gone
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                            "lm_head.weight": "model-00002-of-00002.safetensors"}}
    hub_snapshot(hub, "acme/partial", {"config.json": llama_files["config.json"],
                                       "model.safetensors.index.json": json.dumps(index).encode(),
                                       "model-00001-of-00002.safetensors": nope_weights}, "half")
    packed_weights = root / "packed.safetensors"
    save_file({"model.embed_tokens.weight": np.zeros((320, 8), np.uint32)}, str(packed_weights))
    hub_snapshot(hub, "acme/packed", {"config.json": llama_files["config.json"], "model.safetensors": packed_weights,
                                      "tokenizer.json": llama_files["tokenizer.json"]}, "f00d")
    ggufs = root / "ggufs" / "publisher" / "repo"
    ggufs.mkdir(parents=True)
    tiny_gguf = write_gguf(hf, saved, ggufs / "tiny-llama.gguf")
    hub_snapshot(hub, "tiny/llama-GGUF", {"tiny-llama.Q8_0.gguf": tiny_gguf, "README.md": b"a GGUF-only repo"}, "99")
    (root / "ggufs" / "split").mkdir()
    for part in (1, 2):
        (root / "ggufs" / "split" / f"big-0000{part}-of-00002.gguf").write_bytes(tiny_gguf.read_bytes())
    (root / "ggufs" / "truncated.gguf").write_bytes(tiny_gguf.read_bytes()[:200])
    writer = gguf.GGUFWriter(str(root / "ggufs" / "mamba.gguf"), "mamba")
    writer.add_context_length(4096)
    writer.add_tensor("token_embd.weight", np.zeros((8, 6), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    home = root / "home"
    lm_studio = home / ".lmstudio" / "models" / "lmstudio-community" / "tiny"
    lm_studio.mkdir(parents=True)
    (lm_studio / "tiny-copy.gguf").write_bytes(tiny_gguf.read_bytes())
    n_params = sum(p.numel() for p in hf.parameters())
    return {"root": root, "hub": hub, "home": home, "ggufs": root / "ggufs", "llama": llama, "nope": nope,
            "n_params": n_params, "config": hf.config, "gguf": tiny_gguf}
