"""The local source: this process's own decoder (inference/model/decoder.py) and its KV cache."""

from __future__ import annotations

import torch

from inference.sources import LogitsSource


class LocalDecoder(LogitsSource):
    def __init__(self, decoder):
        self.decoder = decoder
        self.cache = None

    @property
    def forward_count(self) -> int:
        return self.decoder.forward_count

    def start(self, capacity: int) -> None:
        self.cache = self.decoder.new_cache(capacity)

    def forward(self, ids: list[int], start: int, capture=None, all_logits: bool = False,
                residuals=None) -> torch.Tensor:
        with torch.inference_mode():
            tensor = torch.tensor(ids, device=self.decoder.device)
            logits = self.decoder.forward(tensor, start, self.cache, capture=capture, all_logits=all_logits,
                                          residuals=residuals)
            return (logits if all_logits else logits[0]).to("cpu")

    def head_logits(self, rows: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.decoder.head_logits(rows)

    def crop(self, n_positions: int) -> None:
        self.cache.crop(n_positions)

    @property
    def kv_used_bytes(self) -> int:
        return self.cache.used_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        return self.cache.bytes_per_token

    @property
    def kv_allocated_bytes(self) -> int:
        return self.cache.allocated_bytes
