"""Chat templates rendered in a box: Jinja's immutable sandbox plus limits on time, size and depth.

A chat template is code that came with a downloaded model. Jinja's sandbox already keeps it away from
Python internals; this module also keeps it from hanging the engine or eating the machine's memory:
- rendering time (`MAX_SECONDS`, checked on every line the template runs, loops without output included),
- output size and the size of any string or list the template builds (`MAX_CHARS`),
- numbers that size an allocation (a width, a batch, a repeat count, a range: `MAX_COUNT`),
- recursion (macros calling themselves),
- `include` / `extends` / `import` (there are no other template files to read: refused by name).
Each refusal is a `TemplateLimit` whose message names the limit; `render` turns it into a one-line
`ModelFormatError` naming the file.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any, Callable

from jinja2 import TemplateError, nodes
from jinja2.compiler import CodeGenerator
from jinja2.filters import do_format
from jinja2.runtime import Namespace
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import ModelFormatError

MAX_SECONDS = 2.0  # a real template renders a long chat in milliseconds
MAX_CHARS = 4_000_000  # output, and any string / list / dict built on the way
MAX_COUNT = 100_000  # an integer that sizes something (width, repeat, batch, range length)
MAX_SOURCE = 256_000  # the template text itself
TEMPLATE_FILE = "<template>"
_BIG_WIDTH = re.compile(r"\{[^{}]*?:[^{}]*?\d{7,}|%[-+ #0]*\d{7,}")  # a format width of 7+ digits


class TemplateLimit(TemplateError):
    """The template went past one of the box's limits."""


