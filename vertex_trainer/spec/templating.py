"""A spec's templates rendered under bounds (docs/spec-and-hardware.md "Templates and their bounds").

jinja2's ImmutableSandboxedEnvironment (no Python internals, lists and dicts never modified,
`range()` at most 100,000 long), plus bounds of our own; past one, rendering stops with
TemplateBound (load.py makes it an exit 2 naming the field):

- MAX_CHARS: no value a template makes is longer (in characters; a list or a range: in items
  too), neither its output nor anything on the way ('x' * n, a ~ b, a + b, a filter's or a
  method's result, a list printed). Where the
  size follows from the operands (`*`, `**`, `+`, `%`, `~`, str.format, join, replace, center and
  the other widths, indent, wordwrap, batch, slice, tojson, printing a container) it is checked
  before the value is made; any other result is checked as it comes back.
- MAX_STEPS per template: loop iterations (every `{% for %}`) and calls (filters, methods,
  macros, `~`). Recursive loops are refused.
- MAX_SECONDS: all of a spec's rendering, checked at each step (the step bound ends loops first).
- MAX_TOTAL: the output of all of a spec's templates together.

What a spec's templates need ({{ env.X }}, {{ git_sha }}, {{ timestamp }}, {{ name }},
{{ trigger.* }}, --var values, filters such as default and lower) takes a few steps and is far
inside every bound.
"""

from __future__ import annotations

import functools
import re
import string
import time
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment

MAX_CHARS = 65_536  # as load.MAX_TEXT: one value of a spec
MAX_STEPS = 10_000
MAX_SECONDS = 2.0
MAX_TOTAL = 1 << 20  # as load.MAX_FILE_BYTES: the whole spec
LIMITS = (
    f"a value at most {MAX_CHARS:,} characters, {MAX_STEPS:,} loop iterations and calls per "
    f"template, {MAX_TOTAL:,} characters and {MAX_SECONDS:g} s for all"
)
_INF = MAX_TOTAL * 1024  # an estimate that is certainly over every bound
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")


class TemplateBound(Exception):
    """A template went past one of the bounds; the message says which."""


def size(value: Any, limit: int = MAX_CHARS) -> int:
    """About how many characters `value` takes as text (a container: its items and theirs),
    counted until it is over `limit`."""
    from jinja2.utils import Namespace

    total, stack, seen = 0, [value], set()
    while stack and total <= limit:
        v = stack.pop()
        if isinstance(v, str | bytes | bytearray):
            total += len(v)
        elif isinstance(v, bool) or v is None:
            total += 5
        elif isinstance(v, int):
            total += v.bit_length() * 3 // 10 + 2  # its decimal digits
        elif isinstance(v, float | complex):
            total += 24
        elif isinstance(v, range):
            total += 16 + len(v)
        elif isinstance(v, list | tuple | set | frozenset | dict | Namespace):
            if id(v) in seen:
                total += 8
                continue
            seen.add(id(v))
            items = object.__getattribute__(v, "_Namespace__attrs") if isinstance(v, Namespace) else v
            total += 2 + 2 * len(items)
            if total <= limit:
                stack.extend(items)
                if isinstance(items, dict):
                    stack.extend(items.values())
        else:  # an object whose text is a short name (a macro, a loop, a lazy value)
            total += 16
    return total


