"""A model loaded on stock ops while the decode kernels compile, moved onto them when they are ready.

A first start does not wait for the kernels' build (10-60 s): loading.load_model(kernels_in_background=True)
loads float32 weights on stock ops (`LoadedModel.kernels_pending`), and the engine starts the build here.
Between two forwards (a command, or a step of a Run) the engine asks `switch_if_built`: once the build is
done, every linear is rebuilt around the same tensors in the kernels backend's class (Decoder.rebind), so
the session goes on where it was: its steps, its KV cache (the same layout on both backends), the weights'
fingerprint. Stock ops and the kernels give the same numbers up to float rounding order (tests/kernels/test_kernels.py).
"""

from __future__ import annotations

from concurrent.futures import Future

from inference.model import kernel_shape
from inference import kernels
from inference.model.layers import select_backend


def start_build(model) -> Future | None:
    """The kernels' background build for a model that waits for it, else None."""
    return kernels.build_in_background() if getattr(model, "kernels_pending", False) else None


def switch_if_built(model, build: Future | None) -> bool | None:
    """None while the build runs (or there is none); else the model leaves its pending state and the result
    says whether it runs on the kernels now (False: the build failed or cannot run here; stock ops stay)."""
    if build is None or not build.done():
        return None
    model.kernels_pending = False
    if build.exception() is not None or build.result() is None:
        return False
    decoder = model.decoder
    decoder.rebind(select_backend(decoder.device, decoder.dtype))  # built: no compile here
    kernel_shape.ensure(decoder)  # this machine's rows per pass and prefetch (measured once, then cached)
    return True
