"""Chat templates in a box: hostile templates end quickly, in a child process whose memory growth is measured,
with a one-line error naming the limit; real templates render exactly as Jinja's plain sandbox renders them."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inference.text import template_box
from inference.errors import ModelFormatError

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}]
TOOLS = [{"type": "function", "function": {"name": "add", "description": "Adds two numbers.",
                                           "parameters": {"type": "object", "properties": {
                                               "a": {"type": "number"}, "b": {"type": "number"}}}}}]
TOOL_CHAT = [{"role": "system", "content": "Use tools. 用工具。"}, {"role": "user", "content": "What is 2+2? 🚀"},
             {"role": "assistant", "content": "<think>\nadd them\n</think>\n\nCalling add.",
              "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
             {"role": "tool", "content": "4"}, {"role": "tool", "content": "four"},
             {"role": "assistant", "content": "<think>easy</think>It is 4."}, {"role": "user", "content": "Thanks"}]
ALTERNATING = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"},
               {"role": "user", "content": "2+2? 你好"}]

# SmolLM2's ChatML, as the default model's GGUF carries it.
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
           "<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>'"
          " + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if "
          "loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if "
          "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
# Llama 3's shape plus the filters and operators an older test exercised (center, batch, join, %, map).
LLAMA3_FILTERS = (
    "{{ bos_token }}{% for m in messages %}{% set content = '<|start_header_id|>' + m['role'] + "
    "'<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    "{{ messages | length | string | center(5) }}{{ messages[1:] | map(attribute='role') | join(',') }}"
    "{% for chunk in messages | batch(2) %}{{ chunk | length }}{% endfor %}{{ '%5s' % 'x' }}"
    "{{ '{:>6}|{:.2f}|{!r}'.format('ab', 3.14159, [1, 'x']) }}{{ '%(n)03d %-4s|' % {'n': 7, 'x': 1} if false }}"
    "{{ '%(n)03d' % {'n': 7} }}{{ '%-4s|%5.1f' % ('ab', 2.25) }}{{ 'a b  c'.split() | join('-') }}"
    "{{ 'x\ty'.expandtabs(4) }}{{ 'abc'.replace('b', 'BB') }}{{ ('l1\nl2' | indent(2, true)) }}"
    "{{ 'ab' * 3 }}{{ [1, 2] + [3] }}{{ 2 ** 10 }}{{ 3 * 4 }}{{ range(5) | sum }}{{ [[1], [2]] | sum(start=[]) }}"
    "{{ messages | tojson }}{{ {'k': [1, 2]} | tojson(indent=2) }}{{ 'one two three' | wordwrap(5) }}"
    "{{ ('a' ~ 1 ~ [2]) }}{{ messages[0] }}{{ {'b': 1, 'a': (1, 2)} | dictsort }}{{ 'x,y'.split(',') }}")
LLAMA31_TOOLS = (
    "{{- bos_token }}{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = \"\" %}{%- endif %}"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
    "{%- if tools is not none %}{{- \"You have access to the following functions.\\n\\n\" }}"
    "{%- for t in tools %}{{- t | tojson(indent=4) }}{{- \"\\n\\n\" }}{%- endfor %}{%- endif %}"
    "{{- system_message }}{{- \"<|eot_id|>\" }}"
    "{%- for message in messages %}{%- if not (message.role == 'ipython' or message.role == 'tool' or "
    "'tool_calls' in message) %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' }}{%- elif 'tool_calls' in message %}"
    "{%- if not message.tool_calls|length == 1 %}{{- raise_exception(\"This model only supports single tool-calls "
    "at once!\") }}{%- endif %}{%- set tool_call = message.tool_calls[0].function %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{{- '{\"name\": \"' + tool_call.name + '\", ' }}"
    "{{- '\"parameters\": ' }}{{- tool_call.arguments | tojson }}{{- \"}\" }}{{- \"<|eot_id|>\" }}"
    "{%- elif message.role == \"tool\" or message.role == \"ipython\" %}"
    "{{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}{%- if message.content is mapping or "
    "message.content is iterable and message.content is not string %}{{- message.content | tojson }}{%- else %}"
    "{{- message.content }}{%- endif %}{{- \"<|eot_id|>\" }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")
QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
         "You are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
         "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
         "{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN25_TOOLS = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions.\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
QWEN3_THINKING = """{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or loop.first %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) %}
            {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {{- '<|im_start|>user\\n<tool_response>\\n' + content + '\\n</tool_response><|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""
GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
         "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
         "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
         "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
PHI3 = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
        "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif "
        "message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
           "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only "
           "user and assistant roles are supported!') }}{% endif %}{% endfor %}")

REAL = {"smollm2": (SMOLLM2, MESSAGES), "llama3": (LLAMA3, MESSAGES), "llama3 filters": (LLAMA3_FILTERS, MESSAGES),
        "llama3.1 tools": (LLAMA31_TOOLS, TOOL_CHAT), "qwen2": (QWEN2, MESSAGES),
        "qwen2.5 tools": (QWEN25_TOOLS, TOOL_CHAT), "qwen3 thinking": (QWEN3_THINKING, TOOL_CHAT),
        "gemma": (GEMMA, ALTERNATING), "phi3": (PHI3, MESSAGES), "mistral": (MISTRAL, ALTERNATING)}


def raise_exception(message):
    raise TemplateError(message)


def tojson(value, indent=None):  # as the tokenizer passes it
    return json.dumps(value, ensure_ascii=False, indent=indent)


def variables(messages):
    return dict(messages=messages, tools=TOOLS, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")


def plain_render(source: str, messages) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    return env.from_string(source).render(**variables(messages))


def boxed_render(source: str, messages) -> str:
    return template_box.render(source, variables(messages), "tokenizer_config.json",
                               {"raise_exception": raise_exception}, {"tojson": tojson})


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_templates_render_as_the_plain_sandbox_does(name):
    source, messages = REAL[name]
    boxed = boxed_render(source, messages)
    assert boxed == plain_render(source, messages)
    assert messages[-1]["content"] in boxed


@pytest.mark.parametrize("name", ["smollm2", "qwen3 thinking", "llama3.1 tools"])
def test_a_long_chat_renders_as_the_plain_sandbox_does(name):
    # A million characters of English and 300,000 of Chinese, 500 turns: far beyond any real context, inside the box.
    long_chat = [{"role": "system", "content": "s" * 1_000_000},
                 *({"role": "user", "content": f"question {i}"} if i % 2 == 0 else
                   {"role": "assistant", "content": f"<think>hm {i}</think>answer {i}"} for i in range(500)),
                 {"role": "user", "content": "你好" * 150_000}]
    source = REAL[name][0]
    assert boxed_render(source, long_chat) == plain_render(source, long_chat)


# Two 4 MB strings that differ only in their last character: comparing them reads all of both.
TWO_BIG = "{% set a = 'x' * 4000000 %}{% set b = 'x' * 3999999 ~ 'y' %}"
HOSTILE = {
    # Loops, ranges and recursion: stopped by the clock or by a count.
    "nested range": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                     "longer than"),
    "silent loops over a list": ("{% set xs = range(90000) | list %}{% for a in xs %}{% for b in xs %}"
                                 "{% endfor %}{% endfor %}", "longer than"),
    "huge range": ("{% for i in range(10**12) %}x{% endfor %}", "size argument"),
    "recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed"),
    "doubling macro recursion": ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% else %}{{ 'x' * 100000 }}"
                                 "{% endif %}{% endmacro %}{{ f(30) }}", "4,000,000"),
    "lipsum": ("{{ lipsum(100000) }}", "`lipsum` would build"),
    # Strings grown by operators.
    "string repeat": ("{{ 'x' * 10**10 }}", "repeating"),
    "repeat of a built string": ("{{ ('x' * 4000000) * 2 }}", "repeating"),
    "doubling": ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
                 "{% endfor %}{{ ns.s | length }}", "`+` would build"),
    "tilde doubling": ("{% set s = namespace(x='a') %}{% for i in range(60) %}{% set s.x = s.x ~ s.x %}"
                       "{% endfor %}", "joining with ~"),
    "tilde terms": ("{% set a = 'x' * 1000000 %}{{ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a }}", "joining with ~"),
    "tilde in a loop": ("{% set ns = namespace(s='') %}{% for i in range(100000) %}"
                        "{% set ns.s = ns.s ~ ('x' * 100000) %}{% endfor %}", "joining with ~"),
    "integer squaring": ("{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
                         "{% endfor %}", "bits"),
    "integer power chain": ("{% set ns = namespace(x=10) %}{% for i in range(10) %}{% set ns.x = ns.x ** 64 %}"
                            "{% endfor %}", "bits"),
    "power": ("{{ 7 ** 999999999 }}", "exponent"),
    # Widths and formats, whatever type the width comes as.
    "center": ("{{ 'x' | center(10**9) }}", "size argument"),
    "center with a string width": ("{{ 'x' | center('999999999') }}", "chat template failed"),
    "method width": ("{{ 'x'.center(10**9) }}", "size argument"),
    "ljust of a built width": ("{{ 'x'.ljust(('9' * 9) | int) }}", "size argument"),
    "percent width": ("{{ '%999999999s' % 'x' }}", "format width"),
    "percent mapping width": ("{{ '%(a)999999999s' % {'a': 'x'} }}", "format width"),
    "percent precision": ("{{ '%.999999999f' % 1.0 }}", "format precision"),
    "percent star widths": ("{{ ('%*s' * 40000) % ((100000, 'x') * 40000) }}", "`%` formatting would build"),
    "percent six-digit widths": ("{{ ('%100000s' * 40000) % (('x',) * 40000) }}", "`%` formatting would build"),
    "format width": ("{{ '{:>999999999}'.format('x') }}", "format width"),
    "format string-valued width": ("{{ '{:{}}'.format('x', '999999999') }}", "format width"),
    "format string-valued right-aligned width": ("{{ '{:>{}}'.format('x', '999999999') }}", "format width"),
    "format string-valued precision": ("{{ '{:.{}f}'.format(1.0, '999999999') }}", "format precision"),
    "format_map string-valued width": ("{{ '{a:{w}}'.format_map({'a': 'x', 'w': '999999999'}) }}", "format width"),
    "format six-digit widths": ("{{ ('{:100000}' * 40000).format(*(('x',) * 40000)) }}", "`format` would build"),
    "format repeating a field": ("{{ ('{0}' * 1000000).format('x' * 4000000) }}", "`format` would build"),
    "format filter width": ("{{ '%999999999s' | format('x') }}", "format width"),
    "format filter mapping width": ("{{ '%(a)999999999s' | format(a='x') }}", "format width"),
    # Filters and methods whose result outgrows their arguments.
    "join with a big separator": ("{{ range(100000) | join('x' * 2000000) }}", "`join` would build"),
    "join method over a generator": ("{{ ('y' * 4000000).join(range(100000) | map('string')) }}",
                                     "`join` would build"),
    "join of centered items": ("{{ range(100000) | map('string') | map('center', 100000) | join }}",
                               "`join` would build"),
    "indent with a huge string": ("{{ ('a\n' * 1000000) | indent('x' * 1000000) }}", "`indent` would build"),
    "indent with a big width": ("{{ ('a\n' * 1000000) | indent(100000) }}", "`indent` would build"),
    "replace growth in a loop": ("{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}"
                                 "{% set ns.s = ns.s | replace('a', 'aaaa') %}{% endfor %}", "`replace` would build"),
    "replace method growth": ("{{ ('a' * 1000000).replace('a', 'x' * 1000000) }}", "`replace` would build"),
    "replace of the empty string": ("{{ ('a' * 100000) | replace('', 'x' * 100000) }}", "`replace` would build"),
    "expandtabs": ("{{ ('\t' * 4000000).expandtabs(100000) }}", "`expandtabs` would build"),
    "translate": ("{{ ('a' * 4000000).translate({97: 'x' * 3000000}) }}", "`translate` would build"),
    "wordwrap of huge text": ("{{ ('ab ' * 600000) | wordwrap(5) }}", "longer than"),
    "wordwrap with a big wrapstring": ("{{ ('a ' * 100000) | wordwrap(1, wrapstring='x' * 1000000) }}",
                                       "`wordwrap` would build"),
    "tojson with an indent string": ("{{ range(100000) | list | tojson(indent='x' * 1000000) }}",
                                     "`tojson` would build"),
    "tojson escapes": ("{{ ['\x00' * 3000000] | tojson }}", "`tojson` would build"),
    "printing a list's escapes": ("{{ ['\x00' * 3000000] }}", "printing"),
    "a list's escapes as a string": ("{{ (['\x00' * 1000000] * 3) | string }}", "`string` would build"),
    "a list's escapes through {!r}": ("{{ '{!r}'.format(['\x00' * 3000000]) }}", "`format` would build"),
    "characters as a list": ("{{ ('€' * 4000000) | list | length }}", "`list` would build 4,000,000 items"),
    "split into many": ("{{ ('ab ' * 1333333).split() | length }}", "`split` would build 1,333,334 items"),
    "sum of lists": ("{{ ([[0]] * 100000) | sum(start=[]) }}", "`sum` of sequences"),
    "huge batch": ("{% for b in [1] | batch(10**9, 'x') %}{% endfor %}", "size argument"),
    # Containers that hold one big string many times over: printing or comparing them would be huge.
    "list repeat of a big string": ("{{ ['x' * 3000000] * 1000 }}", "repeating"),
    "list literal of a big string": (TWO_BIG + "{{ b in [" + "a, " * 1001 + "] }}", "built a value"),
    "a template too big to compile quickly": ("{{ [" + "a, " * 80000 + "] }}", "parts"),
    "macro called with a big string many times": (TWO_BIG + "{% macro m() %}{{ b in varargs }}{% endmacro %}{{ m("
                                                  + "a, " * 10000 + ") }}", "built a value"),
    "batch filled with a big string": (TWO_BIG + "{% for row in [1] | batch(100000, a) %}{{ b in row }}{% endfor %}",
                                       "built a value"),
    # Output, captured output and what many small steps add up to.
    "constants folded at compile time": ("{{ 'x' | center(100000) }}" * 6000, "output passed"),
    "output": ("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}", "output passed"),
    "macro writing a big string": ("{% set big = 'x' * 4000000 %}{% macro m() %}{% for i in range(1000) %}{{ big }}"
                                   "{% endfor %}{% endmacro %}{{ m() | length }}", "macro's or block's output"),
    "filter block writing a big string": ("{% set big = 'x' * 4000000 %}{% filter upper %}{% for i in range(1000) %}"
                                          "{{ big }}{% endfor %}{% endfilter %}", "macro's or block's output"),
    "block set of literal text": ("{% set x %}{% for i in range(100000) %}" + "L" * 50000 + "{% endfor %}{% endset %}"
                                  "{{ x | length }}", "macro's or block's output"),
    "block called through self": ("{% set big = 'x' * 4000000 %}{% if false %}{% block b %}{% for i in range(1000) %}"
                                  "{{ big }}{% endfor %}{% endblock %}{% endif %}{{ self.b() | length }}",
                                  "macro's or block's output"),
    "block set capture": ("{% set x %}{% for i in range(100000) %}{{ 'y' * 10000 }}{% endfor %}{% endset %}",
                          "allocated more than"),
    "macro output": ("{% macro m() %}{% for i in range(100000) %}{{ 'y' * 10000 }}{% endfor %}{% endmacro %}"
                     "{{ m() | length }}", "allocated more than"),
    "a list of centered items": ("{% set l = range(100000) | map('string') | map('center', 100000) | list %}",
                                 "allocated more than"),
    "pprint alignment": ("{{ {'k' * 1000000: range(1000) | list} | pprint }}", "`pprint` would build"),
    # Not a template at all.
    "include": ("{% include 'other.jinja' %}", "`include` is not allowed"),
    "extends": ("{% extends 'base.jinja' %}", "`extends` is not allowed"),
    "import": ("{% import 'macros.jinja' as m %}", "`import` is not allowed"),
    "from import": ("{% from 'macros.jinja' import m %}", "`import` is not allowed"),
    "internals": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "chat template failed"),
}

