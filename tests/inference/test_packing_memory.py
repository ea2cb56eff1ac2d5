"""A large tensor and its copy are never both resident while a model loads (issue 38 item 5: Gemma 3 270M's
671 MB float32 embedding set the load's peak, 2.3 GB against 1.8 after the change): the reader copies a tensor out
of the mapped file a part at a time, handing the file's pages back, and `pack` hands back each copied part of an
original it alone holds."""

import mmap

import pytest
import torch
from tiny import make_hf_model, save_hf_model

from inference.model import packing
from inference.model.packing import copy_releasing, release_pages, sole_owner
from inference.store.loading import load_model

needs_madvise = pytest.mark.skipif(packing._MADVISE is None, reason="no madvise(MADV_DONTNEED) here (not Linux/glibc)")


@needs_madvise
def test_a_copy_in_parts_hands_back_the_pages_it_copied(monkeypatch):
    monkeypatch.setattr(packing, "RELEASE_BYTES", 1 << 20)
    src = torch.randn(3_000_001)  # 12 MB: 12 parts, the last one short
    want = src.clone()
    dst = torch.empty(src.shape, dtype=torch.float64)
    copy_releasing(dst, src, release=True)
    assert torch.equal(dst, want.double())
    page = mmap.PAGESIZE // 4
    first_whole = -(-src.data_ptr() // mmap.PAGESIZE) * mmap.PAGESIZE
    start = (first_whole - src.data_ptr()) // 4
    assert not src[start:start + 200 * page].any()  # handed back: the OS gives zero pages when read again
    kept = torch.randn(1000)
    copy_releasing(torch.empty(1000), kept, release=False)
    assert kept.abs().sum() > 0


@needs_madvise
def test_released_pages_of_a_file_mapping_read_back_from_the_file(tmp_path):
    path = tmp_path / "data.bin"
    values = torch.arange(1 << 20, dtype=torch.float32)
    path.write_bytes(values.numpy().tobytes())
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    view = torch.frombuffer(mapped, dtype=torch.float32)
    assert torch.equal(view, values)
    release_pages(view, 0, view.numel() * 4)
    assert torch.equal(view, values)  # the file is still there: what was handed back is read again
    del view
    mapped.close()


def test_only_a_tensor_alone_on_its_memory_is_released():
    fresh = torch.zeros(1000)
    if getattr(torch._C, "_storage_Use_Count", None) is None:
        assert not sole_owner(fresh)  # this torch cannot say: never release
        return
    assert sole_owner(fresh)
    view = fresh[10:]
    assert not sole_owner(fresh) and not sole_owner(view)  # another tensor reads the same memory
    del view
    assert sole_owner(fresh)
    assert not sole_owner(torch.zeros(10, 10).t())  # not contiguous


def test_a_loaded_model_has_the_numbers_of_its_checkpoint(tmp_path, monkeypatch):
    """Parts small enough that every tensor of a tiny model is copied in several: the logits are those of a load
    copied whole."""
    folder = save_hf_model(make_hf_model("llama"), tmp_path)
    ids = torch.tensor([5, 77, 200, 31])
    with torch.inference_mode():
        whole = load_model(folder, device="cpu", dtype="float32").decoder
        want = whole.forward(ids, 0, whole.new_cache(8), all_logits=True)
        monkeypatch.setattr(packing, "RELEASE_BYTES", 4096)
        parts = load_model(folder, device="cpu", dtype="float32").decoder
        assert torch.equal(parts.forward(ids, 0, parts.new_cache(8), all_logits=True), want)


def test_a_device_digest_sees_one_changed_word_and_two_swapped():
    """The GPU's fingerprint sums the weights where they are (packing.device_digest): run here on the CPU."""
    g = torch.Generator().manual_seed(5)
    t = torch.randn(1001, generator=g)
    digest = packing.device_digest(t)
    assert packing.device_digest(t.clone()) == digest
    flipped = t.clone()
    flipped.view(torch.int32)[500] ^= 1  # one bit of one weight
    swapped = t.clone()
    swapped[[3, 7]] = t[[7, 3]]
    assert len({digest, packing.device_digest(flipped), packing.device_digest(swapped)}) == 3
    odd = torch.arange(7, dtype=torch.int8)  # not a whole number of 32-bit words
    assert packing.device_digest(odd) != packing.device_digest(odd.flip(0))


def test_a_digest_in_parts_equals_one_in_a_single_part(monkeypatch):
    t = torch.randn(10_000)
    whole = packing.device_digest(t)
    monkeypatch.setattr(packing, "DIGEST_WORDS", 999)
    assert packing.device_digest(t) == whole
