"""Chat templates in a box: hostile templates end quickly with a one-line error naming the limit, and real
templates render exactly as Jinja's plain sandbox renders them."""

from __future__ import annotations

import resource
import time

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inference import template_box
from inference.errors import ModelFormatError

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}]
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are helpful.<|im_end|>\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}{% set content = '<|start_header_id|>' + m['role'] + "
          "'<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
          "{{ messages | length | string | center(5) }}{{ messages[1:] | map(attribute='role') | join(',') }}"
          "{% for chunk in messages | batch(2) %}{{ chunk | length }}{% endfor %}{{ '%5s' % 'x' }}")

HOSTILE = {
    "nested range": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                     "longer than"),
    "silent loops over a list": ("{% set xs = range(90000) | list %}{% for a in xs %}{% for b in xs %}"
                                 "{% endfor %}{% endfor %}", "longer than"),
    "huge range": ("{% for i in range(10**12) %}x{% endfor %}", "size argument"),
    "string repeat": ("{{ 'x' * 10**10 }}", "repeating"),
    "doubling": ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
                 "{% endfor %}{{ ns.s | length }}", "built a value"),
    "tilde doubling": ("{% set s = namespace(x='a') %}{% for i in range(60) %}{% set s.x = s.x ~ s.x %}"
                       "{% endfor %}", "joining with ~"),
    "tilde terms": ("{% set a = 'x' * 1000000 %}{{ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a }}", "joining with ~"),
    "replace growth": ("{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}"
                       "{% set ns.s = ns.s | replace('a', 'aaaa') %}{% endfor %}", "built a value"),
    "huge batch": ("{% for b in [1] | batch(10**9, 'x') %}{% endfor %}", "size argument"),
    "center": ("{{ 'x' | center(10**9) }}", "size argument"),
    "method width": ("{{ 'x'.center(10**9) }}", "size argument"),
    "percent width": ("{{ '%999999999s' % 'x' }}", "format width"),
    "format width": ("{{ '{:>999999999}'.format('x') }}", "format width"),
    "format filter width": ("{{ '%999999999s' | format('x') }}", "format width"),
    "power": ("{{ 7 ** 999999999 }}", "exponent"),
    "output": ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}", "output passed"),
    "recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed"),
    "include": ("{% include 'other.jinja' %}", "`include` is not allowed"),
    "extends": ("{% extends 'base.jinja' %}", "`extends` is not allowed"),
    "import": ("{% import 'macros.jinja' as m %}", "`import` is not allowed"),
    "from import": ("{% from 'macros.jinja' import m %}", "`import` is not allowed"),
    "internals": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "chat template failed"),
}


def plain_render(source: str) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    return env.from_string(source).render(messages=MESSAGES, add_generation_prompt=True, bos_token="<s>")


@pytest.mark.parametrize("source", [CHATML, LLAMA3], ids=["chatml", "llama3"])
def test_real_templates_render_as_the_plain_sandbox_does(source):
    boxed = template_box.render(source, dict(messages=MESSAGES, add_generation_prompt=True, bos_token="<s>"),
                                "tokenizer_config.json")
    assert boxed == plain_render(source)
    assert "2+2?" in boxed


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_template_is_refused_quickly_naming_the_limit(name, monkeypatch):
    # The clock's 0.5 s, but 5 s where the limit under test is the output's size: on a loaded machine the
    # traced loop had not written MAX_CHARS in 0.5 s, and the clock, not the size, refused it.
    monkeypatch.setattr(template_box, "MAX_SECONDS", 5.0 if name == "output" else 0.5)
    source, expected = HOSTILE[name]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(ModelFormatError) as info:
        template_box.render(source, dict(messages=MESSAGES), "some/tokenizer_config.json")
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert "\n" not in message and message.startswith("some/tokenizer_config.json: chat template")
    assert expected in message, message
    # Bounded: no case may run on (the clock is 0.5 or 5 s) or grow the process by hundreds of MB.
    assert elapsed < 20, elapsed
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 300, grown_mb


def test_the_tracer_is_removed_after_a_render():
    import sys
    before = sys.gettrace()
    template_box.render(CHATML, dict(messages=MESSAGES), "x")
    with pytest.raises(ModelFormatError):
        template_box.render(HOSTILE["include"][0], {}, "x")
    assert sys.gettrace() is before