# The render in a fresh process: its peak RSS (ru_maxrss) grows only by what the hostile template allocated. On
# Linux a 3 GB address-space cap keeps a box that failed from taking the machine down with it.
CHILD = r"""
import json, resource, sys, time
if sys.platform.startswith("linux"):
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from inference.text import template_box
from inference.errors import ModelFormatError
source, seconds = json.loads(sys.stdin.read())
template_box.MAX_SECONDS = seconds
template_box.render("{{ messages | length }}", {"messages": []}, "warm-up")
unit = 1 if sys.platform == "darwin" else 1024
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
started = time.monotonic()
try:
    template_box.render(source, {"messages": [{"role": "user", "content": "hi"}]}, "some/tokenizer_config.json")
    message = None
except ModelFormatError as e:
    message = str(e)
seconds = time.monotonic() - started
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit - before
print(json.dumps({"message": message, "seconds": seconds, "grown_mb": grown / 2**20}))
"""


def render_in_child(source: str, seconds: float) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps([source, seconds]), capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(sys.platform == "win32", reason="the child measures itself with the resource module")
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_template_is_refused_quickly_naming_the_limit(name):
    # The real limits, but a clock of 0.5 s where the clock is the limit under test (a quicker suite).
    source, expected = HOSTILE[name]
    seconds = 0.5 if expected == "longer than" else template_box.MAX_SECONDS
    result = render_in_child(source, seconds)
    message = result["message"]
    assert message is not None, "rendered without a refusal"
    assert "\n" not in message and message.startswith("some/tokenizer_config.json: chat template"), message
    assert expected in message, message
    # Bounded: no case may grow the process by hundreds of MB, nor run on (a hang guard, far above the clock).
    assert result["grown_mb"] < 300, result
    assert result["seconds"] < 30, result


