"""Where the built weights live in memory, and what identifies them.

- `pack`: every runtime tensor moved into one aligned block (on transparent huge pages where the OS
  offers them), in the order a decode step reads them, with freed memory handed back to the OS as it goes (a
  large tensor's pages as each part is copied: `copy_releasing`, which the checkpoint reader uses too);
- `fingerprint`: a hash over every runtime tensor, which proves a run left the weights untouched;
- `weights_bytes`: what they occupy.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap

import torch

from inference.model.layers import slot_value, weight_slots

HUGE_PAGE = 2 << 20
PACK_ALIGN = 64  # each tensor starts on a cache line
RELEASE_BYTES = 64 << 20  # freed memory is handed back to the OS at least this often while packing


def release_freed_memory() -> None:
    """Hand the heap's freed pages back to the OS now (glibc keeps them for reuse; freed weights would
    otherwise still count: 1.47 GB resident against 0.77 for the float32 default model)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _madvise():
    """libc's madvise(addr, length, advice), or None (not glibc / no MADV_DONTNEED): pages are then kept."""
    if not hasattr(mmap, "MADV_DONTNEED"):
        return None
    try:
        call = ctypes.CDLL(None).madvise
    except (OSError, AttributeError):
        return None
    call.argtypes, call.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
    return call


_MADVISE = _madvise()


