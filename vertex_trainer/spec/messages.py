"""pydantic's ValidationError -> the project's SpecError: dotted paths, the fix, every problem.

Unknown keys come first, with a "did you mean"; then the rest in the spec's order. Missing and
malformed fields carry the field's description as their hint. One problem is a plain SpecError;
several are one SpecProblems whose message lists each on its own line.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from vertex_trainer.errors import SpecError, SpecProblems, names_value
from vertex_trainer.redact import MASK, looks_secret, redact_args
from vertex_trainer.spec.base import PROBLEM
from vertex_trainer.spec.model import JobSpec
from vertex_trainer.spec.rules import region_problem
from vertex_trainer.suggest import suggest

Loc = tuple[int | str, ...]  # where pydantic found a problem: keys and list indexes

_SHOWN = 80  # characters of a bad value quoted back


def translate(exc: ValidationError) -> SpecError:
    """The SpecError (one problem) or SpecProblems (several) for a failed JobSpec validation."""
    errors = exc.errors(include_url=False)
    unknown = sorted((e for e in errors if e["type"] == "extra_forbidden"), key=lambda e: len(e["loc"]))
    found, listed = [], set()
    for err in unknown + [e for e in errors if e["type"] != "extra_forbidden"]:
        problem = _one(err)
        if err["type"] == "extra_forbidden":  # the allowed keys of one mapping, listed once
            parent = tuple(err["loc"][:-1])
            if parent in listed:
                problem = SpecError(problem.field, problem.message[len(problem.field) + 2 :], has_value=False)
            listed.add(parent)
        found.append(problem)
    return found[0] if len(found) == 1 else SpecProblems(found)


def dotted(loc: Loc) -> str:
    """('trainer', 'extra_args', 0) -> 'trainer.extra_args[0]'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def shown(value: Any) -> str:
    """A bad value as quoted back in a message: its repr, shortened."""
    try:
        text = repr(value)
    except ValueError:  # an int too large to print
        return "a very large number"
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def shown_at(where: str, value: Any) -> str:
    """`shown(value)` for a message about the field `where`, with what a dry run would mask
    masked here too (redact.py): the whole value of an env variable named like a secret
    (`env.API_KEY`), a flag's value (`--api-key=...`). Messages end up in CI logs."""
    parts = [p for p in re.split(r"[.\[\]]+", where) if p]
    if any(a == "env" and looks_secret(b) for a, b in itertools.pairwise(parts)):
        return MASK
    return shown(redact_args([value])[0] if isinstance(value, str) else value)