def test_the_tracer_and_tracemalloc_are_as_they_were_after_a_render():
    before = sys.gettrace()
    template_box.render(SMOLLM2, dict(messages=MESSAGES), "x")
    with pytest.raises(ModelFormatError):
        template_box.render(HOSTILE["include"][0], {}, "x")
    with pytest.raises(ModelFormatError):
        template_box.render(HOSTILE["block set capture"][0], {}, "x")
    assert sys.gettrace() is before
    assert not tracemalloc.is_tracing()
    tracemalloc.start()  # a caller that traces allocations itself keeps tracing
    try:
        template_box.render(SMOLLM2, dict(messages=MESSAGES), "x")
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def test_a_refusal_swallowed_on_the_way_is_raised_again_at_the_next_hook(monkeypatch):
    # Python drops a tracer that raises, and code between the template and the box can catch what it raised:
    # here a filter of the caller's own. The budget stays spent, and the next call (`range`) raises it again,
    # before the loops that follow (no hook in them) could run for hours.
    monkeypatch.setattr(template_box, "MAX_SECONDS", 0.2)

    def tick():
        pass

    def swallowing(value):
        try:
            while True:
                tick()
        except Exception:
            return value

    source = ("{{ 'x' | swallowing }}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
              "{% endfor %}")
    before = sys.gettrace()
    with pytest.raises(ModelFormatError, match="longer than 0.2 s"):
        template_box.render(source, {}, "x", filters={"swallowing": swallowing})
    assert sys.gettrace() is before


def test_the_whitespace_a_split_is_sized_by_is_str_isspace():
    assert template_box._WHITESPACE == "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
    assert template_box._LINE_BREAKS == "".join(
        chr(c) for c in range(sys.maxunicode + 1) if len(f"a{chr(c)}b".splitlines()) == 2)
