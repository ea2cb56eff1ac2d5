"""inference/messages.py: an engine sentence is a code plus values; its English (str) is what `trace`, the logs and
the exceptions say, and the code and values cross the protocol for the GUI to word (issue 41, item 4)."""

from __future__ import annotations

from multiprocessing import Pipe

import pytest

from inference.cli import main
from inference.engine import protocol as p
from inference.errors import NotReady
from inference.messages import ENGLISH, Message, render, said, say, what
from tiny import make_hf_model, save_hf_model


def test_the_english_is_the_template_filled_in():
    assert str(say("prompt.too_long", tokens=9000, window=8192)) == \
        "the prompt is 9000 tokens but the context window holds 8192"  # `n`: plain, as trace always wrote it
    kv = say("memory.kv", positions=10_000_000, needed=2_500_000_000, available=900_000_000)
    assert str(kv) == ("Not enough memory for a KV cache of 10,000,000 positions: it needs 2.5 GB but only 900 MB "
                       "is available. Ask for fewer new tokens or a shorter prompt.")
    assert str(say("catalog.gguf_architecture", architecture="mamba", supported="")) == \
        "GGUF architecture 'mamba' is not supported"
    nested = say("script.action", index=2, kind="rewind", problem=say("script.rewind_past", step=4, steps=1))
    assert str(nested) == 'action 2 ("rewind"): rewind 4 is past the 1 steps taken so far'
    assert str(say("script.not_prefilled")) == 'the prompt has not been read yet: put {"prefill": true} before it'
    filled = render("{n:n} and {x:.2f} and {b:bytes}", {"n": 8192, "x": 0.5, "b": 1500},
                    number=lambda v, spec: f"<{v}|{spec}>", size=lambda v: f"[{v}]")
    assert filled == "<8192|n> and <0.5|.2f> and [1500]"


def test_a_code_not_in_the_table_fails_where_it_is_raised():
    with pytest.raises(KeyError, match="prompt.typo"):
        say("prompt.typo")


def test_an_exception_carries_its_message():
    error = NotReady(say("session.prefill_first"))
    assert str(error) == "prefill the prompt first" and said(error) == Message("session.prefill_first", {})
    plain = ValueError("an English line\nand a traceback's second")
    assert said(plain) is None and what(plain) == "an English line"
    assert what(error) is said(error)


def test_failed_carries_the_code_and_values_across_the_pipe():
    message = say("script.action", index=1, kind="step", problem=say("script.in_range", what="step", low=1,
                                                                       high=10, value=0))
    sent = p.Failed(str(message), "", True, message)
    ours, theirs = Pipe()
    theirs.send(p.wrap(sent))
    got = p.receive(ours, p.Reply)
    assert got == sent and got.said.values["problem"].code == "script.in_range"
    theirs.send(p.wrap(p.LoadFailed("x", say("load.missing", path="/nowhere"))))
    assert p.receive(ours, p.Reply).said == say("load.missing", path="/nowhere")


def test_trace_says_an_engine_error_in_english(tmp_path, capsys):
    folder = save_hf_model(make_hf_model("llama", seed=5), tmp_path / "llama")
    rc = main(["trace", "--model", str(folder), "--prompt", "hello hello hello hello hello", "--context-limit", "4"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc != 0
    assert err.startswith("error: the prompt is ") and err.endswith(" tokens but the context window holds 4 "
                                                                    "(the context limit)"), err
    assert all(code.count(".") == 1 for code in ENGLISH)  # "area.what": stable names, one level


def test_a_batch_refuses_a_longrope_model_with_a_code():
    from types import SimpleNamespace

    from inference.session.batch_forward import forward_chunks

    with pytest.raises(ValueError) as caught:
        forward_chunks(SimpleNamespace(longrope=object()), [])  # checked before anything else is read
    assert said(caught.value) == say("batch.longrope")
    assert str(caught.value) == "a batch cannot run a longrope model (Phi-3 long context) yet"
