"""Loading a spec: YAML -> `--set` overrides -> `--project`/`--region` -> templates -> JobSpec.

Override order (docs/contract.md section 1): spec file < `--set` < `--project`/`--region` flags; then
jinja2 templating of string values; then validation (messages.py turns pydantic's errors into
SpecError). Nothing here reads the environment or gcloud's configuration: the edge passes
`environ` (for `{{ env.X }}`) and `default_project`/`default_region` in.

Hostile input answers with a UserError (exit 2), never a traceback: duplicate or non-text keys,
nesting deeper than MAX_DEPTH, more than MAX_VALUES values (alias bombs), NUL bytes, text longer
than MAX_TEXT, integers beyond int64.
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import yaml
from pydantic import ValidationError

from vertex_trainer import hardware as hw
from vertex_trainer.errors import SpecError, SpecProblems, UserError
from vertex_trainer.spec import templating  # its jinja2 is imported only by specs that template
from vertex_trainer.spec.messages import dotted, shown, shown_at, translate
from vertex_trainer.spec.model import JobSpec
from vertex_trainer.spec.overrides import number_as_written, refuse_list_item, text_field

if TYPE_CHECKING:
    from jinja2 import Environment
    from typing_extensions import Unpack  # (typing.Unpack from Python 3.11)

MAX_FILE_BYTES = 1 << 20  # a spec is a few hundred bytes; a megabyte is certainly a mistake
MAX_DEPTH = 32  # a spec nests 3 levels (image.pip_packages[0]); 32 is generous
MAX_VALUES = 20_000  # values after aliases are expanded (a YAML "billion laughs" stops here)
MAX_TEXT = 65_536  # characters in one value
MAX_PARSE_DEPTH = 200  # levels before PyYAML's parser, which recurses per level, is used
_INT64 = 1 << 63


# -- YAML -----------------------------------------------------------------------------------------


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate and non-text keys (PyYAML keeps the last duplicate),
    and keeps the text of each plain scalar that YAML 1.1 reads as a number or a boolean."""

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        untagged = event.tag in (None, "!")  # its type read from its text, not a tag
        node: yaml.ScalarNode = super().compose_scalar_node(anchor)
        if untagged and node.tag in _READ_AS:
            node.written = True  # type: ignore[attr-defined]
        return node


class _Written:
    """A plain scalar YAML 1.1 reads as a number or a boolean (`no`, `010`, `1.10`, `on`, `1_000`),
    with the text as written: a field that holds text takes the text, any other the value (_plain)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any, text: str):
        self.value, self.text = value, text

    def __repr__(self) -> str:  # as a message quotes it (`--set a.b=1` where a is 010)
        return repr(self.text)

    def __str__(self) -> str:  # as a hint lists it (`--set 'args=[...]'`)
        return self.text


def _written(loader: _SpecLoader, node: yaml.ScalarNode) -> Any:
    value = _READ_AS[node.tag](loader, node)
    return _Written(value, node.value) if getattr(node, "written", False) else value


def _construct_mapping(loader: _SpecLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`, merged by construct_mapping
            continue
        key = loader.construct_object(key_node, deep=deep)
        key = key.value if isinstance(key, _Written) else key
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a key must be text, not {_key_kind(key)}; quote it or write it as a name",
                key_node.start_mark,
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


def _key_kind(key: Any) -> str:
    if isinstance(key, _Written):  # a key a merge (`<<: {1: x}`) brought in: what YAML read
        return _key_kind(key.value)
    if isinstance(key, bool):
        return f"{str(key).lower()} (yes/no/on/off are booleans in YAML)"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return f"the number {key}"
    names: dict[type, str] = {list: "a list", dict: "a mapping"}
    return names.get(type(key), f"a {type(key).__name__}")


_SpecLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_READ_AS = {
    f"tag:yaml.org,2002:{kind}": yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{kind}"]
    for kind in ("bool", "int", "float")
}
for _tag in _READ_AS:
    _SpecLoader.add_constructor(_tag, _written)
# Keep timestamps and dates as text: they are never meant as datetimes in a spec.
_SpecLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# What PyYAML raises on input it cannot turn into data (an int of 5,000 digits is a ValueError).
_YAML_FAILURES = (yaml.YAMLError, ValueError, TypeError, OverflowError)


def _parse(text: str) -> Any:
    _screen(text)
    try:
        return yaml.load(text, Loader=_SpecLoader)
    except RecursionError:
        raise _too_deep() from None


def _too_deep() -> UserError:
    return UserError(
        "the YAML nests too deeply (more than a few hundred levels); a job spec nests 3 levels",
        hint="check the brackets and the indentation",
    )


def _screen(text: str) -> None:
    """Refuse YAML nested past MAX_PARSE_DEPTH levels, or holding more than twice MAX_VALUES
    nodes before its aliases are expanded (so more than MAX_VALUES values: a key pairs with a
    value), from libyaml's events (milliseconds; PyYAML's Python scanner took seconds on such a
    file, 12 s for a megabyte of keys). Any other error is left to the parse that follows, whose
    messages are the ones users see. Without libyaml, the parse and _plain refuse as before."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_PARSE_DEPTH:
                    raise _too_deep()
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                continue
            elif not isinstance(event, yaml.NodeEvent):
                continue
            nodes += 1
            if nodes > 2 * MAX_VALUES:
                raise _too_many()
    except yaml.YAMLError as e:
        if "maximum nesting depth" in str(e):  # libyaml's own bound (1,000 levels since 0.2.5)
            raise _too_deep() from None


