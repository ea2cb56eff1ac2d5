"""generation_config.json: the sampler a model's authors chose (temperature, top-k, top-p, min-p, do_sample),
the starting point of the app's sampler controls and of `trace` when no option overrides it."""

from __future__ import annotations

import json
from pathlib import Path

from inference.settings import SamplerSettings


def read_loosely(folder: Path) -> dict:
    """The folder's generation_config.json, or {} where it is missing or unreadable (a server's tokenizer
    folder: the generation config is a courtesy there, never a reason to refuse)."""
    try:
        data = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def sampler_defaults(generation: dict) -> SamplerSettings:
    """The model's generation_config.json where it says, else T 1.0, top-k 50, top-p 1.0, min-p 0."""
    base = SamplerSettings()

    def number(key, default, kind):
        value = generation.get(key)
        return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    return SamplerSettings(
        temperature=number("temperature", base.temperature, float),
        top_k=number("top_k", base.top_k, int),
        top_p=number("top_p", base.top_p, float),
        min_p=number("min_p", base.min_p, float),
        greedy=generation.get("do_sample") is False)
