"""The stages of getting a model ready, in the words the app and the terminal use for them.

A load reports `progress(stage, done, total)` as it goes (store/default_model.py, store/gguf/convert.py, kernels/ via
layers.select_backend, loading.py). Each stage names what really happens then, so that a slow one is never
shown under the name of the one before it ("Downloading 100 %" while the weights are converted). In the
order a first start goes through them:
"""

from __future__ import annotations

import sys
import time

STAGES = {
    "download": "downloading the default model",
    "verify": "checking the download (sha256)",
    "hash": "checking the file (sha256)",
    "unpack": "unpacking the GGUF file",
    "read": "reading the GGUF header and tokenizer",
    "dequantise": "converting the weights (dequantising)",
    "write": "writing the converted model",
    "compile": "compiling the decode kernels, once (~15-60 s)",
    "load": "loading the weights",
    "tune": "measuring the decode kernels' fastest shape on this CPU, once (~1 s)",
}


def describe(stage: str, done: int, total: int) -> str:
    """The words for a stage, with its amount where it has one ("downloading … (40 of 93 MB)")."""
    text = STAGES.get(stage, stage)
    if stage == "download" and total > 1:
        return f"{text} ({done / 1e6:.0f} of {total / 1e6:.0f} MB)"
    if total > 1:
        return f"{text} ({done:,} of {total:,})"
    return text


class StderrProgress:
    """One line on stderr when a stage starts ("[tokenstep] compiling the decode kernels…"); a download
    also every few seconds with its megabytes; `ready()` ends with the time it all took."""

    DOWNLOAD_EVERY_S = 3.0

    def __init__(self, stream=None, clock=time.monotonic):
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.stage: str | None = None
        self._last_line = 0.0

    def _say(self, text: str) -> None:
        print(f"[tokenstep] {text}", file=self.stream or sys.stderr, flush=True)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage == "prefill":  # a prompt being read: not a stage of the load
            return
        now = self.clock()
        if stage != self.stage:
            self.stage, self._last_line = stage, now
            amount = f" ({total / 1e6:.0f} MB)" if stage == "download" and total > 1 else \
                f" ({total:,} tensors)" if stage == "dequantise" and total > 1 else ""
            self._say(f"{STAGES.get(stage, stage)}{amount}…")
        elif stage == "download" and 0 < done < total and now - self._last_line >= self.DOWNLOAD_EVERY_S:
            self._last_line = now
            self._say(f"downloaded {done / 1e6:.0f} of {total / 1e6:.0f} MB")

    def ready(self, what: str = "ready") -> None:
        self._say(f"{what} in {self.clock() - self.started:.1f} s")
        self.stage = None