def _too_many() -> UserError:
    return UserError(
        f"the spec holds more than {MAX_VALUES} values (YAML aliases expanding?)",
        hint="a job spec has a few dozen values",
    )


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a spec file; syntax errors name the line."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(
            f"spec file not found: {p}",
            hint="give the path of a YAML job spec, e.g. job_specs/quickstart-local.yaml",
        ) from None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read spec file {p}: {e}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"{p}: more than {MAX_FILE_BYTES // 1024} KiB; a job spec is a short YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"cannot read spec file {p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = _parse(text)
    except UserError as e:
        raise UserError(f"{p}: {e.message}", hint=e.hint) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        raise UserError(f"{p}:{where} invalid YAML: {e.problem or e}") from None
    except ValueError as e:  # PyYAML turning a scalar into a number
        what = (
            "a number has more than 4300 digits" if "digits" in str(e) else f"a number cannot be read ({e})"
        )
        raise UserError(f"{p}: invalid YAML: {what}", hint="quote the value if it is text") from None
    except _YAML_FAILURES as e:
        raise UserError(f"{p}: invalid YAML: {e}") from None
    if data is None:
        raise UserError(f"{p}: the spec is empty", hint="see job_specs/ for examples")
    if not isinstance(data, dict):
        raise UserError(
            f"{p}: a spec is a mapping of keys (name:, region:, hardware:, ...), not a {type(data).__name__}"
        )
    plain: dict[str, Any] = _plain(data)  # a text field's `no`, `010` or `1.10` as written
    return plain


# -- plain data: a bounded deep copy ---------------------------------------------------------------


def _plain(data: Any, at: tuple[Any, ...] = ()) -> Any:
    """A deep copy of spec data as dicts, lists and scalars, refusing what no spec can hold.

    Bounded in depth and size, so recursive YAML aliases and alias bombs end here too. A plain
    YAML scalar read as a number or a boolean is its text as written where the field holds text.
    """
    count = 0
    misread: list[SpecError] = []  # each number YAML reads otherwise than its digits, listed at once

    def walk(node: Any, path: tuple[Any, ...], depth: int) -> Any:
        nonlocal count
        count += 1
        if isinstance(node, _Written):
            try:
                node = node.text if text_field(path) else number_as_written(node.text, node.value, path)
            except SpecError as e:
                misread.append(e)
                node = node.value
        where = dotted(path) or "the spec"
        if count > MAX_VALUES:
            raise _too_many()
        if isinstance(node, (dict, list, tuple)) and depth >= MAX_DEPTH:
            raise SpecError(
                dotted(path[:3]),
                f"nests more than {MAX_DEPTH} levels deep; a job spec nests 3",
                has_value=False,
                hint="check the brackets and the indentation",
            )
        if isinstance(node, Mapping):
            out = {}
            for key, value in node.items():
                if not isinstance(key, str):
                    raise SpecError(
                        where,
                        f"a key must be text, not {_key_kind(key)}",
                        has_value=False,
                        hint="quote the key",
                    )
                out[_text(key, path, "a key")] = walk(value, path + (key,), depth + 1)
            return out
        if isinstance(node, (list, tuple)):
            return [walk(v, path + (i,), depth + 1) for i, v in enumerate(node)]
        if isinstance(node, str):
            return _text(node, path)
        if isinstance(node, bool) or node is None or isinstance(node, float):
            return node
        if isinstance(node, int):
            if not -_INT64 <= node < _INT64:
                raise SpecError(where, "is too large (at most 2^63 - 1)", has_value=False)
            return node
        if isinstance(node, os.PathLike):
            return _text(os.fspath(node), path)
        if isinstance(node, (_dt.date, _dt.time)):
            return node.isoformat()
        raise SpecError(
            where,
            f"is a {type(node).__name__}; a spec holds text, numbers, true/false, lists and mappings",
            has_value=False,
        )

    out = walk(data, at, 0)
    if misread:
        raise misread[0] if len(misread) == 1 else SpecProblems(misread)
    return out


def _text(value: str, path: tuple[Any, ...], what: str = "") -> str:
    where = dotted(path) or "the spec"
    what = f"{what} " if what else ""
    if len(value) > MAX_TEXT:
        raise SpecError(where, f"{what}is {len(value)} characters long; at most {MAX_TEXT}", has_value=False)
    if "\x00" in value:
        raise SpecError(where, f"{what}contains a NUL byte", has_value=False, hint="remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError(
            where,
            f"{what}contains an invalid character (a lone UTF-16 surrogate)",
            has_value=False,
            hint="write the character itself, or its \\U escape",
        ) from None
    return value


# -- --set ----------------------------------------------------------------------------------------


def parse_assignments(items: Iterable[str] | None, flag: str) -> list[tuple[str, str]]:
    """'a.b=c' strings -> [(key, value)]; a missing '=' is a clear error."""
    out = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(
                f"{flag} {item!r}: expected KEY=VALUE",
                hint=f"e.g. {flag} trainer.batch_size=4096" if flag == "--set" else f"e.g. {flag} user=alice",
            )
        out.append((key.strip(), value))
    return out


def apply_set(data: dict[str, Any], key: str, raw: str) -> None:
    """Apply one `--set dotted.key=value` to the raw spec mapping (value parsed as a YAML scalar).

    A field that holds text (name, a path, a label's or an env variable's value) takes the text as
    typed: YAML would read `labels.env=no` as false, `labels.run=007` as 7 and `env.VERSION=1.10`
    as 1.1, which the spec then wrote back as "false", "7" and "1.1". `null` removes the key
    (a label, an env variable; a field then has its default).
    """
    refuse_list_item(data, key, raw)
    parts = key.split(".")
    try:
        value = yaml.load(raw, Loader=_SpecLoader) if raw.strip() else ""
    except (*_YAML_FAILURES, RecursionError):
        value = raw
    value = _plain(value, tuple(parts))  # (a scalar's text where the field holds text)
    if isinstance(value, (bool, int, float)) and text_field(parts):  # (an explicit !!int tag)
        value = raw.strip()
    node = data
    for i, part in enumerate(parts[:-1]):
        path = ".".join(parts[: i + 1])
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str) and path == "hardware":
            child = node[part] = hw.resolve_preset(child)  # --set hardware.accelerator_count=4 on a preset
        elif not isinstance(child, dict):
            raise UserError(
                f"--set {key}: {path} is {shown(child)}, not a mapping",
                hint=f"set {path} itself, e.g. --set {path}=...",
            )
        node = child
    if value is None:  # `null` removes the value: the field's default, a label or variable gone
        node.pop(parts[-1], None)
        return
    node[parts[-1]] = value


