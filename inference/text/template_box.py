"""Chat templates rendered in a box: Jinja's immutable sandbox, every value sized before it is built, and the
render held to a time and a memory budget.

A chat template is code that came with a downloaded model. Jinja's sandbox keeps it away from Python internals;
this module also keeps it from hanging the engine or eating the machine's memory, in three layers:

1. Sized before built. Whatever can outgrow its arguments works its result's size out from them and refuses
   before building it: the operators `*` `**` `+` `%` `~`; `str.format` / `format_map` (each field once its
   nested `{}` are filled in, so a width given as the string '999999999' counts as the number would); the str
   methods `expandtabs` `replace` `translate` `join` `split` `rsplit` `splitlines`; the filters `indent` `join`
   `format` `replace` `wordwrap` `string` `tojson` `pprint` `sum`, and those that take their input item by item
   (`list`, `batch`, `map`…); `lipsum`; what a macro or block wrote, before it is joined; and printing a value
   (`{{ x }}`, `~`, `%s`): a list's text is measured from its items, not built. A number that sizes something
   (a width, a count, a range) is at most MAX_COUNT, an integer the template computes at most MAX_INT_BITS.
2. Checked when built. Whatever a filter, test, call, operator or literal makes, whatever a `namespace` is given
   and the arguments of a call (a macro sees them as a list) are a string of at most MAX_CHARS characters, or a
   container of at most MAX_COUNT items whose strings, counted every time they appear, come to at most MAX_CHARS.
   So no value is big enough to make a step that Python runs in C (a comparison, a sort, a repr) long or large:
   `[big] * 100000` is refused, not built and then compared.
3. A budget for the whole render: MAX_SECONDS of wall-clock time from the start (parsing and compiling count),
   and MAX_MEMORY bytes held beyond what was held when the template began to run (tracemalloc), checked on every
   call into Python code, on every line of the template and of the modules whose loops it can keep busy (Jinja's
   filters, textwrap, pprint), at every hook above and inside this module's own long loops. Layers 1-2 bound
   what one step can do between two checks, so this is the backstop against many small steps. Once spent the
   budget stays spent: Python drops a tracer that raises, so every hook raises again and puts the tracer back.
Jinja would run filters at compile time to fold constants, outside any budget; here every filter, test and the
printing hook take the context, which Jinja never folds, so compiling is bounded by the template's size alone
(MAX_SOURCE characters, MAX_NODES parsed parts). Recursion (macros calling themselves) ends in a RecursionError;
`include` / `extends` / `import` are refused by name (there are no other template files). Each refusal is a
`TemplateLimit` whose message names the limit; `render` turns it into a one-line `ModelFormatError` naming the
file. The box is in-process, not a process boundary: a step that Python runs in C can't be interrupted, which
is why layers 1-2 keep every such step small.
"""

from __future__ import annotations

import pprint
import re
import sys
import textwrap
import threading
import time
import tracemalloc
import types
from itertools import chain
from operator import length_hint
from typing import Any, Callable

import jinja2.filters
import jinja2.utils
from jinja2 import TemplateError, nodes
from jinja2.compiler import CodeGenerator
from jinja2.filters import make_attrgetter
from jinja2.runtime import Namespace
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import _PassArg, generate_lorem_ipsum, pass_context
from markupsafe import Markup

from inference.errors import ModelFormatError
from inference.messages import Message, say, what as what_of

MAX_SECONDS = 2.0  # a real template renders a long chat in milliseconds
MAX_MEMORY = 128 << 20  # bytes a render may hold beyond what it began with; a 4M-character chat needs a fraction
MAX_CHARS = 4_000_000  # output, and any string built on the way or held by a container built on the way
MAX_COUNT = 100_000  # items in a container built on the way; a number that sizes something (width, repeat, range)
MAX_INT_BITS = 1 << 16  # an integer the template computes (`*`, `**`): far past any count, still quick to multiply
MAX_SOURCE = 256_000  # the template text itself
MAX_NODES = 20_000  # its parsed parts (a real template has hundreds): compiling 20,000 takes about half a second
TEMPLATE_FILE = "<template>"


class TemplateLimit(TemplateError):
    """The template went past one of the box's limits (its argument a Message: str() gives the English)."""


