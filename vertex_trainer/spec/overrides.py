"""`--set` on the spec's own field types (spec/load.py applies each `--set`): which fields hold
text, so that a value is kept as typed there, and the refusal of `--set LIST[N]=...`, which
hands the whole list back with that item replaced."""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.redact import redact_args
from vertex_trainer.spec.model import JobSpec

__all__ = ["refuse_list_item", "text_field"]


def text_field(parts: list[str]) -> bool:
    """Whether the spec field at `parts` holds text (a str field, or a value of labels/env or of
    another mapping of text), read from JobSpec's own field types."""
    model: Any = JobSpec
    for i, part in enumerate(parts):
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return False
        kinds = _kinds(fields[part].annotation)
        rest = parts[i + 1 :]
        if not rest:
            return kinds == {str}
        nested = [k for k in kinds if isinstance(k, type) and hasattr(k, "model_fields")]
        if nested:
            model = nested[0]
            continue
        maps = [k for k in kinds if typing.get_origin(k) is dict]
        return len(rest) == 1 and len(maps) == 1 and typing.get_args(maps[0])[1:] == (str,)
    return False


def _kinds(annotation: Any) -> set[Any]:
    """The types an annotation allows, None, Annotated and unions taken apart."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(annotation))) - {type(None)}
    return {annotation} - {type(None)}


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