def release_pages(t: torch.Tensor, start: int, end: int) -> None:
    """Hand back to the OS the whole pages within bytes [start, end) of t's memory. Their contents are gone: only
    for memory nothing reads again, or a read-only file mapping (which reads them from the file if touched)."""
    if _MADVISE is None:
        return
    first = -(-(t.data_ptr() + start) // mmap.PAGESIZE) * mmap.PAGESIZE
    last = (t.data_ptr() + end) // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        _MADVISE(first, last - first, mmap.MADV_DONTNEED)


def sole_owner(t: torch.Tensor) -> bool:
    """Whether t is the only tensor on its memory, and all of it: its pages may be released as they are copied.
    (torch's storage use count, where this torch has it; else never.)"""
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    if use_count is None or t.device.type != "cpu" or not t.is_contiguous() or t.storage_offset() != 0:
        return False
    storage = t.untyped_storage()
    return storage.nbytes() == t.numel() * t.element_size() and use_count(storage._cdata) == 2  # t's and `storage`


def copy_releasing(dst: torch.Tensor, src: torch.Tensor, release: bool) -> None:
    """dst.copy_(src) for tensors of one shape (any dtypes), RELEASE_BYTES of src at a time, each part's pages of src
    released once copied when `release`: a large tensor and its copy are never both resident (the float32 embedding
    table of Gemma 3 270M is 671 MB: whole, it set the load's peak)."""
    flat_dst, flat_src = dst.view(-1), src.reshape(-1)
    step = max(1, RELEASE_BYTES // src.element_size())
    for at in range(0, flat_src.numel(), step):
        end = min(at + step, flat_src.numel())
        flat_dst[at:end].copy_(flat_src[at:end])
        if release:
            release_pages(src, at * src.element_size(), end * src.element_size())


def _arena(nbytes: int) -> torch.Tensor:
    """nbytes of zeroed memory (uint8), on transparent huge pages where the OS offers them.

    A private anonymous mapping advised MADV_HUGEPAGE (the allocator's own memory gets huge pages only
    with THP "always", which most distributions leave at "madvise"). Elsewhere a plain tensor.
    """
    if not (hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_PRIVATE")):
        return torch.zeros(nbytes, dtype=torch.uint8)
    whole_pages = -(-nbytes // HUGE_PAGE) * HUGE_PAGE  # the last page whole, so it can be a huge one too
    region = mmap.mmap(-1, whole_pages + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        region.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # THP compiled out or disabled: still one aligned block
        pass
    raw = torch.frombuffer(region, dtype=torch.uint8)  # keeps `region` alive as long as any view
    start = -raw.data_ptr() % HUGE_PAGE
    return raw[start:start + nbytes]


def _decode_order(weights) -> dict[int, list]:
    """id(tensor) -> [tensor, its slots...], in the order a decode step reads them (shared tensors once):
    layer by layer, then the final norm and the head, then the embedding table (of which a step reads
    one row; it sits with a tied head) and learned positions."""
    order = [*weight_slots(weights.layers), *weight_slots(weights.final_norm), *weight_slots(weights.lm_head),
             *((weights, name) for name in ("embed", "pos_embed") if getattr(weights, name) is not None)]
    groups: dict[int, list] = {}
    for owner, key in order:
        t = slot_value(owner, key)
        groups.setdefault(id(t), [t]).append((owner, key))
    return groups


def pack(weights) -> None:
    """Move every tensor of a model.DecoderWeights into one block of memory, in decode order.

    Measured on an Intel Xeon VM (2 threads, default model): separate 538 MB buffers streamed at 23 to
    31 GB/s depending on where each landed, huge-page ones at a steady 29.5. One forward: float32 23.5-24.0
    ms as loaded, 23.3-23.6 packed, 22.7 packed on huge pages; int8 10.9, 10.0, 9.4 ms. The cost is at
    load: on that VM first-touching huge pages took 0.8 s for 538 MB (0.1 s with small pages). A step is
    one sweep from the first byte to the last. Values, dtypes, shapes and sharing are unchanged.
    """
    groups = list(_decode_order(weights).values())
    sizes = [-(-group[0].numel() * group[0].element_size() // PACK_ALIGN) * PACK_ALIGN for group in groups]
    release_freed_memory()  # what building the weights freed, before the block grows
    block, offset, since_release = _arena(sum(sizes)), 0, 0
    for group, size in zip(groups, sizes):
        t = group[0]
        view = block[offset:offset + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
        copy_releasing(view, t, release=sole_owner(t))  # the original's pages go as they are copied
        for owner, key in group[1:]:
            if isinstance(owner, list):
                owner[key] = view
            else:
                setattr(owner, key, view)
        offset += size
        group.clear()  # the original is freed as soon as its copy is in place: the peak stays low
        del t
        since_release += size
        if since_release >= RELEASE_BYTES:
            release_freed_memory()
            since_release = 0
    release_freed_memory()


DIGEST_WORDS = 1 << 24  # 32-bit words a device digest sums at a time (a 64 MB chunk, its index ramp 128 MB)


def device_digest(t: torch.Tensor) -> tuple[int, int, int]:
    """Three 64-bit sums over t's bytes as 32-bit words, computed where t is: the words, the words times their
    position (1-based), the words times their position squared, each modulo 2^64. Any one changed word, and any
    two words swapped, change it; computing it copies three numbers to the host, not the tensor."""
    flat = t.detach().contiguous().view(-1).view(torch.uint8)
    flat = torch.cat([flat, flat.new_zeros(-flat.numel() % 4)]) if flat.numel() % 4 else flat
    words = flat.view(torch.int32)
    sums = torch.zeros(3, dtype=torch.int64, device=t.device)
    for at in range(0, words.numel(), DIGEST_WORDS):
        part = words[at:at + DIGEST_WORDS].to(torch.int64)
        place = torch.arange(at + 1, at + 1 + part.numel(), dtype=torch.int64, device=t.device)
        sums[0] += part.sum()
        sums[1] += (part * place).sum()  # int64 wraps: sums modulo 2^64
        sums[2] += (part * place * place).sum()
    return tuple(int(v) for v in sums.cpu())


def fingerprint(weights) -> str:
    """sha256 over every runtime tensor's bytes: proves a run left the weights untouched. On a GPU over each tensor's
    device_digest instead (issue 43: a re-check copied every weight to the host, 0.5-16 GB); the same weights always
    give the same fingerprint on one device."""
    digest = hashlib.sha256()
    for t in weights.tensors():
        digest.update(str((tuple(t.shape), t.dtype)).encode())
        if t.device.type != "cpu":
            digest.update(str(device_digest(t)).encode())
            continue
        flat = t.detach().contiguous().view(-1)
        digest.update(flat.view(torch.uint8).numpy().data)
    return digest.hexdigest()[:16]


def weights_bytes(weights) -> int:
    return sum(t.numel() * t.element_size() for t in weights.tensors())
