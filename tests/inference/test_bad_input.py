"""Every broken model is one clear ModelFormatError line naming the file; nothing crashes."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inference.model.config import ModelConfig
from inference.errors import ModelFormatError
from inference.store.loading import load_model
from inference.text.tokenizer import ChatMessage, Tokenizer
from tiny import make_hf_model, save_hf_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return save_hf_model(make_hf_model("llama"), tmp_path_factory.mktemp("good"))


def _copy(good, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(good, folder)
    return folder


def _edit_config(folder, **changes):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_nonexistent_path(tmp_path):
    with pytest.raises(ModelFormatError, match="no such file or folder"):
        load_model(tmp_path / "nope")


def test_garbage_safetensors(good, tmp_path):
    folder = _copy(good, tmp_path)
    (folder / "model.safetensors").write_bytes(b"\x00\x01garbage" * 1000)
    with pytest.raises(ModelFormatError, match=r"model\.safetensors: not a valid safetensors file"):
        load_model(folder)


def test_truncated_safetensors(good, tmp_path):
    folder = _copy(good, tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="model.safetensors"):
        load_model(folder)


def test_unknown_architecture(good, tmp_path):
    folder = _copy(good, tmp_path)
    _edit_config(folder, architectures=["MambaForCausalLM"], model_type="mamba")
    with pytest.raises(ModelFormatError, match="unsupported architecture 'MambaForCausalLM'"):
        load_model(folder)


def test_config_shape_mismatch(good, tmp_path):
    folder = _copy(good, tmp_path)
    _edit_config(folder, intermediate_size=128)
    with pytest.raises(ModelFormatError, match=r"model.safetensors: tensor .*mlp.* has shape \[(96, 64|64, 96)\] but config.json implies \[(128, 64|64, 128)\]"):
        load_model(folder)


def test_missing_and_unexpected_tensors(good, tmp_path):
    folder = _copy(good, tmp_path)
    _edit_config(folder, num_hidden_layers=3)
    with pytest.raises(ModelFormatError, match="missing tensor 'model.layers.2"):
        load_model(folder)
    _edit_config(folder, num_hidden_layers=1)
    with pytest.raises(ModelFormatError, match="unexpected tensor 'model.layers.1"):
        load_model(folder)


def test_missing_tokenizer_and_weights(good, tmp_path):
    folder = _copy(good, tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelFormatError, match="no tokenizer.json"):
        load_model(folder)
    folder = _copy(good, tmp_path / "b")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ModelFormatError, match="safetensors only"):
        load_model(folder)


def test_bad_config_values():
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64}
    ModelConfig.from_hf(base)
    for change, message in (({"num_key_value_heads": 3}, "cannot be grouped"),
                            ({"hidden_size": "big"}, "must be an integer"),
                            ({"num_hidden_layers": 0}, "at least 1"),
                            ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "unsupported rope_scaling"),
                            ({"hidden_act": "tanh"}, "unsupported activation")):
        with pytest.raises(ModelFormatError, match=message):
            ModelConfig.from_hf({**base, **change})
    with pytest.raises(ModelFormatError, match="expected a JSON object"):
        ModelConfig.from_hf([1, 2])


def test_transformers5_rope_parameters_are_read():
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64}
    assert ModelConfig.from_hf({**base, "rope_theta": 1234.0}).rope_theta == 1234.0
    c = ModelConfig.from_hf({**base, "rope_parameters": {"rope_type": "linear", "rope_theta": 99.0, "factor": 2.0}})
    assert c.rope_theta == 99.0 and c.rope_scaling.kind == "linear" and c.rope_scaling.factor == 2.0


def test_chat_template_cannot_reach_python_internals(good, tmp_path):
    folder = _copy(good, tmp_path)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    for evil in ("{{ ''.__class__.__mro__[1].__subclasses__() }}",
                 "{{ messages.__class__.__init__.__globals__ }}",
                 "{% set x = messages.append(1) %}{{ x }}",
                 "{{ raise_exception('no chat here') }}",
                 "{% for m in messages %}"):
        config["chat_template"] = evil
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
        tok = Tokenizer.from_folder(folder)
        with pytest.raises(ModelFormatError, match="chat template"):
            tok.render_chat([ChatMessage("user", "hi")])


def test_cli_bad_model_is_one_line_and_exit_1(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", "--model", str(folder)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"error: {folder}: no config.json"]


@pytest.mark.parametrize("args", [["--temperature", "-1"], ["--top-p", "0"], ["--top-p", "1.5"],
                                  ["--top-k", "x"], ["--max-new-tokens", "0"], ["--min-p", "2"],
                                  ["--dtype", "int4"], ["--stop", ""], ["--bogus"],
                                  [b"--prompt", b"caf\xe9 \xff"], [b"--stop", b"\xfe"], [b"--system", b"\x80"]])
def test_cli_invalid_values_exit_2(args):
    # Invalid UTF-8 in argv (bytes arguments) reaches Python as surrogate escapes: a usage error naming
    # the option, never a tokenizer crash.
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "trace", *args],
                            capture_output=True, timeout=120)
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "usage:" in stderr and "Traceback" not in stderr
    if isinstance(args[0], bytes):
        assert f"{args[0].decode()} is not valid UTF-8" in stderr


@pytest.mark.parametrize("change, message", [
    ({"rope_theta": float("nan")}, "'rope_theta' must be a positive number (finite"),
    ({"rope_theta": float("inf")}, "'rope_theta' must be a positive number (finite"),
    ({"rms_norm_eps": float("nan")}, "'rms_norm_eps' must be a positive number (finite"),
    ({"num_hidden_layers": 2**31}, "'num_hidden_layers' of 2147483648 is beyond the largest supported"),
    ({"vocab_size": 10**12}, "'vocab_size' of 1000000000000 is beyond"),
    ({"hidden_act": ["silu"]}, "unsupported activation"),
    ({"architectures": [["LlamaForCausalLM"]]}, "'architectures' must list class names"),
    ({"partial_rotary_factor": float("inf")}, "'partial_rotary_factor' must be a positive number (finite"),
    ({"rope_scaling": {"rope_type": "linear", "factor": float("inf")}}, "rope scaling 'linear' 'factor' must be"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}}, "llama3 rope 'high_freq_factor' 4.0 must be above"),
])
def test_hostile_config_numbers_are_refused_before_allocation(change, message):
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64}
    with pytest.raises(ModelFormatError, match=f"^config.json: {re.escape(message)}"):
        ModelConfig.from_hf({**base, **change})


def test_deeply_nested_config_is_one_line(good, tmp_path):
    folder = _copy(good, tmp_path)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelFormatError, match=r"config.json: not valid JSON"):
        load_model(folder)


@pytest.mark.parametrize("pattern", ["(a+)+b", r"(\w+\s?)+$"])
def test_backtracking_tokenizer_regex_is_refused_at_load(good, tmp_path, pattern):
    folder = _copy(good, tmp_path)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
                                  "invert": False}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ModelFormatError, match=r"tokenizer.json: its pre-tokenizer .* backtracks"):
        Tokenizer.from_folder(folder)


def test_nan_weight_is_named(good, tmp_path):
    import struct

    folder = _copy(good, tmp_path)
    data = bytearray((folder / "model.safetensors").read_bytes())
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + length])
    begin = header["model.norm.weight"]["data_offsets"][0]
    struct.pack_into("<f", data, 8 + length + begin + 4, float("inf"))
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match=r"model.safetensors: tensor 'model.norm.weight' holds 1 NaN or inf"):
        load_model(folder)


def test_kv_cache_beyond_free_memory_is_refused():
    from inference.host import NotEnoughMemory, ensure_kv_fits

    ensure_kv_fits(1000, 1000, available=10**7)
    with pytest.raises(NotEnoughMemory, match="KV cache of 10,000,000 positions: it needs 10.0 GB"):
        ensure_kv_fits(1000, 10**7, available=10**9)