def _over(what: str | Message, size: int, unit: str = "characters", limit: int = MAX_CHARS) -> TemplateLimit:
    """`what` (a filter's or method's name in backticks, or a Message) would build `size` characters or items."""
    units = {"characters": "template.characters", "items": "template.items", "item copies": "template.item_copies"}
    return TemplateLimit(say("template.would_build", what=what, size=size, unit=say(units[unit]), limit=limit))


# --- sizes ----------------------------------------------------------------------------------------------------
_SPECIALS = [chr(c) for c in range(32)] + ["\x7f", "\\", "'", '"', "<", ">", "&"]  # escaped by repr or JSON


def _quoted(text: str) -> int:
    """At most how long `text` is once quoted and escaped, by repr (`\\x00`, `\\U000e0001`) or by JSON (`\\u0000`,
    a surrogate pair), with room for a `Markup(...)` around it. A short one is taken to be all escapes rather
    than counted: a list of many short strings is measured quickly."""
    if not text.isascii():
        return 12 * len(text) + 10
    if len(text) <= 64:
        return 6 * len(text) + 10
    return len(text) + 10 + 5 * sum(map(text.count, _SPECIALS))


def _measure(value: Any, *, quoted: bool, top_quoted: bool, item: int, indent: int = 0,
             limit: int = MAX_CHARS) -> int:
    """A size of `value` added up without building anything: each string's length, or its `_quoted` length
    (`quoted` inside a container, `top_quoted` at the top); `item + depth × indent` for each container and each
    item in one (brackets, a separator, JSON's indentation); a few characters for anything else. Depth first over
    a stack of iterators, so a deep nest can't overflow Python's stack and a leaf allocates nothing; stops once
    past `limit`, so a value far too big costs no more to measure than one at the limit; checks the budget every
    4096 steps (this module's frames go untraced)."""
    if type(value) is str and not top_quoted:
        return len(value) or 1
    total, steps, stack = 0, 0, [(iter((value,)), 0)]
    while stack and total <= limit:
        nodes, depth = stack[-1]
        own = item + depth * indent if depth else 0  # what each of these pays as an item of its container
        for node in nodes:
            steps += 1
            if not steps & 4095:
                _Budget.running.check()
            total += own
            if isinstance(node, str):
                total += _quoted(node) if (quoted if depth else top_quoted) else len(node) or 1
            elif isinstance(node, int):
                total += node.bit_length() // 3 + 5  # decimal digits ≤ bits × 0.302, or 'False'
            elif isinstance(node, float):
                total += 24  # '-1.7976931348623157e+308'
            elif isinstance(node, (list, tuple, dict, *_SETS_AND_VIEWS)):
                total += item + depth * indent + (0 if type(node) in (list, tuple, dict) else 32)  # 'frozenset(…)'
                stack.append((chain.from_iterable(node.items()) if isinstance(node, dict) else iter(node), depth + 1))
                break
            elif isinstance(node, Namespace):  # printed as <Namespace {…}>
                total += 16
                stack.append((iter((node._Namespace__attrs,)), depth))
                break
            else:  # None, Undefined, a macro, a loop, a function: a fixed size, or printed with what it's bound to
                total += 100
                bound_to = getattr(node, "__self__", None)
                if bound_to is not None and not isinstance(bound_to, types.ModuleType):
                    stack.append((iter((bound_to,)), depth))
                    break
            if total > limit:
                break
        else:
            stack.pop()
    return total


_SETS_AND_VIEWS = (set, frozenset, type({}.keys()), type({}.values()), type({}.items()))


def _content(value: Any) -> int:
    """What comparing, sorting or copying `value` can cost: its strings' characters and one per other item, every
    appearance counted."""
    return _measure(value, quoted=False, top_quoted=False, item=1)


def _text(value: Any) -> int:
    """At most how long `str(value)` is."""
    return _measure(value, quoted=True, top_quoted=False, item=2)


def _repr(value: Any) -> int:
    """At most how long `repr(value)` is."""
    return _measure(value, quoted=True, top_quoted=True, item=2)


