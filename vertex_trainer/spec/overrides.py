"""A spec value on the spec's own field types (spec/load.py): which fields hold text, so that a
value is kept as written there (in the file and in `--set`); a number YAML 1.1 reads otherwise
than its digits (`010`, `1:30`) refused elsewhere; and the refusal of `--set LIST[N]=...`, which
hands the whole list back with that item replaced."""

from __future__ import annotations

import functools
import json
import re
import typing
from collections.abc import Sequence
from typing import Any

from vertex_trainer.errors import SpecError, UserError
from vertex_trainer.redact import redact_args
from vertex_trainer.spec.base import kinds
from vertex_trainer.spec.messages import dotted
from vertex_trainer.spec.model import JobSpec

__all__ = ["number_as_written", "refuse_list_item", "text_field"]


def text_field(parts: Sequence[str | int]) -> bool:
    """Whether the spec field at `parts` (keys, and indexes of list items) holds text: a str
    field, a choice of words (Literal), an item of a list of text, a value of labels/env or of
    another mapping of text; read from JobSpec's own field types. A value a study tries
    (tune.parameters.NAME.values[i]) is text where the trainer field NAME holds text."""
    parts = tuple(parts)
    if len(parts) == 5 and parts[:2] == ("tune", "parameters") and parts[3] == "values":
        return isinstance(parts[2], str) and _text_at(("trainer", parts[2]))
    return _text_at(parts)


@functools.lru_cache(maxsize=1024)  # each scalar of a spec file asks
def _text_at(parts: tuple[str | int, ...]) -> bool:
    return _holds_text(JobSpec, parts)


def _holds_text(annotation: Any, parts: tuple[str | int, ...]) -> bool:
    found = kinds(annotation)
    if not parts:
        return bool(found) and all(_is_text(k) for k in found)
    part, rest = parts[0], parts[1:]
    for kind in found:
        fields = getattr(kind, "model_fields", None)
        if isinstance(fields, dict):
            if isinstance(part, str) and part in fields:
                return _holds_text(fields[part].annotation, rest)
            continue
        origin, args = typing.get_origin(kind), typing.get_args(kind)
        if origin is dict and isinstance(part, str) and len(args) == 2:
            return _holds_text(args[1], rest)
        items = origin is list or (origin is tuple and args[-1:] == (Ellipsis,))
        if items and isinstance(part, int) and args:
            return _holds_text(args[0], rest)
    return False


def _is_text(kind: Any) -> bool:
    if typing.get_origin(kind) is typing.Literal:
        return all(isinstance(a, str) for a in typing.get_args(kind))
    return kind is str


_OCTAL = re.compile(r"[-+]?0[0-7_]+")  # YAML 1.1: 010 is 8


def number_as_written(text: str, value: Any, path: tuple[str | int, ...]) -> Any:
    """The value of an unquoted scalar YAML 1.1 read as a number or a boolean, in a field that
    does not hold text; refused (SpecError, exit 2) where YAML 1.1 reads the digits otherwise than
    they read: `010` is 8 (octal), `1:30` is 90 (base 60)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if ":" in text:
        why, fix = f"is {value:g} in YAML (a number with colons is base 60)", "write the number itself"
    elif _OCTAL.fullmatch(text) and value != int(text.replace("_", "")):
        why, fix = f"is {value} in YAML (a leading 0 makes it octal)", f"write {int(text.replace('_', ''))}"
    else:
        return value
    raise SpecError(
        dotted(path),
        f"{text} {why}",
        has_value=False,
        hint=f"{fix}; a duration may be written 90s, 30m or 1h30m"
        if "timeout" in path or "max_wait" in path
        else fix,
    )


_ITEM = re.compile(r"(?P<path>[^\[\]]+?)(?:\[(?P<i>\d+)\]|\.(?P<j>\d+))")


def refuse_list_item(data: dict[str, Any], key: str, raw: str) -> None:
    """`--set args[1]=...` (or args.1) on a list: --set replaces whole fields, so the refusal
    (exit 2) hands the whole list back with that item replaced, ready to paste."""
    m = _ITEM.fullmatch(key)
    if m is None:
        return
    node: Any = data
    for part in m["path"].split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, list) and (node is not None or m["i"] is None):
        return  # a mapping's key that is a number (labels.0): set as any key
    items = [str(x) for x in (node or [])]
    index = int(m["i"] or m["j"])
    if index < len(items):
        items[index] = raw.strip()
    else:
        items.append(raw.strip())
    raise UserError(
        f"--set {key}: {m['path']} is a list, and --set replaces a whole field, not one item of it",
        hint=f"--set '{m['path']}={json.dumps(redact_args(items))}'",  # (a secret flag's value as ***)
    )