def _width(value: Any) -> int:
    """A width or count argument, as the estimate of what it makes."""
    return abs(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _listed(value: Any) -> Any:
    return value if isinstance(value, str | bytes | list | tuple | dict | range) else list(value)


def percent_size(fmt: str | bytes, args: Any) -> int:
    """What `fmt % args` makes, at most: each field as wide as its widest width or argument."""
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else fmt
    values = (
        list(args.values())
        if isinstance(args, Mapping)
        else list(args)
        if isinstance(args, tuple)
        else [args]
    )
    widest = max((size(v) for v in values), default=0)
    stars = max((_width(v) for v in values), default=0)
    total = len(text)
    for field in _PERCENT.finditer(text):
        for width in field.groups():
            total += (
                stars if width == "*" else (int(width) if width and len(width) < 9 else _INF * bool(width))
            )
        total += widest
    return total


def format_size(fmt: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """What `fmt.format(*args, **kwargs)` makes, at most; a field's spec may not nest a field."""
    widest = max((size(v) for v in (*args, *kwargs.values())), default=0)
    total = len(fmt)
    for _, field, spec, _ in string.Formatter().parse(fmt):
        if field is None:
            continue
        if spec and "{" in spec:
            raise TemplateBound("a format field's width or precision cannot be another field here")
        total += widest + sum(int(n) if len(n) < 9 else _INF for n in re.findall(r"\d+", spec or ""))
    return total


def _join_size(value: Any, d: str = "", attribute: Any = None) -> int:
    return size(value) + len(str(d)) * len(value)


def _replace_size(s: Any, old: Any, new: Any, count: Any = None) -> int:
    s, old, new = str(s), str(old), str(new)
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * max(0, len(new) - len(old))


def _wordwrap_size(
    s: Any, width: Any = 79, break_long_words: Any = True, wrapstring: Any = None, *_: Any
) -> int:
    text = str(s)
    lines = len(text) // max(1, _width(width)) + text.count(" ") + text.count("\n") + 1
    return len(text) + lines * len(str(wrapstring or "\n"))


def _indent_size(s: Any, width: Any = 4, *_: Any, **__: Any) -> int:
    text = str(s)
    prefix = _width(width) if isinstance(width, int) else len(str(width))
    return len(text) + (text.count("\n") + 1) * prefix


# What a filter makes, at most, from its arguments (jinja2.filters' signatures), checked before it
# runs; any other filter's result is checked after.
FILTERS: dict[str, Callable[..., int]] = {
    "center": lambda value, width=80: max(size(value), _width(width)),
    "indent": _indent_size,
    "wordwrap": _wordwrap_size,
    "format": lambda value, *args, **kwargs: percent_size(str(value), kwargs or tuple(args)),
    "replace": _replace_size,
    "join": _join_size,
    "batch": lambda value, linecount, fill_with=None: size(value) + _width(linecount) * (size(fill_with) + 2),
    "slice": lambda value, slices, fill_with=None: size(value) + _width(slices) * (size(fill_with) + 4),
    "tojson": lambda value, indent=None: size(value) * (2 + _width(indent)),
    "string": lambda value: size(value),
    "pprint": lambda value: size(value) * 2,
    "xmlattr": lambda d, autospace=True: size(d) * 2,
    "urlencode": lambda value: size(value) * 3,
    "sum": lambda iterable, attribute=None, start=0: size(iterable) + size(start),
}
_MATERIALIZED = ("join", "sum")  # filters whose iterable is made a list first, to be measured

# What a method of str or bytes makes, at most, from its receiver and arguments.
METHODS: dict[str, Callable[..., int]] = {
    "center": lambda s, width, *_: max(len(s), _width(width)),
    "ljust": lambda s, width, *_: max(len(s), _width(width)),
    "rjust": lambda s, width, *_: max(len(s), _width(width)),
    "zfill": lambda s, width: max(len(s), _width(width)),
    "expandtabs": lambda s, tabsize=8: (
        len(s) + s.count("\t" if isinstance(s, str) else b"\t") * _width(tabsize)
    ),
    "replace": lambda s, old, new, count=-1: (
        _replace_size(s, old, new, count) if isinstance(s, str) else len(s) * (len(new) + 1)
    ),
    "join": lambda s, iterable: size(iterable) + len(s) * len(iterable),
    "translate": lambda s, table, *_: (
        len(s) * (max((size(v) for v in table.values()), default=1) if isinstance(table, dict) else 1)
    ),
    "encode": lambda s, *_, **__: 4 * len(s),
}


class Budget:
    """The bounds' counters for one spec: steps of the current template, time, total output."""

    def __init__(self) -> None:
        self.steps = 0
        self.spent = 0.0
        self.started: float | None = None
        self.total = 0

    def begin(self) -> None:
        self.steps = 0
        self.started = time.monotonic()

    def end(self) -> None:
        if self.started is not None:
            self.spent += time.monotonic() - self.started
            self.started = None

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateBound(f"it takes more than {MAX_STEPS:,} steps (loop iterations and calls)")
        if self.started is not None and self.spent + time.monotonic() - self.started > MAX_SECONDS:
            raise TemplateBound(f"the spec's templates take more than {MAX_SECONDS:g} s to render")

    def fits(self, estimate: int, what: str) -> None:
        if estimate > MAX_CHARS:
            raise TemplateBound(f"{what} would make more than {MAX_CHARS:,} characters")

    def output(self, chars: int) -> None:
        self.total += chars
        if self.total > MAX_TOTAL:
            raise TemplateBound(f"the spec's templates make more than {MAX_TOTAL:,} characters in all")


def environment() -> Environment:
    """The sandbox a spec's templates render in, with a fresh Budget (`env.budget`)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    budget = Budget()

    def finalize(value: Any) -> Any:  # each {{ ... }}, before it becomes text
        budget.fits(size(value), "a value printed")
        return value

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def __init__(self) -> None:
            super().__init__(
                undefined=jinja2.StrictUndefined,
                autoescape=False,
                keep_trailing_newline=False,
                finalize=finalize,
            )
            self.budget = budget
            self.globals.pop("lipsum", None)  # lorem ipsum of any length: never a spec's
            self.filters = {name: _bounded_filter(budget, name, f) for name, f in self.filters.items()}

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            budget.fits(_binop_size(operator, left, right), f"{operator!r}")
            return super().call_binop(context, operator, left, right)

        def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
            budget.step()
            receiver = getattr(obj, "__self__", None)
            if isinstance(obj, types.BuiltinMethodType | types.MethodType) and isinstance(
                receiver, str | bytes
            ):
                estimate = METHODS.get(obj.__name__)
                if obj.__name__ == "join" and args:
                    args = (_listed(args[0]), *args[1:])
                if estimate is not None:
                    budget.fits(estimate(receiver, *args, **kwargs), f"{obj.__name__}()")
            elif isinstance(receiver, int) and getattr(obj, "__name__", "") == "to_bytes":
                budget.fits(_width(args[0] if args else kwargs.get("length", 1)), "to_bytes()")
            result = super().call(context, obj, *args, **kwargs)
            name = getattr(obj, "__name__", "a function").replace("safe_range", "range")
            budget.fits(size(result), f"{name}()")
            return result

        def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
            wrapped = super().wrap_str_format(value)
            if wrapped is None:
                return None
            fmt, is_map = value.__self__, value.__name__ == "format_map"

            def bounded(*args: Any, **kwargs: Any) -> str:
                named = args[0] if is_map and args and isinstance(args[0], Mapping) else kwargs
                budget.fits(format_size(fmt, () if is_map else args, named), "format()")
                return wrapped(*args, **kwargs)

            return bounded

        def bounded_concat(self, *values: Any) -> str:
            """`a ~ b ~ ...`, measured before it is joined."""
            budget.fits(sum(size(v) for v in values), "'~'")
            return "".join(str(v) for v in values)

        def bounded_iter(self, iterable: Any) -> Any:
            """A `{% for %}`'s items, one step each."""
            for item in iterable:
                budget.step()
                yield item

    return Bounded()


def _bounded_filter(budget: Budget, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    passes = getattr(func, "jinja_pass_arg", None) is not None  # its first argument: a context
    estimate = FILTERS.get(name)

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget.step()
        first = 1 if passes else 0
        if name in _MATERIALIZED and len(args) > first:
            args = (*args[:first], _listed(args[first]), *args[first + 1 :])
        if estimate is not None:
            budget.fits(estimate(*args[first:], **kwargs), f"the filter {name}")
        result = func(*args, **kwargs)
        budget.fits(size(result), f"the filter {name}")
        return result

    return bounded


def _binop_size(operator: str, left: Any, right: Any) -> int:
    sequence = (str, bytes, list, tuple)
    if operator == "*":
        if isinstance(left, sequence) and isinstance(right, int):
            return size(left) * max(right, 0)
        if isinstance(right, sequence) and isinstance(left, int):
            return size(right) * max(left, 0)
        if isinstance(left, int) and isinstance(right, int):
            return size(left) + size(right)
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        return 0 if abs(left) <= 1 else left.bit_length() * right * 3 // 10  # its decimal digits
    elif operator == "+" and isinstance(left, sequence) and isinstance(right, sequence):
        return size(left) + size(right)
    elif operator == "%" and isinstance(left, str | bytes):
        return percent_size(left, right)
    return 0


def render(env: Environment, text: str, context: Mapping[str, Any]) -> str:
    """`text` rendered with `context` in `env` (environment()), within its budget's bounds.

    Raises:
        TemplateBound: past a bound (the message says which).
        jinja2.TemplateError and what a template raises (ValueError, TypeError, ...) otherwise.
    """
    budget: Budget = env.budget  # type: ignore[attr-defined]
    budget.begin()
    try:
        tree = _steps().visit(env.parse(text))
        tree.set_environment(env)
        chunks, length = [], 0
        for chunk in env.from_string(tree).generate(**context):
            length += len(chunk)
            if length > MAX_CHARS:
                raise TemplateBound(f"its output is more than {MAX_CHARS:,} characters")
            chunks.append(chunk)
    finally:
        budget.end()
    budget.output(length)
    return "".join(chunks)


def _steps() -> Any:
    """The template's tree with every loop's items and every `~` through the budget."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    class Steps(NodeTransformer):
        def visit_For(self, node: nodes.For) -> nodes.Node:
            self.generic_visit(node)
            if node.recursive:
                raise TemplateBound("recursive loops are not supported in a spec's templates")
            node.iter = nodes.Call(
                nodes.EnvironmentAttribute("bounded_iter"), [node.iter], [], None, None, lineno=node.lineno
            )
            return node

        def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
            self.generic_visit(node)
            return nodes.Call(
                nodes.EnvironmentAttribute("bounded_concat", lineno=node.lineno),
                node.nodes,
                [],
                None,
                None,
                lineno=node.lineno,
            )

    return Steps()