# -- templates ------------------------------------------------------------------------------------


class _LazyGitSha:
    """`{{ git_sha }}`: computed only when a template uses it."""

    def __init__(self, cwd: Path):
        self.cwd = cwd

    def __str__(self) -> str:
        try:
            out = subprocess.run(
                ["git", "rev-parse", "--short=12", "HEAD"],
                cwd=self.cwd,
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            raise UserError(
                "{{ git_sha }} is used but the spec is not in a git checkout with a commit",
                hint="commit first, or pass --var and use {{ my_var }} instead",
            ) from None
        return out.stdout.strip()


def _is_template(node: Any) -> bool:
    return isinstance(node, str) and ("{{" in node or "{%" in node)


def _needs_templates(data: Any) -> bool:
    if isinstance(data, dict):
        return any(_needs_templates(v) for v in data.values())
    if isinstance(data, list):
        return any(_needs_templates(v) for v in data)
    return _is_template(data)


def _template_env() -> Environment:
    # Sandboxed and bounded: a template formats values; it cannot reach Python internals, nor run
    # for minutes or make gigabytes (templating.py's bounds).
    return templating.environment()


def _names_in(env: Environment, text: str) -> set[str]:
    """The variables a template uses (none when it does not parse: rendering reports that)."""
    import jinja2
    from jinja2 import meta

    try:
        return set(meta.find_undeclared_variables(env.parse(text)))
    except jinja2.TemplateError:
        return set()


def template_variables(data: Any) -> set[str]:
    """The variables the templates still in `data` use (e.g. a spec resolved with `defer`)."""
    found: set[str] = set()
    if not _needs_templates(data):
        return found
    env = _template_env()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif _is_template(node):
            found.update(_names_in(env, node))

    walk(data)
    return found


def _render_templates(
    data: Any,
    context: dict[str, Any],
    env: Environment,
    path: str = "",
    defer: frozenset[str] = frozenset(),
) -> Any:
    """Render every template in `data`; one that uses a variable in `defer` is kept as it is.
    `env` (_template_env) holds the bounds' budget: one for all of a spec's templates."""
    import jinja2

    def render(node: str, where: str) -> str:
        try:
            return templating.render(env, node, context)
        except UserError:
            raise
        except templating.TemplateBound as e:
            raise SpecError(
                where,
                f"template {shown_at(where, node)}: {e}",
                has_value=False,
                hint=f"a spec's templates are bounded ({templating.LIMITS}); they format values "
                "such as {{ env.USER }} or {{ git_sha }}",
            ) from None
        except jinja2.UndefinedError as e:
            names = ", ".join(sorted(k for k in context if k != "env"))
            hint = (
                f"known variables: {names}, env.NAME; add --var KEY=VALUE, or give a "
                "default: {{ env.NAME | default('x') }}"
            )
            if "trigger" in _names_in(env, node) and "trigger" not in context:
                hint = (
                    "trigger.bucket/object/generation/folder have values in the runs a storage "
                    "event starts (vertex-trainer trigger render SPEC --bucket B); " + hint
                )
            raise SpecError(
                where, f"template {shown_at(where, node)}: {e.message}", has_value=False, hint=hint
            ) from None
        except jinja2.TemplateError as e:
            raise SpecError(
                where,
                f"template {shown_at(where, node)}: {e}",
                has_value=False,
                hint="templates look like {{ env.USER }} or {{ git_sha }}",
            ) from None
        except (ArithmeticError, LookupError, TypeError, ValueError, MemoryError, RecursionError) as e:
            raise SpecError(
                where,
                f"template {shown_at(where, node)} failed: {type(e).__name__}: {e}",
                has_value=False,
                hint="templates look like {{ env.USER }} or {{ git_sha }}",
            ) from None

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(node)]
        if not _is_template(node):
            return node
        return node if defer and _names_in(env, node) & defer else render(node, where)

    return walk(data, path)


