"""The model catalog on a fake Hugging Face hub cache (blobs and symlinks as huggingface_hub lays them out),
GGUF files in LM Studio's and a user's folders, broken downloads, the recents, and the memory check."""

import json
import os
import threading
import time
from pathlib import Path

import pytest

from inference import host
from inference.store import catalog, memory, model_settings
from inference.store.loading import load_model
from inference.store.model_settings import ModelSettings
from fake_model_dirs import fake_models, hub_snapshot  # noqa: F401 - fake_models: a fixture


def blob_bytes(snapshot: Path) -> int:
    return sum(p.stat().st_size for p in {f.resolve() for f in snapshot.iterdir() if f.exists()})


@pytest.fixture
def env(fake_models, monkeypatch, tmp_path):
    """The fake hub and home; an empty TokenStep cache and config folder."""
    monkeypatch.setenv("HF_HUB_CACHE", str(fake_models["hub"]))
    monkeypatch.setenv("HOME", str(fake_models["home"]))
    monkeypatch.setenv("TOKENSTEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOKENSTEP_CONFIG_DIR", str(tmp_path / "config"))
    return fake_models


def by_name(entries):
    return {e.name: e for e in entries}


def test_hub_snapshots_are_listed_with_their_facts(env):
    entries = by_name(catalog.scan(ModelSettings()))
    llama = entries["tiny/llama"]
    assert llama.supported and llama.reason == "" and llama.source == "HF cache"
    assert llama.path == str(env["llama"])  # refs/main's revision, not the older snapshot
    assert llama.n_params == env["n_params"]
    assert llama.context_length == env["config"].max_position_embeddings == 128
    assert llama.family == "llama" and llama.architecture == "LlamaForCausalLM"
    assert llama.size_bytes == blob_bytes(env["llama"])  # the copied config's blob counted once
    assert llama.size_bytes < sum(p.stat().st_size for p in env["llama"].iterdir())
    c = env["config"]
    head_dim = c.hidden_size // c.num_attention_heads
    assert llama.kv_bytes_per_token == 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * 4
    nope = entries["acme/nope"]
    assert not nope.supported and "unsupported architecture 'NopeForCausalLM'" in nope.reason
    assert (nope.n_params, nope.context_length, nope.family) == (44, 2048, "nope")
    assert nope.size_bytes == blob_bytes(env["nope"])


def test_broken_and_half_downloaded_snapshots_are_unsupported_with_a_reason(env):
    entries = by_name(catalog.scan(ModelSettings()))
    broken = entries["acme/broken"]  # huggingface_hub's scan drops it: listed with its words, paths from the hub on
    assert not broken.supported and broken.reason.startswith("damaged in the Hugging Face cache (")
    assert "broken symlink" in broken.reason and "models--acme--broken/blobs/" in broken.reason
    assert str(env["hub"]) not in broken.reason and "\n" not in broken.reason
    partial = entries["acme/partial"]
    assert not partial.supported
    assert partial.reason == "incomplete download: model-00002-of-00002.safetensors is missing"
    # the supported ones come before the unsupported ones, recent and default aside
    packed = entries["acme/packed"]
    assert not packed.supported and packed.reason.startswith("quantised weights (U32 tensors)")
    assert packed.n_params == 320 * 8
    names = [e.name for e in catalog.scan(ModelSettings()) if e.source == "HF cache"]
    assert names.index("tiny/llama") < names.index("acme/broken")


def test_gguf_files_in_lm_studio_and_an_added_folder(env):
    entries = by_name(catalog.scan(ModelSettings(folders=[str(env["ggufs"])])))
    tiny = entries["publisher/repo/tiny-llama.gguf"]
    assert tiny.supported and tiny.source == "folder"
    assert (tiny.n_params, tiny.context_length, tiny.family) == (env["n_params"], 128, "llama")
    assert tiny.size_bytes == env["gguf"].stat().st_size and not tiny.converted
    copy = entries["lmstudio-community/tiny/tiny-copy.gguf"]
    assert copy.supported and copy.source == "LM Studio" and copy.n_params == env["n_params"]
    mamba = entries["mamba.gguf"]
    assert not mamba.supported and "GGUF architecture 'mamba' is not supported" in mamba.reason
    assert (mamba.n_params, mamba.context_length) == (48, 4096)
    truncated = entries["truncated.gguf"]
    assert not truncated.supported and "truncated" in truncated.reason
    split = entries["split/big-00001-of-00002.gguf"]  # listed once, as its first part
    assert "split/big-00002-of-00002.gguf" not in entries
    assert not split.supported and "split in 2 parts" in split.reason
    assert split.size_bytes == 2 * tiny.size_bytes and split.n_params == 2 * env["n_params"]