def _one(err: Mapping[str, Any]) -> SpecError:
    # A tagged union's branch ("~name", model.py's FallbackEntry) is not a key of the spec.
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("~")))
    field = dotted(loc)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == PROBLEM:
        sub = ctx.get("sub")
        return SpecError(
            f"{field}.{sub}" if field and sub else field or sub or "",
            ctx["message"],
            has_value=False,
            hint=ctx.get("hint"),
        )
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = list(model.model_fields) if model else []
        # A key one level too high names its section too (`--set epochs=5` -> trainer.epochs).
        near = suggest(str(loc[-1]), allowed + _nested_keys(loc[:-1])) if allowed else None
        message = "unknown key" + (f"; did you mean '{near}'?" if near else "")
        return SpecError(
            field, message, has_value=False, hint="allowed keys: " + ", ".join(allowed) if allowed else None
        )
    if kind == "missing":
        return SpecError(field, "is required", has_value=False, hint=_missing_hint(loc))
    message = err["msg"].removeprefix("Value error, ")
    hint = None
    if kind == "literal_error":
        expected = re.findall(r"'([^']*)'", ctx.get("expected", ""))
        near = suggest(str(err.get("input")), expected) if isinstance(err.get("input"), str) else None
        hint = f"did you mean '{near}'?" if near else None
    elif kind == "string_pattern_mismatch" and loc[-1:] == ("region",) and isinstance(err.get("input"), str):
        # A malformed region (uscentral1, US-CENTRAL1) gets the same message as an unknown one.
        found = region_problem(field, err["input"], kind="malformed")
        return found or SpecError(field, "has an invalid format", has_value=False, hint=_field_doc(loc))
    elif kind == "string_pattern_mismatch":
        message = "has an invalid format"
        hint = _field_doc(loc)
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = f"must be a mapping of keys, not {_kind(err.get('input'))}"
        hint = _field_doc(loc)
    elif kind in ("tuple_type", "list_type"):
        # pydantic says "a valid tuple": a YAML user writes a list, often one item without [ ].
        given = err.get("input")
        message = f"must be a list, not {_kind(given)}"
        doc = _field_doc(loc)
        hint = (
            f"write it as a list: [{given}]" if isinstance(given, str) else "write it as a list: [...]"
        ) + (f" ({doc})" if doc else "")
    elif kind in (
        "string_type",
        "int_type",
        "float_type",
        "bool_type",
        "greater_than_equal",
        "less_than_equal",
        "greater_than",
        "less_than",
        "int_parsing",
        "float_parsing",
        "bool_parsing",
        "int_from_float",
        "finite_number",
        "int_parsing_size",
    ):
        hint = _field_doc(loc)
    if kind in ("string_type", "int_type", "float_type", "bool_type") and err.get("input", 0) is None:
        return SpecError(  # `labels: {run: }`, `replicas:`
            field,
            "is empty (YAML reads a key with no value, ~ or null as nothing)",
            has_value=False,
            hint="write its value"
            + (" ('' for empty text)" if kind == "string_type" else "")
            + ("" if _required(loc) else ", or leave the key out")
            + (f"; {hint}" if hint else ""),
        )
    if "input" in err and kind not in ("model_type", "model_attributes_type", "dict_type"):
        value = shown_at(field, err["input"])
        if not names_value(message, value):  # (1 is not named by "greater than or equal to 100")
            message += f" (got {value})"
    return SpecError(field, message, has_value=False, hint=hint)


def _kind(value: Any) -> str:
    return {
        list: "a list",
        str: "text",
        int: "a number",
        float: "a number",
        bool: "true/false",
        type(None): "empty",
    }.get(type(value), type(value).__name__)


def _missing_hint(loc: Loc) -> str | None:
    if loc == ("region",):
        return "add `region: us-central1` to the spec, pass --region, or set gcloud's ai/region"
    return _field_doc(loc) or "see `vertex-trainer schema` for every field"


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model that owns the mapping at `loc` (for did-you-mean on unknown keys)."""
    model: Any = JobSpec
    for part in loc:
        if isinstance(part, int):  # an item of a list of mappings (scheduling.fallback[1]): its model
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        nxt = _model_in(field.annotation)
        if nxt is None:
            return None
        model = nxt
    found: type[BaseModel] = model
    return found


def _model_in(ann: Any, depth: int = 0) -> type[BaseModel] | None:
    """The first pydantic model inside an annotation (X | None, tuple[Annotated[A | B, ...], ...])."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in (getattr(ann, "__args__", None) or ()) if depth < 8 else ():
        found = _model_in(arg, depth + 1)
        if found is not None:
            return found
    return None


def _nested_keys(loc: Loc) -> list[str]:
    """The keys of the mappings inside the one at `loc`, dotted (trainer.epochs, ...)."""
    model = _model_at(loc)
    if model is None:
        return []
    return [
        f"{name}.{key}"
        for name in model.model_fields
        for key in ((_model_at((*loc, name)) or _NoFields).model_fields)
    ]


class _NoFields:
    model_fields: ClassVar[dict[str, Any]] = {}


def _required(loc: Loc) -> bool:
    model = _model_at(loc[:-1])
    f = model.model_fields.get(loc[-1]) if model and loc and isinstance(loc[-1], str) else None
    return bool(f and f.is_required())


def _field_doc(loc: Loc) -> str | None:
    model = _model_at(loc[:-1])
    if model is None or not loc or not isinstance(loc[-1], str):
        return None
    f = model.model_fields.get(loc[-1])
    return f.description if f else None