def _json(value: Any, indent: int | str | None) -> int:
    """At most how long `json.dumps(value, indent=indent)` is (Jinja's `tojson` or the caller's)."""
    step = max(indent if isinstance(indent, int) else len(indent), 0) if indent is not None else 0
    return _measure(value, quoted=True, top_quoted=True, item=3, indent=step)


def _int_bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise TemplateLimit(say("template.integer", bits=bits, limit=MAX_INT_BITS))


def _checked(value: Any) -> Any:
    """A value the template built, refused past MAX_CHARS / MAX_COUNT; a generator (`map`, `batch`…) checked item
    by item as it is consumed."""
    if isinstance(value, (str, bytes)):
        if len(value) > MAX_CHARS:
            raise TemplateLimit(say("template.built_string", size=len(value), limit=MAX_CHARS))
    elif isinstance(value, (list, tuple, dict, set, frozenset)):
        if len(value) > MAX_COUNT:
            raise TemplateLimit(say("template.built_items", size=len(value), limit=MAX_COUNT))
        held = _content(value)
        if held > MAX_CHARS:
            raise TemplateLimit(say("template.built_holding", size=held, limit=MAX_CHARS))
    elif isinstance(value, types.GeneratorType):
        return map(_checked, value)
    return value


def _counts_ok(args, kwargs) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_COUNT:
            raise TemplateLimit(say("template.size_argument", value=value, limit=MAX_COUNT))


def _items_ok(what: str, value: Any) -> None:
    count = len(value) if hasattr(value, "__len__") else length_hint(value, 0)
    if count > MAX_COUNT:
        raise _over(what, count, "items", MAX_COUNT)


def _sized_stream(items, separator: int, what: str):
    """The items a join consumes, each measured before it is turned into text: refused once the joined text
    passes MAX_CHARS or the items MAX_COUNT, before the join allocates anything."""
    total = count = 0
    for count, item in enumerate(items, 1):
        total += _text(item) + separator
        if total > MAX_CHARS + separator:
            raise _over(what, total)
        if count > MAX_COUNT:
            raise _over(what, count, "items", MAX_COUNT)
        yield item


# --- formats: `%` and str.format -------------------------------------------------------------------------------
_PRINTF = re.compile(r"%(?:\(([^()]*)\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.)", re.S)
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[_,]?(?:\.(\d+))?([a-zA-Z%]?)", re.S)


def _spec_number(value: Any, kind: str) -> int:
    """A width or precision, as digits in a format or as an argument (`%*s`): at most MAX_COUNT."""
    if isinstance(value, str):
        if len(value) > 6:
            raise TemplateLimit(say("template.format_digits", kind=kind, digits=len(value), limit=MAX_COUNT))
        value = int(value or 0)
    if isinstance(value, int) and abs(value) > MAX_COUNT:
        raise TemplateLimit(say("template.format_number", kind=kind, value=value, limit=MAX_COUNT))
    return abs(value) if isinstance(value, int) else 0


def _field_size(value: Any, kind: str, precision: int | None) -> int:
    """At most how long one formatted field is, before padding to its width: `kind` is the conversion of `%`
    (s, r, d, f…) or the type of a format spec ('' when it has none)."""
    if isinstance(value, (int, float, complex)) and not (kind in ("r", "a") or isinstance(value, bool) and kind == "s"):
        if kind and kind in "eEfFgG%":  # 1e308 written out in full, with grouping commas, then the decimals
            size = 450 + (6 if precision is None else precision)
        else:  # binary is the longest base, grouping adds a quarter; a float's repr or its significant digits
            size = (value.bit_length() if isinstance(value, int) else 64) * 5 // 4 + 8 + (precision or 0)
        return 2 * size if isinstance(value, complex) else size
    if isinstance(value, str) and kind in ("", "s"):
        size = len(value)
    else:
        size = _repr(value) if kind in ("r", "a") else _text(value)
    return size if precision is None else min(size, precision)


