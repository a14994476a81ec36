"""The capacity fallback's attempts for people (docs/contract.md section 11): one line from the
typed records (capacity.fallback.AttemptRecord, or their JSON form in a Job's `attempts`), never
from the service's messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vertex_trainer.capacity.fallback import AttemptRecord

__all__ = ["attempts_line", "summary"]


def summary(records: Iterable[AttemptRecord | Mapping[str, Any]]) -> str:
    """'flex-start FAILED (no capacity) -> spot refused (quota) -> standard SUCCEEDED'; each
    attempt's region (and hardware) is named when the plan has more than one."""
    typed = [r if isinstance(r, AttemptRecord) else AttemptRecord.from_dict(r) for r in records]
    regions = len({r.region for r in typed}) > 1
    machines = len({r.hardware for r in typed}) > 1
    parts = []
    for r in typed:
        where = (f" in {r.region}" if regions else "") + (f" on {r.hardware}" if machines else "")
        parts.append(f"{r.strategy}{where} {r.outcome()}")
    return " -> ".join(parts)


def attempts_line(records: Iterable[AttemptRecord | Mapping[str, Any]]) -> str:
    """The `attempts ...` line `submit --wait` and `status` print after a fallback plan ran."""
    return f"attempts {summary(records)}"