# -- the whole load -------------------------------------------------------------------------------


class SpecInputs(TypedDict, total=False):
    """What goes into a spec besides its data (load_spec, build_spec, resolve_data; every key
    may be left out)."""

    sets: Iterable[str | tuple[str, str]]  # `"dotted.key=value"` strings or (key, value) pairs
    vars: Mapping[str, Any] | None  # feed `{{ var }}`
    project: str | None  # the flags: they win over the file and `--set`
    region: str | None
    base_dir: Path | None  # where `{{ git_sha }}` is read (default: the current directory)
    environ: Mapping[str, str] | None  # feeds `{{ env.NAME }}` (default: nothing)
    # Apply when neither the file, `--set` nor the flags give one (the edge reads them from
    # $GOOGLE_CLOUD_PROJECT / gcloud's config).
    default_project: str | None
    default_region: str | None


def load_spec(path: str | os.PathLike[str], **inputs: Unpack[SpecInputs]) -> JobSpec:
    """Load, override, template and validate a job spec file (`inputs`: SpecInputs; `base_dir`
    defaults to the file's folder). Raises UserError/SpecError (exit 2)."""
    data = read_yaml(path)
    inputs.setdefault("base_dir", Path(path).parent)
    return build_spec(data, **inputs)


def build_spec(data: Mapping[str, Any], **inputs: Unpack[SpecInputs]) -> JobSpec:
    """The same as load_spec, from an already-parsed mapping (never mutated)."""
    try:
        return JobSpec.model_validate(resolve_data(data, **inputs))
    except ValidationError as e:
        raise translate(e) from None


