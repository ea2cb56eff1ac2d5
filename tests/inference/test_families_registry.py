"""The family registry (inference/model/families/registry.py) against transformers, driven by its rows: every
architecture every row answers to is loaded from a tiny random checkpoint and must give transformers' logits
at every prompt position and at every cached decode step; a row added without a tiny checkpoint to check
it fails here. Reading configs through the registry never imports torch (the GUI's model picker does it)."""

import subprocess
import sys

import pytest
import torch

from inference.model.config import ModelConfig
from inference.model.families import registry
from inference.store.loading import load_model
from tiny import make_hf_model, make_image_text_gemma3, save_hf_model, write_tokenizer

PROMPT = [5, 77, 200, 31, 9, 140, 250, 3]
N_DECODE = 10  # 18 positions: past the tiny Mistral's and Gemma's windows
TOLERANCE = 1e-4

# The tiny checkpoint (tests/support/tiny.py) of each model_type a row names; None: a maker of its own.
TINY = {"gemma3_text": "gemma3", "gemma3": None}
ROWS = [pytest.param(family.name, arch, id=f"{family.name}-{arch}")
        for family in registry.FAMILIES for arch in family.architectures]


def _tiny_checkpoint(arch: str, folder):
    model_type = registry.by_architecture(arch).architectures[arch]
    if arch == "Gemma3ForConditionalGeneration":
        hf = make_image_text_gemma3()
        folder.mkdir(parents=True)
        hf.save_pretrained(folder)
        write_tokenizer(folder)
        return hf, folder
    name = TINY.get(model_type, model_type)
    hf = make_hf_model(name)
    assert type(hf).__name__ == arch, f"no tiny checkpoint of {arch} in tests/support/tiny.py"
    return hf, save_hf_model(hf, folder)


def _hf_logits(hf, ids) -> torch.Tensor:
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0].float()  # (T, V)


@pytest.mark.parametrize("family, arch", ROWS)
def test_every_row_runs_as_transformers_does(family, arch, tmp_path):
    hf, folder = _tiny_checkpoint(arch, tmp_path / "model")
    ours = load_model(folder, device="cpu", dtype="float32")
    assert (ours.config.family, ours.config.architecture) == (family, arch)
    decoder = ours.decoder
    cache = decoder.new_cache(8)  # grows while decoding
    ids = list(PROMPT)
    with torch.inference_mode():
        logits = decoder.forward(torch.tensor(ids), 0, cache, all_logits=True)
        expected = _hf_logits(hf, ids)
        assert expected.abs().max() > 0.5  # the model has signal, so a wrong layer cannot hide
        assert (logits - expected).abs().max().item() <= TOLERANCE
        for _ in range(N_DECODE):
            ids.append(int(torch.argmax(expected[-1])))
            logits = decoder.forward(torch.tensor(ids[-1:]), len(ids) - 1, cache)[0]
            expected = _hf_logits(hf, ids)
            assert (logits - expected[-1]).abs().max().item() <= TOLERANCE, len(ids)


def test_every_row_is_found_by_its_architecture_and_its_model_type():
    for family in registry.FAMILIES:
        assert registry.family(family.name) is family
        for arch, model_type in family.architectures.items():
            assert registry.by_architecture(arch) is family
            assert registry.architecture_of_model_type(model_type) == arch
    assert len(registry.architectures()) == sum(len(f.architectures) for f in registry.FAMILIES)  # no overlap
    with pytest.raises(Exception, match="unsupported architecture 'MambaForCausalLM'"):
        ModelConfig.from_hf({"architectures": ["MambaForCausalLM"]})


def test_every_gguf_architecture_names_a_class_of_its_row_and_tensor_names_are_unique():
    for family in registry.FAMILIES:
        for gguf_arch, how in family.gguf.items():
            assert registry.by_gguf(gguf_arch) == (family, how)
            assert how.hf_class in family.architectures
        layout = family.layout
        specs = layout.inputs + layout.layer + layout.outputs
        named = [spec.gguf for spec in specs if spec.gguf]
        assert len(named) == len(set(named)), family.name
        for spec in specs:
            if spec.gguf:
                found = layout.gguf_spec(spec.gguf.format(i=3))
                assert found == (spec, spec.hf.format(i=3))
    assert registry.by_gguf("mamba") is None


def test_reading_configs_and_the_registry_never_imports_torch():
    run = subprocess.run([sys.executable, "-c", "import inference.store.catalog, inference.model.families.registry, "
                          "sys; assert 'torch' not in sys.modules"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
