"""The base of every spec model: strict (unknown keys are errors), frozen, finite numbers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from vertex_trainer.errors import SpecError

# The error type messages.py turns back into a SpecError with the hint and the sub-field.
PROBLEM = "vertex_trainer_problem"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)


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