class _Clock:
    """The deadline of one render, checked from a line tracer on the template's own frames."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateLimit(f"rendering took longer than {self.seconds:g} s")

    def tracer(self, frame, event, arg):
        """sys.settrace hook: a local tracer for template frames only (their code says `<template>`)."""
        if frame.f_code.co_filename != TEMPLATE_FILE:
            return None
        self.check()
        return self._line

    def _line(self, frame, event, arg):
        if event == "line":
            self.check()
        return self._line


def _sized(value: Any) -> Any:
    if isinstance(value, (str, bytes, list, tuple, dict, set)) and len(value) > MAX_CHARS:
        raise TemplateLimit(f"the template built a value of {len(value):,} items (limit {MAX_CHARS:,})")
    return value


def _counts_ok(args, kwargs) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_COUNT:
            raise TemplateLimit(f"a size argument of {value:,} is over the limit of {MAX_COUNT:,}")


def _guarded(function: Callable, check_counts: bool) -> Callable:
    """A filter or test that refuses size arguments over MAX_COUNT (not the value filtered: `1e9|string`
    is fine) and results over MAX_CHARS."""
    skip = 2 if hasattr(function, "jinja_pass_arg") else 1  # the environment / context, then the value

    def guarded(*args, **kwargs):
        if check_counts:
            _counts_ok(args[skip:], kwargs)
        return _sized(function(*args, **kwargs))

    if hasattr(function, "jinja_pass_arg"):
        guarded.jinja_pass_arg = function.jinja_pass_arg
    return guarded


class _CheckedNamespace(Namespace):
    """`namespace()`: what a loop may carry from one turn to the next (`{% set ns.s = ns.s ~ ns.s %}`), its
    values size-checked as they are set."""

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, _sized(value))


def checked_join(parts) -> str:
    """The `~` operator: the joined length is checked before the string is built."""
    texts = [str(part) for part in parts]
    total = sum(map(len, texts))
    if total > MAX_CHARS:
        raise TemplateLimit(f"joining with ~ would build {total:,} characters (limit {MAX_CHARS:,})")
    return "".join(texts)


class _CheckedCodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame) -> None:
        self.write("environment.checked_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoxedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every filter, call and size-making operator checked."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _CheckedCodeGenerator
    checked_join = staticmethod(checked_join)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.globals["namespace"] = _CheckedNamespace
        self.filters = {name: _guarded(f, check_counts=True) for name, f in self.filters.items()}
        self.filters["format"] = _guarded(self._format, check_counts=True)
        self.tests = {name: _guarded(f, check_counts=False) for name, f in self.tests.items()}
        self.globals["range"] = self._range

    @staticmethod
    def _format(value, *args, **kwargs):
        """The `format` filter (`'%s'|format(x)`), its pattern checked for huge widths first."""
        if _BIG_WIDTH.search(str(value)):
            raise TemplateLimit("a format width of over 6 digits")
        _counts_ok(args, kwargs)
        return do_format(value, *args, **kwargs)

    @staticmethod
    def _range(*args):
        _counts_ok(args, {})
        return range(*args)

    def call_binop(self, context, operator: str, left, right):
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
            raise TemplateLimit(f"an exponent of {right} is over the limit of 64")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_CHARS:
                    raise TemplateLimit(f"repeating {len(seq):,} items {n:,} times is over the limit of "
                                        f"{MAX_CHARS:,}")
        if operator == "%" and isinstance(left, str) and _BIG_WIDTH.search(left):
            raise TemplateLimit("a format width of over 6 digits")
        if operator == "%" and isinstance(left, str):
            _counts_ok(right if isinstance(right, tuple) else (right,), {})
        return _sized(super().call_binop(context, operator, left, right))

    def call(self, context, obj, *args, **kwargs):
        _counts_ok(args, kwargs)
        return _sized(super().call(context, obj, *args, **kwargs))

    def wrap_str_format(self, value):
        """`'...'.format(...)`: its format string is checked for huge widths before it runs."""
        wrapper = super().wrap_str_format(value)
        if wrapper is not None and _BIG_WIDTH.search(value.__self__):
            raise TemplateLimit("a format width of over 6 digits")
        return wrapper


_REFUSED_NODES = {nodes.Include: "include", nodes.Extends: "extends", nodes.Import: "import",
                  nodes.FromImport: "import"}


def render(source: str, variables: dict[str, Any], where: str, globals_: dict[str, Callable] | None = None,
           filters: dict[str, Callable] | None = None) -> str:
    """The template rendered with `variables` (and extra globals / filters), or a one-line ModelFormatError
    naming `where` and the limit."""
    try:
        return _render(source, variables, globals_ or {}, filters or {})
    except TemplateLimit as e:
        raise ModelFormatError(f"{where}: chat template refused: {e}") from None
    except RecursionError:
        raise ModelFormatError(f"{where}: chat template refused: it recursed too deeply") from None
    except MemoryError:
        raise ModelFormatError(f"{where}: chat template refused: it ran out of memory") from None
    except TemplateError as e:  # SecurityError (a reach for Python internals) is a TemplateError
        raise ModelFormatError(f"{where}: chat template failed: {type(e).__name__}: {e}") from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as e:
        raise ModelFormatError(f"{where}: chat template failed: {type(e).__name__}: {e}") from None


def _render(source: str, variables: dict[str, Any], globals_: dict[str, Callable],
            filters: dict[str, Callable]) -> str:
    if len(source) > MAX_SOURCE:
        raise TemplateLimit(f"the template is {len(source):,} characters (limit {MAX_SOURCE:,})")
    env = BoxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals.update(globals_)
    env.filters.update({name: _guarded(f, check_counts=True) for name, f in filters.items()})
    clock = _Clock(MAX_SECONDS)
    previous = sys.gettrace()
    sys.settrace(clock.tracer)
    try:
        tree = env.parse(source)
        for node_type, word in _REFUSED_NODES.items():
            if any(True for _ in tree.find_all(node_type)):
                raise TemplateLimit(f"`{word}` is not allowed (a chat template must be one self-contained file)")
        template = env.from_string(tree)
        out, size = [], 0
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > MAX_CHARS:
                raise TemplateLimit(f"the output passed {MAX_CHARS:,} characters")
            out.append(chunk)
        return "".join(out)
    finally:
        sys.settrace(previous)
