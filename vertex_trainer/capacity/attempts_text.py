"""The capacity fallback's attempts for people (docs/contract.md section 11): one line from the
typed records (capacity.fallback.AttemptRecord, or their JSON form in a Job's `attempts`), never
from the service's messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vertex_trainer.capacity.fallback import AttemptRecord, summary  # (summary: fallback.py's, said here too)

__all__ = ["attempts_line", "summary"]


def attempts_line(records: Iterable[AttemptRecord | Mapping[str, Any]]) -> str:
    """The `attempts ...` line `submit --wait` and `status` print after a fallback plan ran."""
    return f"attempts {summary(records)}"
