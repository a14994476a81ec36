"""The attempts of a spec's capacity plan (docs/contract.md sections 8 and 11), as typed records.

An attempt is (region, strategy, hardware, reservation): attempt 1 is the spec's own
scheduling.strategy in its region on its hardware; each scheduling.fallback entry is one more,
defaulting every field it leaves out to the spec's. Everything that needs the plan (render,
the fallback submit, the pre-flight checks, the cost estimate) reads it from `attempts(spec)`,
never from the spec's fields directly, so a new kind of entry changes one place.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        return self.hardware.preset or self.hardware.describe()


def attempts(spec: JobSpec) -> tuple[PlannedAttempt, ...]:
    """The plan of `spec`: its own attempt, then one per scheduling.fallback entry."""
    s = spec.scheduling
    first = PlannedAttempt(1, spec.region, s.strategy, spec.hardware)
    rest = [PlannedAttempt(n, spec.region, strategy, spec.hardware)
            for n, strategy in enumerate(s.fallback or (), start=2)]
    return (first, *rest)