def test_a_gguf_only_hub_repository_lists_its_files(env):
    entries = by_name(catalog.scan(ModelSettings()))
    assert "tiny/llama-GGUF" not in entries
    quant = entries["tiny/llama-GGUF/tiny-llama.Q8_0.gguf"]
    assert quant.supported and quant.source == "HF cache" and quant.n_params == env["n_params"]
    assert quant.size_bytes == env["gguf"].stat().st_size
    assert quant.spec.endswith(".gguf") and Path(quant.spec).is_symlink()  # what load_model converts


def test_hf_hub_cache_wins_over_hf_home(env, monkeypatch, tmp_path):
    home_hub = tmp_path / "hf_home" / "hub"
    hub_snapshot(home_hub, "other/model", {"config.json": b"{}"}, "r1")
    assert catalog.hub_cache_dir() == env["hub"]
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    assert catalog.hub_cache_dir() == env["hub"]
    assert "other/model" not in by_name(catalog.scan(ModelSettings()))
    monkeypatch.delenv("HF_HUB_CACHE")
    assert catalog.hub_cache_dir() == home_hub
    assert set(e.name for e in catalog.scan(ModelSettings()) if e.source == "HF cache") == {"other/model"}
    monkeypatch.delenv("HF_HOME")
    assert catalog.hub_cache_dir() == env["home"] / ".cache" / "huggingface" / "hub"


def test_recents_are_recorded_and_listed_first_newest_first(env, tmp_path):
    model_settings.record_loaded(str(env["nope"]))
    model_settings.record_loaded(str(env["llama"]))
    model_settings.record_loaded(str(tmp_path / "gone.gguf"))
    settings = ModelSettings.load()
    assert [r.spec for r in settings.recent] == [str(tmp_path / "gone.gguf"), str(env["llama"]), str(env["nope"])]
    entries = catalog.scan(settings)
    assert entries[0].name == "gone.gguf" and not entries[0].supported and "no longer there" in entries[0].reason
    assert [e.path for e in entries[1:3]] == [str(env["llama"]), str(env["nope"])]
    assert entries[1].recent_at >= entries[2].recent_at > time.time() - 600
    assert sum(e.path == str(env["llama"]) for e in entries) == 1  # the hub's entry is the recent one
    assert entries[1].source == "HF cache" and entries[1].name == "tiny/llama"
    model_settings.record_loaded(str(env["nope"]))  # loaded again: first again, listed once
    assert [r.spec for r in ModelSettings.load().recent][:2] == [str(env["nope"]), str(tmp_path / "gone.gguf")]
    assert entries[3].spec == "default" and entries[3].supported  # not downloaded yet: comes on first use


def test_unreadable_settings_and_a_scan_over_budget_are_not_errors(env, tmp_path):
    root = Path(os.environ["TOKENSTEP_CONFIG_DIR"])
    root.mkdir(parents=True)
    (root / model_settings.FILE).write_text("{not json")
    assert ModelSettings.load().recent == []
    model_settings.add_folder(str(env["ggufs"]))
    assert ModelSettings.load().folders == [str(env["ggufs"])]
    few = catalog.scan(ModelSettings.load(), visits=3)
    assert len(few) < len(catalog.scan(ModelSettings.load()))


def test_memory_estimate_and_refusal(env, monkeypatch):
    entry = catalog.describe(str(env["llama"]))
    n = env["n_params"]
    estimate = memory.estimate(entry, "float32", available=10**12)
    assert estimate.fits and estimate.weights_bytes == 4 * n
    assert estimate.load_peak_bytes >= 4 * n and estimate.kv_tokens == 128
    assert memory.estimate(entry, "bfloat16").weights_bytes == 2 * n
    assert memory.estimate(catalog.describe(str(env["gguf"])), "float32").converts
    monkeypatch.setattr(memory, "mem_available", lambda path=host.MEMINFO: 4 * n)  # less than the peak
    with pytest.raises(host.NotEnoughMemory) as refused:
        memory.ensure_fits(str(env["llama"]), "float32")
    message = str(refused.value)
    assert message.startswith("Not enough memory for tiny/llama at float32: loading needs about")
    assert "\n" not in message and "is available" in message

    def no_weights(*args):
        raise AssertionError("the weights were read before the memory check")

    monkeypatch.setattr("inference.store.loading.read_checkpoint", no_weights)
    with pytest.raises(host.NotEnoughMemory, match="Not enough memory"):
        load_model(str(env["llama"]), device="cpu", dtype="float32")


