"""The base of every spec model: strict (unknown keys are errors), frozen, finite numbers, and
no true/false where a number goes (pydantic's lax mode reads true as 1)."""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from vertex_trainer.errors import SpecError

# The error type messages.py turns back into a SpecError with the hint and the sub-field.
PROBLEM = "vertex_trainer_problem"
# Text passed on as written, its spaces and line breaks kept (an env value, an argument): the
# models strip every other text (a name's or a path's stray space).
AsIs = Annotated[str, StringConstraints(strip_whitespace=False)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # `epochs: true` (or yes/on: YAML 1.1 booleans) would train 1 epoch; a number is a number.
        if isinstance(value, bool) and info.field_name and _numbers_only(cls, info.field_name):
            raise problem(
                f"must be a number, not true/false (got {str(value).lower()})",
                hint="write the number; in YAML, true/false, yes/no and on/off are booleans",
            )
        return value


@functools.lru_cache(maxsize=512)
def _numbers_only(model: type[BaseModel], name: str) -> bool:
    field = model.model_fields.get(name)
    found = kinds(field.annotation) if field else set()
    return bool(found & {int, float}) and bool not in found


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
