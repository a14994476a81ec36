"""Error types that carry their own exit code (CONTRACT section 2).

Everything a user can get wrong, or a service can refuse, is raised as one of these; the CLI
prints the message (no traceback unless --debug) and exits with `exit_code`.
"""

from __future__ import annotations


class VertexTrainerError(Exception):
    """Base class: a message for the user and an exit code."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UserError(VertexTrainerError):
    """Invalid input (spec, flags, values, missing credentials). Nothing was sent. Exit 2."""

    exit_code = 2


class SpecError(UserError):
    """A spec field is invalid. `field` is the dotted path, `value` the bad value."""

    def __init__(self, field: str, message: str, *, value: object = None, hint: str | None = None,
                 has_value: bool = True):
        self.field = field
        self.value = value
        text = f"{field}: {message}" if field else message
        if has_value and value is not None and repr(value) not in text:
            text += f" (got {value!r})"
        super().__init__(text, hint=hint)


class ServiceError(VertexTrainerError):
    """A service or transport error that persisted after retries. Exit 3."""

    exit_code = 3


class JobFailed(VertexTrainerError):
    """The job ended FAILED, CANCELLED or EXPIRED. Exit 1."""

    exit_code = 1