def _printf_size(fmt: str, args: Any) -> int:
    """At most how long `fmt % args` is; a format Python would refuse is left to Python to refuse."""
    positional = args if isinstance(args, tuple) else (args,)
    mapping = args if hasattr(type(args), "__getitem__") and not isinstance(args, (tuple, str)) else None
    total, used, position, steps = len(fmt), 0, 0, 0
    while (position := fmt.find("%", position)) >= 0:
        steps += 1
        if not steps & 4095:  # a format of 2,000,000 `%%`
            _Budget.running.check()
        match = _PRINTF.match(fmt, position)
        if match is None:
            if fmt.startswith("%(", position):
                raise TemplateLimit(say("template.percent_key"))
            return total  # Python refuses an incomplete format
        position = match.end()
        key, width, precision, kind = match.groups()
        if kind == "%":
            continue
        numbers = []
        for number, name in ((width, "width"), (precision, "precision")):
            if number == "*":
                if used >= len(positional):
                    return total
                number, used = positional[used], used + 1
            numbers.append(None if number is None else _spec_number(number, name))
        if key is not None:
            try:
                value = mapping[key]
            except (LookupError, TypeError):
                return total  # so does Python
        elif used < len(positional):
            value, used = positional[used], used + 1
        else:
            return total
        total += max(numbers[0] or 0, _field_size(value, kind, numbers[1]))
        if total > MAX_CHARS:
            raise _over("`%` formatting", total)
    return total


class _SizedFormat:
    """str.format's fields measured as they are filled in, nested widths already substituted into the spec."""

    def vformat(self, format_string, args, kwargs):
        self.built = len(format_string)
        return super().vformat(format_string, args, kwargs)

    def convert_field(self, value, conversion):
        if conversion is not None:
            self._add(_field_size(value, conversion, None))
        return super().convert_field(value, conversion)

    def format_field(self, value, format_spec):
        spec = _FORMAT_SPEC.fullmatch(format_spec)
        if spec is None:
            raise TemplateLimit(say("template.format_spec", spec=repr(format_spec[:40])))
        width, precision, kind = spec.groups()
        width = _spec_number(width, "width") if width else None
        precision = _spec_number(precision, "precision") if precision else None
        self._add(max(width or 0, _field_size(value, kind, precision)))
        return super().format_field(value, format_spec)

    def _add(self, size: int) -> None:
        self.built += size
        if self.built > MAX_CHARS:
            raise _over("`format`", self.built)


class _SizedFormatter(_SizedFormat, SandboxedFormatter):
    pass


class _SizedEscapeFormatter(_SizedFormat, SandboxedEscapeFormatter):
    pass


# --- what str methods and filters build ------------------------------------------------------------------------
_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
               "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")  # where str.split() splits: str.isspace
_LINE_BREAKS = "\n\x0b\x0c\r\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines splits


def _pieces(text: str, separators: str) -> int:
    """At most how many pieces `text` splits into at any of these separator characters."""
    return sum(map(text.count, separators)) + 1


def _split(s, sep=None, maxsplit=-1):
    count = s.count(sep) + 1 if isinstance(sep, str) and sep else _pieces(s, _WHITESPACE)
    if isinstance(maxsplit, int) and maxsplit >= 0:
        count = min(count, maxsplit + 1)
    if count > MAX_COUNT:
        raise _over("`split`", count, "items", MAX_COUNT)


def _splitlines(s, keepends=False):
    count = _pieces(s, _LINE_BREAKS)
    if count > MAX_COUNT:
        raise _over("`splitlines`", count, "items", MAX_COUNT)


def _replaced(what: str, s: str, old: str, new: str, count: int) -> None:
    times = s.count(old) if old else len(s) + 1
    if count >= 0:
        times = min(times, count)
    size = len(s) + times * (len(new) - len(old))
    if size > MAX_CHARS:
        raise _over(what, size)


def _str_replace(s, old, new, count=-1):
    if isinstance(old, str) and isinstance(new, str) and isinstance(count, int):
        _replaced("`replace`", s, old, new, count)


def _expandtabs(s, tabsize=8):
    size = len(s) + s.count("\t") * max(tabsize, 0)
    if size > MAX_CHARS:
        raise _over("`expandtabs`", size)


def _translate(s, table):
    values = table.values() if isinstance(table, dict) else table if isinstance(table, (list, tuple)) else ()
    longest = max((len(v) for v in values if isinstance(v, str)), default=1)
    if len(s) * longest > MAX_CHARS:
        raise _over("`translate`", len(s) * longest)


