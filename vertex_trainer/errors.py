"""Error types that carry their own exit code (docs/contract.md section 2).

Everything a user can get wrong, or a service can refuse, is raised as one of these; the CLI
prints the message (no traceback unless --debug) and exits with `exit_code`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


class VertexTrainerError(Exception):
    """Base class: a message for the user and an exit code."""

    exit_code = 1
    # The training job that SUCCEEDED before this failed (submit --deploy: only the deploy
    # failed): its name goes with the error (`--output json`'s "job"), so a script can deploy
    # it without training it again.
    job: str | None = None

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UserError(VertexTrainerError):
    """Invalid input (spec, flags, values, missing credentials). Nothing was sent. Exit 2."""

    exit_code = 2


def names_value(text: str, shown: str) -> bool:
    """Whether `text` already shows the value `shown` (a repr) as itself, not inside a longer
    word or number: 1 is not named by "at least 100"."""
    return re.search(rf"(?<![\w.]){re.escape(shown)}(?!\w|\.\d)", text) is not None


class SpecError(UserError):
    """A spec field is invalid. `field` is the dotted path, `value` the bad value."""

    def __init__(
        self,
        field: str,
        message: str,
        *,
        value: object = None,
        hint: str | None = None,
        has_value: bool = True,
    ):
        self.field = field
        self.value = value
        text = f"{field}: {message}" if field else message
        if has_value and value is not None and not names_value(text, repr(value)):
            text += f" (got {value!r})"
        super().__init__(text, hint=hint)

    @property
    def problems(self) -> tuple[SpecError, ...]:
        """Every problem this error reports: itself, or each one of a SpecProblems."""
        return (self,)


class SpecProblems(SpecError):
    """Several spec fields are invalid: every problem on its own line, each with its fix.

    `field` is the first problem's dotted path; `problems` holds each SpecError. The message
    reads well after the CLI's `error: ` (the hints are inside it, so `hint` is None).
    """

    def __init__(self, problems: Iterable[SpecError]) -> None:
        self._problems = tuple(problems)
        lines = [f"{len(self._problems)} problems in the spec:"]
        for p in self._problems:
            lines.append(f"  {p.message}" + (f"\n    hint: {p.hint}" if p.hint else ""))
        UserError.__init__(self, "\n".join(lines), hint=None)
        self.field = self._problems[0].field
        self.value = None

    @property
    def problems(self) -> tuple[SpecError, ...]:
        return self._problems


class ServiceError(VertexTrainerError):
    """A service or transport error that persisted after retries. Exit 3."""

    exit_code = 3


class JobFailed(VertexTrainerError):
    """The job ended FAILED, CANCELLED or EXPIRED. Exit 1."""

    exit_code = 1


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM/SIGHUP) stopped a run on this machine: its replicas were stopped and
    its records closed (JOB_STATE_CANCELLED) before this is raised, so a notebook cell or a loop
    of runs stops as Ctrl-C stops any other call. `job` is the ended run's handle; the CLI
    catches it and exits 1 with the run's summary (docs/local.md)."""

    def __init__(self, job: object):
        super().__init__(
            f"interrupted: the run here was stopped ({getattr(job, 'name', job)}, JOB_STATE_CANCELLED)"
        )
        self.job: Any = job  # the api's LocalJob (errors imports nothing of the project)
