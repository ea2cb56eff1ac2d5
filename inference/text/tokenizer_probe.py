"""A tokenizer.json is tried on hostile text before it is used: its split regexes must not backtrack.

`tokenizers` runs pre-tokenizer regexes with Oniguruma. A pattern such as `(a+)+b` backtracks
exponentially: Oniguruma stops at its retry limit and the Rust side panics (a `PanicException`, which is
not an `Exception`, with a Rust backtrace written to stderr); a milder pattern can run for minutes on a
long prompt without panicking. So at load each probe text below is encoded at lengths that double from
8 to 2048 characters; a panic, or one encode slower than PROBE_SECONDS, refuses the file in one line.
Doubling bounds the cost: a probe that passed at n and is cubic costs about 8x that at 2n, and an
exponential one panics within a few dozen characters. Normal tokenizers pass in tens of milliseconds.
The encode runs on the calling thread: the library holds the GIL while it encodes, so no watchdog thread
could stop it; the length schedule is what keeps it short.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

from inference.errors import ModelFormatError
from inference.messages import say

PROBE_SECONDS = 0.25  # one probe encode slower than this: the regex backtracks
PROBE_LENGTHS = tuple(8 << k for k in range(9))  # 8 ... 2048 characters
# Runs that make a greedy or nested quantifier try every split; a different last character so the
# pattern's tail fails and backtracking starts.
_SEEDS = ("a", " ", "1", "'", "\n", "é", "a ", "a1")
_ENDS = ("!", "a")


def is_panic(error: BaseException) -> bool:
    """A Rust panic raised through pyo3 (its class derives from BaseException only)."""
    return type(error).__name__ == "PanicException"


@contextmanager
def quiet_stderr():
    """Send fd 2 to /dev/null for a moment: a Rust panic prints its backtrace there before raising."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def has_regex(backend) -> bool:
    """Whether the pre-tokenizer or normalizer runs a regex of the file's own (ByteLevel's is built in)."""
    for part in (backend.pre_tokenizer, backend.normalizer):
        if part is not None and b'"Regex"' in part.__getstate__():
            return True
    return False


def probe(backend, source: str) -> None:
    """Refuse a tokenizer whose encoding panics or is slow on short adversarial texts (only one with a
    regex of its own is tried: the others cannot backtrack)."""
    if not has_regex(backend):
        return
    with quiet_stderr():
        for seed in _SEEDS:
            for end in _ENDS:
                for length in PROBE_LENGTHS:
                    text = (seed * (length // len(seed) + 1))[:length] + end
                    started = time.perf_counter()
                    try:
                        backend.encode(text, add_special_tokens=False)
                    except BaseException as e:  # noqa: B036 - a Rust panic is a BaseException
                        if not is_panic(e) and not isinstance(e, Exception):
                            raise
                        why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                        raise ModelFormatError(say("tokenizer.probe_fails", path=source, length=length, seed=seed,
                                                   why=why)) from None
                    spent = time.perf_counter() - started
                    if spent > PROBE_SECONDS:
                        raise ModelFormatError(say("tokenizer.probe_slow", path=source, seconds=spent,
                                                   length=length, seed=seed))