def _str_join(s, iterable):
    return (_sized_stream(iterable, len(s), "`join`"),)


# A str method's sizer takes the method's arguments; it raises, or returns arguments to call it with instead.
_STR_SIZERS: dict[str, Callable] = {"split": _split, "rsplit": _split, "splitlines": _splitlines,
                                    "replace": _str_replace, "expandtabs": _expandtabs, "translate": _translate,
                                    "join": _str_join}


def _text_ok(what: str, value: Any) -> None:
    size = _text(value)
    if size > MAX_CHARS:
        raise _over(what, size)


def _filter_join(env, value, d="", attribute=None):
    if attribute is not None:
        value = map(make_attrgetter(env, attribute), value)
    _text_ok("`join`", d)
    return _sized_stream(value, len(str(d)), "`join`"), (d,), {}


def _filter_sum(env, iterable, attribute=None, start=0):
    """`sum` copies its running total once per item when the items are lists: items × total items is bounded."""
    if attribute is not None:
        iterable = map(make_attrgetter(env, attribute), iterable)
    values = list(iterable)
    if not all(isinstance(v, (int, float)) for v in (start, *values)):
        lengths = [len(v) for v in (start, *values) if hasattr(v, "__len__")]
        copies = len(values) * sum(lengths)
        if copies > MAX_CHARS:
            raise _over(say("template.sum"), copies, "item copies")
    return values, (), {"start": start}


def _filter_indent(env, s, width=4, first=False, blank=False):
    if isinstance(s, str) and isinstance(width, (int, str)):
        step = len(width) if isinstance(width, str) else width
        size = len(s) + 1 + _pieces(s, _LINE_BREAKS) * (step + 1)
        if size > MAX_CHARS:
            raise _over("`indent`", size)


def _filter_wordwrap(env, s, width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True):
    if isinstance(s, str):  # a break at most after every character, and at every line already there
        wrap = len(env.newline_sequence if wrapstring is None else str(wrapstring))
        size = len(s) + (len(s) + 1) * wrap
        if size > MAX_CHARS:
            raise _over("`wordwrap`", size)


def _filter_replace(env, s, old, new, count=None):
    for part in (s, old, new):
        _text_ok("`replace`", part)
    _replaced("`replace`", str(s), str(old), str(new), -1 if count is None else count)


def _filter_format(env, value, *args, **kwargs):
    _text_ok("`format`", value)
    _printf_size(str(value), kwargs or args)


def _filter_pprint(env, value):
    """pprint lines a value up under the key it belongs to: a line per item, indented by up to the whole repr."""
    width = _repr(value)
    if width * (width + 5) > MAX_CHARS:
        raise _over("`pprint`", width * (width + 5))


def _filter_tojson(env, value, indent=None):
    size = _json(value, indent)
    if size > MAX_CHARS:
        raise _over("`tojson`", size)


# A filter's sizer takes the environment and the filter's own arguments; it raises, or returns (value, args,
# kwargs) to call the filter with instead. Keyed by name, so a caller's own `tojson` is sized as Jinja's is.
_FILTER_SIZERS: dict[str, Callable] = {
    "join": _filter_join, "sum": _filter_sum, "indent": _filter_indent, "wordwrap": _filter_wordwrap,
    "replace": _filter_replace, "format": _filter_format, "tojson": _filter_tojson, "pprint": _filter_pprint,
    "string": lambda env, value: _text_ok("`string`", value)}
# Filters that take their input item by item (a string character by character): at most MAX_COUNT items.
_ITEMWISE = {"list", "slice", "batch", "unique", "sort", "join", "map", "select", "reject", "selectattr",
             "rejectattr", "groupby", "sum", "dictsort", "items"}


# --- the environment -------------------------------------------------------------------------------------------
# Where a loop can run long without calling into Python code, so lines are checked: the template itself, and the
# modules of the filters it uses (Jinja's, textwrap for `wordwrap`, pprint for `pprint`).
_LINE_TRACED = frozenset({TEMPLATE_FILE, textwrap.__file__, pprint.__file__, jinja2.filters.__file__,
                          jinja2.utils.__file__})


