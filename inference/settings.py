"""Settings of the sampler and of a generation: plain frozen dataclasses, free of torch.

The GUI builds and sends these before any model is loaded, so importing them must stay cheap.
"""

from __future__ import annotations

from inference.messages import say

from dataclasses import dataclass

DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16", "int8")
DEVICE_CHOICES = ("auto", "cpu", "cuda")
MAX_SPECULATE = 16
# The most tokens one generation may ask for: more than any model's context window; a bound for what a script,
# a trace or a command line can ask.
MAX_NEW_TOKENS = 1 << 20
WHEN_FULL = ("stop", "drop-oldest")  # what a full context window does (context_limit.py)
MIN_CONTEXT_LIMIT = 4  # the smallest context limit: a first token, and room for a shift to keep some
PREFILL_CHUNK = 512  # positions per prefill pass; longer prompts take several passes (with progress between)


@dataclass(frozen=True)
class SamplerSettings:
    temperature: float = 1.0
    top_k: int = 50  # 0 disables
    top_p: float = 1.0  # 1 disables
    min_p: float = 0.0  # 0 disables
    greedy: bool = False  # argmax, no draw (temperature 0 means the same)

    @property
    def is_greedy(self) -> bool:
        return self.greedy or self.temperature == 0

    def validate(self) -> "SamplerSettings":
        if not self.temperature >= 0:
            raise ValueError(say("settings.temperature", value=self.temperature))
        if self.top_k < 0:
            raise ValueError(say("settings.top_k", value=self.top_k))
        if not 0 < self.top_p <= 1:
            raise ValueError(say("settings.top_p", value=self.top_p))
        if not 0 <= self.min_p <= 1:
            raise ValueError(say("settings.min_p", value=self.min_p))
        return self


@dataclass(frozen=True)
class Stage:
    name: str  # "temperature", "top_k", "top_p", "min_p" or "greedy"
    kept: int  # tokens with non-zero probability after this stage
    removed_mass: float  # mass this stage removed from the distribution it received


@dataclass(frozen=True)
class GenerationSettings:
    sampler: SamplerSettings = SamplerSettings()
    max_new_tokens: int = 64
    stop_strings: tuple[str, ...] = ()
    seed: int = 0
    top_n: int = 20
    speculate: int = 0  # draft tokens per verify pass, by prompt lookup (0 = off)
    context_limit: int = 0  # the context window to run in, in tokens (0 = the model's own window)
    when_full: str = "stop"  # when the window is full: "stop" (context_full) or "drop-oldest" (a shift)

    def validate(self) -> "GenerationSettings":
        self.sampler.validate()
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise ValueError(say("settings.max_new_tokens", high=MAX_NEW_TOKENS, value=self.max_new_tokens))
        if self.top_n < 1:
            raise ValueError(say("settings.top_n", value=self.top_n))
        if not 0 <= self.speculate <= MAX_SPECULATE:
            raise ValueError(say("settings.speculate", high=MAX_SPECULATE, value=self.speculate))
        if self.context_limit and self.context_limit < MIN_CONTEXT_LIMIT:
            raise ValueError(say("settings.context_limit", low=MIN_CONTEXT_LIMIT, value=self.context_limit))
        if self.when_full not in WHEN_FULL:
            raise ValueError(say("settings.when_full", choices=", ".join(WHEN_FULL), value=repr(self.when_full)))
        if self.speculate and self.when_full == "drop-oldest":
            raise ValueError(say("settings.speculate_and_shift"))
        if any(not s for s in self.stop_strings):
            raise ValueError(say("settings.empty_stop"))
        return self


