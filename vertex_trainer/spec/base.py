"""The base of every spec model: strict (unknown keys are errors), frozen, finite numbers."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from vertex_trainer.errors import SpecError

# The error type messages.py turns back into a SpecError with the hint and the sub-field.
PROBLEM = "vertex_trainer_problem"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)


def kinds(annotation: Any) -> set[Any]:
    """The types an annotation allows, None, Annotated and unions taken apart."""
    if typing.get_origin(annotation) is typing.Annotated:
        return kinds(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(kinds(a) for a in typing.get_args(annotation))) - {type(None)}
    return {annotation} - {type(None)}


def problem(message: str, *, sub: str = "", hint: str | None = None) -> PydanticCustomError:
    """A validation error inside a model, carrying our message and hint through pydantic.

    Raising SpecError inside a validator would stop pydantic at the first problem; this error is
    collected with the others and translated by messages.py (`sub` extends the dotted path).
    """
    return PydanticCustomError(PROBLEM, "{message}", {"message": message, "sub": sub, "hint": hint})


def as_problem(error: SpecError, field: str) -> PydanticCustomError:
    """A SpecError raised for `field` (e.g. by vertex_trainer.hardware) as a collected problem."""
    sub = error.field[len(field) :].lstrip(".") if error.field.startswith(field) else ""
    text = error.message
    if text.startswith(f"{error.field}: "):
        text = text[len(error.field) + 2 :]
    return problem(text, sub=sub, hint=error.hint)