class _Budget:
    """The render's deadline and memory allowance, checked by a tracer (every call into Python code but this
    module's, every line in _LINE_TRACED) and by this module's own long loops. Once spent it stays spent: Python
    drops a tracer that raises, and code between the template and the box may catch what it raised, so every hook
    of the box raises again and puts the tracer back."""

    running: "_Budget"  # the render in progress (renders take turns, _ONE_AT_A_TIME), for this module's loops

    def __init__(self):
        self.deadline = time.monotonic() + MAX_SECONDS
        self.spent: Message | None = None
        self.owns_tracemalloc, self.base = False, 0
        self.hook, self.line_hook = self._call, self._line  # bound once: sys.gettrace() is compared by identity
        _Budget.running = self

    def start(self) -> None:
        """The template is compiled: from here on its allocations count and every line it runs is checked."""
        self.owns_tracemalloc = not tracemalloc.is_tracing()
        if self.owns_tracemalloc:
            tracemalloc.start()
        self.base = tracemalloc.get_traced_memory()[0]
        self.check()
        sys.settrace(self.hook)

    def check(self) -> None:
        if self.spent is None:
            if time.monotonic() > self.deadline:
                self.spent = say("template.too_slow", seconds=MAX_SECONDS)
            elif tracemalloc.get_traced_memory()[0] - self.base > MAX_MEMORY:
                self.spent = say("template.too_much_memory", mb=MAX_MEMORY >> 20)
        if self.spent is not None:
            raise TemplateLimit(self.spent)

    def _call(self, frame, event, arg):
        """Every call is checked; lines only in the template and in the library code it can keep busy."""
        file = frame.f_code.co_filename
        if file == __file__:
            return None
        self.check()
        return self.line_hook if file in _LINE_TRACED else None

    def _line(self, frame, event, arg):
        if event == "line":
            self.check()
        return self.line_hook

    def rearm(self) -> None:
        """At every hook: the tracer does the checking while it is there."""
        if self.spent is not None:
            raise TemplateLimit(self.spent)
        if sys.gettrace() is not self.hook:
            sys.settrace(self.hook)
            self.check()

    def close(self) -> None:
        if self.owns_tracemalloc:
            tracemalloc.stop()


class _CheckedNamespace(Namespace):
    """`namespace()`: what a loop may carry from one turn to the next (`{% set ns.s = ns.s ~ ns.s %}`), its
    values checked as they are set."""

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, _checked(value))