def test_mem_available_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   21000000 kB\n")
    assert host.mem_available(str(meminfo)) == 21_000_000 * 1024
    assert host.mem_available(str(tmp_path / "missing")) is None
    assert host.mem_available() is None or host.mem_available() > 0


def test_a_quantised_checkpoint_is_unsupported(env, tmp_path):
    config = json.loads((env["llama"] / "config.json").read_text())
    folder = tmp_path / "gptq"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "gptq"}}))
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).symlink_to((env["llama"] / name).resolve())
    entry = catalog.describe(str(folder))
    assert not entry.supported and entry.reason.startswith("quantised checkpoint (gptq)")
    assert entry.name == "gptq" and entry.n_params == env["n_params"]
    (folder / "config.json").write_text(json.dumps(config))
    assert catalog.describe(str(folder)).supported  # the same files without the quantisation note


def test_a_damaged_hub_repository_is_listed_and_the_others_still_are(tmp_path):
    hub = tmp_path / "hub"
    good = hub_snapshot(hub, "org/good", {"config.json": b"{}", "weights.bin": b"x" * 1000}, "g00d")
    (hub / "models--org--nosnap").mkdir(parents=True)  # a download that never got its snapshots folder
    hub_snapshot(hub, "org/stale", {"config.json": b"{}"}, "aaa")
    (hub / "models--org--stale" / "refs" / "main").write_text("bbb")  # refs/main names a revision not there
    (hub / "models--org--empty" / "snapshots").mkdir(parents=True)
    (hub / "datasets--org--data" / "snapshots").mkdir(parents=True)  # not a model: not listed
    entries = by_name(catalog.hub_entries(catalog._Budget(1000), hub))
    assert set(entries) == {"org/good", "org/nosnap", "org/stale", "org/empty"}
    assert entries["org/good"].path == str(good) and entries["org/good"].size_bytes == 1002
    assert entries["org/nosnap"].reason.startswith("damaged in the Hugging Face cache (Snapshots dir")
    assert "models--org--nosnap/snapshots" in entries["org/nosnap"].reason
    assert "bbb" in entries["org/stale"].reason and "models--org--stale" in entries["org/stale"].reason
    assert entries["org/empty"].reason == "no snapshot downloaded"
    assert all(not e.supported and "\n" not in e.reason for name, e in entries.items() if name != "org/good")


def test_a_fifo_among_the_refs_does_not_hold_the_scan(tmp_path):
    hub = tmp_path / "hub"
    hub_snapshot(hub, "org/model", {"config.json": b"{}"}, "r1")
    fifo = hub / "models--org--model" / "refs" / "pr"
    os.mkfifo(fifo)  # huggingface_hub opens every ref file: this open waits for a writer
    started = time.monotonic()
    [entry] = catalog.hub_entries(catalog._Budget(1000), hub, wait=1.0)
    assert time.monotonic() - started < 10
    assert entry.name == "The Hugging Face cache" and entry.path == str(hub) and not entry.supported
    assert entry.reason.startswith("could not be read (TimeoutError: its scan took over 1 s") and "\n" not in entry.reason
    with open(fifo, "w"):  # let the scan thread go: it reads an empty ref and ends
        pass
    waiting = [t for t in threading.enumerate() if t.name == "hub cache scan"]
    for thread in waiting:
        thread.join(10)


def test_a_snapshot_link_outside_the_cache_is_counted_once_where_it_points(tmp_path):
    hub = tmp_path / "hub"
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(b"y" * 500)
    snapshot = hub_snapshot(hub, "org/linked", {"config.json": b"{}"}, "r1")
    (snapshot / "a.bin").symlink_to(outside)
    (snapshot / "b.bin").symlink_to(outside)  # the same file twice: counted once
    (snapshot / "gone.bin").symlink_to(tmp_path / "missing")  # a dangling link outside: the repository is damaged
    [damaged] = catalog.hub_entries(catalog._Budget(1000), hub)
    assert damaged.name == "org/linked" and not damaged.supported and "broken symlink" in damaged.reason
    (snapshot / "gone.bin").unlink()
    [entry] = catalog.hub_entries(catalog._Budget(1000), hub)
    assert entry.name == "org/linked" and entry.size_bytes == 2 + 500
