"""The attempts of a spec's capacity plan (docs/contract.md sections 8 and 11), as typed records.

An attempt is (region, strategy, hardware, reservation): attempt 1 is the spec's own
scheduling.strategy in its region on its hardware with scheduling.reservation; each
scheduling.fallback entry is one more, a strategy name or a mapping {strategy, region, hardware,
reservation}, defaulting every field it leaves out to the spec's (`reservation: none` drops an
inherited reservation). Everything that needs the plan (render, the fallback submit, the
pre-flight checks, the cost estimate) reads it from `attempts(spec)`, never from the spec's
fields directly, so a new kind of entry changes one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import HardwareSpec, JobSpec


@dataclass(frozen=True)
class PlannedAttempt:
    """One attempt of the plan: attempt `n` (from 1) runs `strategy` on `hardware` in `region`
    (None for a local-only spec), with `reservation` (a reservation name, "any", or None)."""

    n: int
    region: str | None
    strategy: str
    hardware: HardwareSpec
    reservation: str | None = None

    @property
    def hardware_name(self) -> str:
        """The preset name of the attempt's hardware, or its machine description."""
        return str(self.hardware.preset or self.hardware.describe())

    @property
    def field(self) -> str:
        """The spec field this attempt comes from (for messages)."""
        return "scheduling" if self.n == 1 else f"scheduling.fallback[{self.n - 2}]"

    def describe(self) -> str:
        """'attempt 2 (spot, us-east5, h100x8)'."""
        return f"attempt {self.n} ({self.strategy}, {self.region or 'no region'}, {self.hardware_name})"


def attempts(spec: JobSpec) -> tuple[PlannedAttempt, ...]:
    """The plan of `spec`: its own attempt, then one per scheduling.fallback entry.

    Args:
        spec: a validated JobSpec.
    Returns:
        The attempts in the order they are tried, attempt 1 first."""
    s = spec.scheduling
    first = PlannedAttempt(1, spec.region, s.strategy, spec.hardware, s.reservation)
    rest = []
    for n, entry in enumerate(s.fallback or (), start=2):
        if isinstance(entry, str):
            rest.append(PlannedAttempt(n, spec.region, entry, spec.hardware, s.reservation))
            continue
        reservation = entry.reservation if entry.reservation is not None else s.reservation
        rest.append(
            PlannedAttempt(
                n,
                entry.region or spec.region,
                entry.strategy or s.strategy,
                entry.hardware or spec.hardware,
                None if reservation == "none" else reservation,
            )
        )
    return (first, *rest)


def regions(spec: JobSpec) -> tuple[str, ...]:
    """The distinct regions of the plan, in the order the attempts first use them."""
    return tuple(dict.fromkeys(a.region for a in attempts(spec) if a.region))


def reservation_zone(reservation: str | None) -> str | None:
    """The zone of a reservation name (projects/P/zones/Z/reservations/R), else None ("any").

    The one parser of a reservation name: the region rules (spec/rules.py) and the plan's
    reservation rules (spec/plan_rules.py) read the zone here, and its region with `zone_region`."""
    parts = (reservation or "").split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "zones" else None


def zone_region(zone: str) -> str:
    """The region of a zone: what precedes its last "-" (us-central1-a -> us-central1)."""
    return zone.rsplit("-", 1)[0]
