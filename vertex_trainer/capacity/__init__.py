"""Capacity: where the accelerators are and whether the project may use them, before a submit
(regions, quota, reservations, persistent resources), and the fallback that tries the plan's
attempts in order (docs/contract.md sections 8 and 11).

    availability.py    does each attempt's region offer it, does the quota allow it, persistent resources
    fallback.py        the plan's attempts tried in order, each recorded; earlier attempts found again
    attempts_text.py   the fallback's attempts for people
    resources_text.py  persistent resources and their pools for people

The attempts themselves are the spec's (spec/attempts.py, spec/plan_rules.py); the clients are
vertex/quotas.py and vertex/resources.py. Other capabilities use the names below only.
"""

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:
    from vertex_trainer.capacity.availability import (
        accelerator,
        check_persistent_resource,
        offline,
        quota_checks,
    )
    from vertex_trainer.capacity.fallback import earlier_jobs, record_of, region_clients

__all__ = [
    "accelerator",
    "check_persistent_resource",
    "earlier_jobs",
    "offline",
    "quota_checks",
    "record_of",
    "region_clients",
]
if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(
        __name__,
        {
            "accelerator": "availability",
            "check_persistent_resource": "availability",
            "offline": "availability",
            "quota_checks": "availability",
            "earlier_jobs": "fallback",
            "record_of": "fallback",
            "region_clients": "fallback",
        },
    )