def resolve_data(
    data: Mapping[str, Any], *, defer: Iterable[str] = (), **inputs: Unpack[SpecInputs]
) -> dict[str, Any]:
    """The spec data after `--set`, the flags and the templates, not yet validated (build_spec
    validates it). Templates that use a variable named in `defer` stay as they are, to be
    rendered later (`trigger render` keeps `{{ trigger.* }}` for the event that starts a run)."""
    if not isinstance(data, Mapping):
        raise UserError(
            f"a spec is a mapping of keys (name:, region:, hardware:, ...), not a {type(data).__name__}"
        )
    plain: dict[str, Any] = _plain(data)
    sets = inputs.get("sets") or ()
    for item in [sets] if isinstance(sets, str) else sets:
        key, value = item if isinstance(item, tuple) else parse_assignments([item], "--set")[0]
        apply_set(plain, key, value)
    for flag in ("project", "region"):  # the flags win; an empty one (`--region "$UNSET"`) is no value
        given = inputs.get(flag)
        if isinstance(given, str) and not given.strip():
            raise UserError(
                f"--{flag} {given!r}: empty (a variable that is not set?)",
                hint=f"give the {flag}, or leave --{flag} out: the spec's {flag}, then your default, apply",
            )
        if given:
            plain[flag] = given
    plain = _plain(plain)  # --set values obey the same limits as the file (`--set a='&x [*x]'`)

    if _needs_templates(plain):
        raw_name = plain.get("name")
        context: dict[str, Any] = {
            "env": dict(inputs.get("environ") or {}),
            "git_sha": _LazyGitSha(inputs.get("base_dir") or Path.cwd()),
            "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S"),
            **(inputs.get("vars") or {}),
        }
        deferred = frozenset(defer)
        env = _template_env()  # one budget for the whole spec
        if isinstance(raw_name, str):
            if deferred and _is_template(raw_name) and _names_in(env, raw_name) & deferred:
                deferred |= {"name"}  # a name known only later defers the values that use it
            else:
                context["name"] = _render_templates(raw_name, context, env, "name")
        plain = _render_templates(plain, context, env, defer=deferred)

    if not plain.get("project") and (default_project := inputs.get("default_project")):
        plain["project"] = default_project
    if not plain.get("region") and (default_region := inputs.get("default_region")):
        plain["region"] = default_region
    out: dict[str, Any] = _plain(plain)  # and so does the output of templates
    return out