class _CheckedCodeGenerator(CodeGenerator):
    """`~` joins through `environment.checked_join`, and list, tuple and dict literals go through
    `environment.checked` (`[a, a, a, …]` can hold a big string as often as the source repeats it)."""

    def visit_Concat(self, node: nodes.Concat, frame) -> None:
        self.write("environment.checked_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def _checked_literal(self, visit, node, frame) -> None:
        self.write("environment.checked(")
        visit(node, frame)
        self.write(")")

    def visit_List(self, node: nodes.List, frame) -> None:
        self._checked_literal(super().visit_List, node, frame)

    def visit_Dict(self, node: nodes.Dict, frame) -> None:
        self._checked_literal(super().visit_Dict, node, frame)

    def visit_Tuple(self, node: nodes.Tuple, frame) -> None:
        if node.ctx == "load":  # not an assignment target (`{% set a, b = … %}`)
            self._checked_literal(super().visit_Tuple, node, frame)
        else:
            super().visit_Tuple(node, frame)


class BoxedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every filter, call, operator, literal and printed value sized or checked."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _CheckedCodeGenerator

    def __init__(self, budget: _Budget, **kwargs):
        super().__init__(finalize=self._printed, **kwargs)
        self.budget = budget
        self.globals.update(namespace=_CheckedNamespace, lipsum=self._lipsum)  # `range`: the sandbox's, ≤ 100,000
        self.filters = {name: self.guarded_filter(name, f) for name, f in self.filters.items()}
        self.tests = {name: self._guarded_test(f) for name, f in self.tests.items()}

    def guarded_filter(self, name: str, function: Callable) -> Callable:
        """The filter with its size arguments at most MAX_COUNT (not the value filtered: `1e9|string` is fine),
        its result sized first where it can outgrow them, and checked once built. It takes the context, so Jinja
        never runs it at compile time to fold constants, where no budget could stop it."""
        passed, budget = _PASSED[_PassArg.from_obj(function)], self.budget
        sizer, itemwise = _FILTER_SIZERS.get(name), name in _ITEMWISE

        @pass_context
        def guarded(context, value, *args, **kwargs):
            budget.rearm()
            _counts_ok(args, kwargs)
            if itemwise:
                _items_ok(f"`{name}`", value)
            if sizer is not None:
                value, args, kwargs = sizer(self, value, *args, **kwargs) or (value, args, kwargs)
            return _checked(function(*passed(context), value, *args, **kwargs))

        return guarded

    def _guarded_test(self, function: Callable) -> Callable:
        passed = _PASSED[_PassArg.from_obj(function)]

        @pass_context
        def guarded(context, *args, **kwargs):
            self.budget.rearm()
            return _checked(function(*passed(context), *args, **kwargs))

        return guarded

    @staticmethod
    def concat(pieces) -> str:
        """Jinja's `concat`, which joins what a macro, a `{% set %}` or `{% filter %}` block or a `{% block %}`
        wrote: measured first, as its pieces can be one big string written many times over (cheap to write, not
        to join)."""
        pieces = pieces if isinstance(pieces, list) else list(pieces)
        size = sum(map(len, pieces))
        if size > MAX_CHARS:
            raise _over(say("template.macro_output"), size)
        return "".join(pieces)

    def checked(self, value: Any) -> Any:
        self.budget.rearm()
        return _checked(value)

    def checked_join(self, parts) -> str:
        """The `~` operator: every part measured before any is turned into text."""
        self.budget.rearm()
        total = sum(map(_text, parts))
        if total > MAX_CHARS:
            raise TemplateLimit(say("template.join", size=total, limit=MAX_CHARS))
        return "".join(map(str, parts))

    @pass_context  # so that Jinja never prints a constant at compile time either
    def _printed(self, context, value: Any) -> Any:
        """`{{ value }}`: measured before Jinja turns it into text."""
        self.budget.rearm()
        size = _text(value)
        if size > MAX_CHARS:
            raise TemplateLimit(say("template.printing", size=size, limit=MAX_CHARS))
        return value

    def _lipsum(self, n=5, html=True, min=20, max=100):
        size = n * (15 * max + 10) if all(isinstance(x, int) for x in (n, max)) else 0  # 12-letter words, ",."
        if size > MAX_CHARS:
            raise _over("`lipsum`", size)
        return generate_lorem_ipsum(n, html, min, max)

    def call_binop(self, context, operator: str, left, right):
        self.budget.rearm()
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
            raise TemplateLimit(say("template.exponent", value=right))
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            _int_bits(left.bit_length() * right)
        if operator == "*":
            self._repeat_ok(left, right)
        if operator == "+" and isinstance(left, str) and isinstance(right, str) and len(left) + len(right) > MAX_CHARS:
            raise _over("`+`", len(left) + len(right))
        if operator == "%" and isinstance(left, str):
            _printf_size(left, right)
        return _checked(super().call_binop(context, operator, left, right))

    @staticmethod
    def _repeat_ok(left, right) -> None:
        if isinstance(left, int) and isinstance(right, int):
            _int_bits(left.bit_length() + right.bit_length())
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                limit = MAX_CHARS if isinstance(seq, str) else MAX_COUNT
                if len(seq) * n > limit:
                    raise TemplateLimit(say("template.repeating", size=len(seq), times=n, limit=limit))
                held = 0 if isinstance(seq, str) else _content(seq)
                if held * n > MAX_CHARS:
                    raise TemplateLimit(say("template.repeating_holding", size=held, times=n,
                                            limit=MAX_CHARS))

    def call(__self, __context, __obj, *args, **kwargs):
        __self.budget.rearm()
        own = {key: value for key, value in kwargs.items() if key not in ("_loop_vars", "_block_vars")}  # Jinja's
        _counts_ok(args, own)
        if len(args) + len(own) > 1:  # a macro sees them as one list (varargs): `m(a, a, a, …)` with a big `a`
            _checked((*args, *own.values()))
        owner, name = getattr(__obj, "__self__", None), getattr(__obj, "__name__", None)
        if isinstance(owner, str) and name in _STR_SIZERS:
            args = _STR_SIZERS[name](owner, *args, **own) or args
        return _checked(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value):
        """`'…'.format(…)` and `format_map`: Jinja's sandboxed formatter, with every field sized as it is filled."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or value.__name__ not in (
                "format", "format_map") or not isinstance(value.__self__, str):
            return None
        text, is_map = value.__self__, value.__name__ == "format_map"
        formatter = (_SizedEscapeFormatter(self, escape=text.escape) if isinstance(text, Markup)
                     else _SizedFormatter(self))

        def wrapper(*args, **kwargs):
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument and no keyword arguments")
                args, kwargs = (), args[0]
            return type(text)(formatter.vformat(text, args, kwargs))

        return wrapper


# What a filter or test asks Jinja to pass it, from the context the box's wrapper is given.
_PASSED = {None: lambda context: (), _PassArg.context: lambda context: (context,),
           _PassArg.eval_context: lambda context: (context.eval_ctx,),
           _PassArg.environment: lambda context: (context.environment,)}
_REFUSED_NODES = {nodes.Include: "include", nodes.Extends: "extends", nodes.Import: "import",
                  nodes.FromImport: "import"}
_ONE_AT_A_TIME = threading.Lock()  # the budget starts and stops tracemalloc, which is process-wide


def render(source: str, variables: dict[str, Any], where: str, globals_: dict[str, Callable] | None = None,
           filters: dict[str, Callable] | None = None) -> str:
    """The template rendered with `variables` (and extra globals / filters), or a one-line ModelFormatError
    naming `where` and the limit."""
    try:
        with _ONE_AT_A_TIME:
            return _render(source, variables, globals_ or {}, filters or {})
    except TemplateLimit as e:
        raise ModelFormatError(say("template.refused", where=where, problem=what_of(e))) from None
    except RecursionError:
        raise ModelFormatError(say("template.refused", where=where, problem=say("template.recursed"))) from None
    except MemoryError:
        raise ModelFormatError(say("template.refused", where=where, problem=say("template.out_of_memory"))) from None
    except TemplateError as e:  # SecurityError (a reach for Python internals) is a TemplateError
        # Jinja's own sentence (a syntax error, an unsafe attribute) stays as Jinja wrote it, in English
        raise ModelFormatError(say("template.failed", where=where, error=type(e).__name__, why=str(e))) from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as e:
        raise ModelFormatError(say("template.failed", where=where, error=type(e).__name__, why=str(e))) from None


def _render(source: str, variables: dict[str, Any], globals_: dict[str, Callable],
            filters: dict[str, Callable]) -> str:
    if len(source) > MAX_SOURCE:
        raise TemplateLimit(say("template.too_long", size=len(source), limit=MAX_SOURCE))
    budget = _Budget()  # the clock starts now: parsing and compiling count
    previous = sys.gettrace()
    try:
        env = BoxedEnvironment(budget, trim_blocks=True, lstrip_blocks=True,
                               extensions=["jinja2.ext.loopcontrols"])
        env.globals.update(globals_)
        env.filters.update({name: env.guarded_filter(name, f) for name, f in filters.items()})
        tree = env.parse(source)
        parts = 0
        for parts, node in enumerate(tree.find_all(nodes.Node), 1):
            if type(node) in _REFUSED_NODES:
                word = _REFUSED_NODES[type(node)]
                raise TemplateLimit(say("template.not_allowed", word=word))
        if parts > MAX_NODES:
            raise TemplateLimit(say("template.too_many_parts", parts=parts, limit=MAX_NODES))
        template = env.from_string(tree)  # untraced: no filter runs at compile time, and the parts are bounded
        budget.start()
        out, size = [], 0
        for chunk in template.generate(**variables):
            budget.rearm()  # output written as it stands in the template runs no hook of its own
            size += len(chunk)
            if size > MAX_CHARS:
                raise TemplateLimit(say("template.output", limit=MAX_CHARS))
            out.append(chunk)
        return "".join(out)
    finally:
        sys.settrace(previous)
        budget.close()
