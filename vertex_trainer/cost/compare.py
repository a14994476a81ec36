"""`cost --compare` (docs/contract.md section 12): the alternatives of the same accelerator
generation and size, each strategy, the regions that offer them, and one recommendation with its
reason from the job's own facts (a start that cannot wait -> a reservation or standard; a multi-day
run that cannot survive preemption and can wait -> flex-start; a checkpointed job -> spot).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from vertex_trainer import hardware as hw
from vertex_trainer import pricing, regions
from vertex_trainer.cost.estimate import (
    FLEX_START_MAX_H,
    MULTI_DAY_H,
    Estimate,
    _hardware_args,
    _hours,
    _money,
    _rate,
    attempt_price,
)
from vertex_trainer.cost.scaling_model import reducer_price
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.attempts import PlannedAttempt

_GENERATION = re.compile(r"(A100|H100|H200|B200|GB200|L4|T4|V100|P100|P4)")


def _generation(accelerator: str | None) -> str | None:
    m = _GENERATION.search(accelerator or "")
    return m.group(1) if m else None


@dataclass(frozen=True)
class Alternative:
    """One row of `cost --compare`."""

    hardware: str
    strategy: str
    region: str
    hourly: float | None
    expected_hours: float | None
    expected_cost: float | None
    max_cost: float | None
    upper_bound: bool = False
    reason: str | None = None
    quota: int | None = None  # the region's quota for the strategy's metric, when read
    current: bool = False  # the spec's own choice

    def to_json(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "strategy": self.strategy,
            "region": self.region,
            "hourly": _rate(self.hourly),
            "expected_hours": _hours(self.expected_hours),
            "expected_cost": _money(self.expected_cost),
            "max_cost": _money(self.max_cost),
            "upper_bound": self.upper_bound,
            "quota": self.quota,
            "current": self.current,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Facts:
    """What the recommendation rests on (the job's own facts)."""

    hours: float  # expected run time, else the timeout
    hours_known: bool  # from a throughput (True) or the timeout (False)
    checkpoints: bool  # the trainer resumes from checkpoints (BackupAndRestore)
    survives_preemption: bool
    can_wait: bool  # the start may wait for capacity
    reservation: str | None
    flex_start_ok: bool  # the hardware is served by Flex Start and the run fits 7 days
    why_not_survive: str = ""


def facts(spec: JobSpec, est: Estimate, *, can_wait: bool = True, checkpoints: bool | None = None) -> Facts:
    """The job's facts for `recommend`.

    Args:
        spec: the job.
        est: its estimate (the expected hours of attempt 1, if known, and the plan it priced).
        can_wait: the start may wait for capacity (`cost --start-now` says it may not).
        checkpoints: the trainer resumes from checkpoints (None: the bundled trainer does, with
            Keras BackupAndRestore; a custom image is not assumed to).
    Returns:
        Facts."""
    first = est.attempts[0]
    hours_known = first.expected_hours is not None
    hours = first.max_hours if first.expected_hours is None else first.expected_hours
    ckpt = spec.runs_bundled_trainer if checkpoints is None else checkpoints
    multi_machine = spec.replicas > 1 and not spec.scheduling.restart_on_worker_restart
    survives = ckpt and not multi_machine
    why = (
        "the trainer does not checkpoint"
        if not ckpt
        else f"a preempted machine stops all {spec.replicas} machines and restart_on_worker_restart is off"
        if multi_machine
        else ""
    )
    acc = spec.hardware.accelerator
    reservation = est.plan[0].reservation  # what a start that cannot wait would run on
    return Facts(
        hours,
        hours_known,
        ckpt,
        survives,
        can_wait,
        reservation,
        bool(acc and acc.flex_start) and hours <= FLEX_START_MAX_H,
        why,
    )


def alternatives(
    spec: JobSpec,
    book: pricing.PriceBook,
    est: Estimate,
    quota: Callable[[str, str, str], int | None] | None = None,
) -> list[Alternative]:
    """The rows of `cost --compare`: hardware of the same accelerator generation and size (other
    presets), each strategy, the regions that offer it (and the spec's), cheapest expected first.

    Args:
        spec, book, est: the job, the prices and its estimate (for the expected hours).
        quota: (accelerator, strategy, region) -> the quota limit, or None when unreadable.
    Returns:
        Alternatives; rows without a price keep their reason."""
    acc = spec.hardware.accelerator
    per_machine = spec.hardware.accelerator_count or spec.hardware.devices
    gen = _generation(acc.name if acc else None)
    shapes = [spec.hardware]
    if gen:
        for row in hw.catalog_rows():
            if (
                _generation(row["accelerator_type"]) == gen
                and row["accelerator_count"] == per_machine
                and row["preset"] != spec.hardware.preset
                and row["tpu_topology"] is None
            ):
                shapes.append(
                    type(spec.hardware)(
                        machine_type=row["machine_type"],
                        accelerator_type=row["accelerator_type"],
                        accelerator_count=row["accelerator_count"],
                    )
                )
    hours = est.attempts[0].expected_hours
    first = est.attempts[0]
    rows = []
    for shape in shapes:
        name = shape.preset or shape.describe()
        on_shape = spec if shape == spec.hardware else spec.model_copy(update={"hardware": shape})
        shape_acc = shape.accelerator
        # The region table lists accelerators: a CPU-only machine is compared in the spec's region.
        offered = [
            r
            for r in (regions.regions_for(shape_acc.name) if shape_acc else ())
            if pricing.machine_price(book, region=r, strategy="standard", **_hardware_args(shape)).hourly
            is not None
        ]
        where = list(dict.fromkeys(([spec.region] if spec.region else []) + offered))
        for region in where:
            for strategy in pricing.STRATEGIES:
                if strategy == "flex-start" and not (shape_acc and shape_acc.flex_start):
                    continue
                price = (
                    pricing.machine_price(book, region=region, strategy=strategy, **_hardware_args(shape))
                    .times(spec.replicas)
                    .plus(reducer_price(book, on_shape, region, strategy))  # issue 35: its reducers
                )
                h = hours if shape == spec.hardware else None
                rows.append(
                    Alternative(
                        name,
                        strategy,
                        region,
                        price.hourly,
                        h,
                        None if price.hourly is None or h is None else price.hourly * h,
                        None if price.hourly is None else price.hourly * first.max_hours,
                        price.upper_bound,
                        price.reason,
                        quota(shape_acc.name, strategy, region) if quota and shape_acc else None,
                        current=(
                            shape == spec.hardware
                            and region == spec.region
                            and strategy == spec.scheduling.strategy
                        ),
                    )
                )
    return sorted(
        rows,
        key=lambda r: (
            r.hourly is None,
            r.expected_cost if r.expected_cost is not None else float("inf"),
            r.hourly or 0.0,
        ),
    )


@dataclass(frozen=True)
class Recommendation:
    strategy: str
    reason: str
    region: str | None
    hardware: str
    hourly: float | None = None
    cost: float | None = None  # expected (or worst case when the hours are the timeout)
    upper_bound: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "region": self.region,
            "hardware": self.hardware,
            "hourly": _rate(self.hourly),
            "cost": _money(self.cost),
            "upper_bound": self.upper_bound,
            "reason": self.reason,
        }


def recommend(spec: JobSpec, book: pricing.PriceBook, f: Facts, base: PlannedAttempt) -> Recommendation:
    """One strategy for the job, with its reason from the job's facts: a start that cannot wait ->
    a reservation (when the spec names one) or standard; a multi-day run that cannot survive
    preemption and can wait -> flex-start; a job that survives preemption -> spot; else flex-start
    when it can wait and fits, else standard.

    Args:
        spec, book: the job and the prices (for the figures in the reason).
        f: the job's facts (`facts`).
        base: attempt 1 of the plan (the estimate's), priced at each strategy.
    Returns:
        A Recommendation."""

    def priced(strategy: str) -> pricing.Price:
        return attempt_price(book, spec, replace(base, strategy=strategy))

    prices = {s: priced(s) for s in pricing.STRATEGIES}
    span = f"{f.hours:,.0f} h ({f.hours / 24:.1f} days, {'expected' if f.hours_known else 'the timeout'})"

    def fig(strategy: str) -> str:
        p = prices[strategy]
        if p.hourly is None:
            return f"{strategy}: no price"
        le = "<= " if p.upper_bound else ""
        return f"{strategy} {le}{p.hourly:,.2f} USD/h = {le}{p.hourly * f.hours:,.0f} USD"

    figures = "; ".join(fig(s) for s in pricing.STRATEGIES)
    if not f.can_wait:
        if f.reservation:
            choice, why = (
                "reservation",
                (
                    f"the start cannot wait: the reservation {f.reservation} has the "
                    "capacity now (billed as the reservation, not per job)"
                ),
            )
        else:
            choice, why = (
                "standard",
                (
                    "the start cannot wait: standard (on-demand) starts as soon as "
                    "capacity is there, Flex Start queues and Spot can be preempted; "
                    "a Compute Engine reservation (scheduling.reservation) guarantees it"
                ),
            )
    elif f.hours >= MULTI_DAY_H and not f.survives_preemption and f.flex_start_ok:
        choice, why = (
            "flex-start",
            (
                f"a multi-day run ({span}) that cannot survive preemption "
                f"({f.why_not_survive}) and whose start may wait: Flex Start runs "
                "it uninterrupted for up to 7 days, below the on-demand price"
            ),
        )
    elif f.survives_preemption and prices["spot"].hourly is not None:
        choice, why = (
            "spot",
            (
                "the trainer checkpoints (BackupAndRestore) and survives preemption: Spot "
                "is the cheapest; a preempted run resumes from its last epoch"
            ),
        )
    elif f.flex_start_ok:
        choice, why = (
            "flex-start",
            (
                f"the start may wait and the run ({span}) fits Flex Start's 7 days; it "
                f"cannot survive preemption ({f.why_not_survive or 'not checkpointed'})"
            ),
        )
    else:
        reason = (
            "runs longer than Flex Start's 7 days"
            if f.hours > FLEX_START_MAX_H
            else "is on hardware Flex Start does not serve"
        )
        choice, why = "standard", f"the run {reason} and cannot survive preemption"
    chosen = prices.get(choice) if choice in prices else None
    return Recommendation(
        choice,
        f"{why}. {figures}",
        base.region,
        base.hardware_name,
        chosen.hourly if chosen else None,
        None if chosen is None or chosen.hourly is None else chosen.hourly * f.hours,
        bool(chosen and chosen.upper_bound),
    )


@dataclass(frozen=True)
class Machines:
    """N machines against one of the same hardware, strategy and region (issue 35): the scaling
    estimate's hours and costs (cost/scaling_model.py). An estimate."""

    machines: int
    hardware: str
    speedup: float
    efficiency: float
    hourly: float | None  # all N machines (and reducers)
    hours: float | None
    one_hourly: float | None  # one machine
    one_hours: float | None

    @property
    def cost(self) -> float | None:
        return None if self.hourly is None or self.hours is None else self.hourly * self.hours

    @property
    def one_cost(self) -> float | None:
        return None if self.one_hourly is None or self.one_hours is None else self.one_hourly * self.one_hours

    def verdict(self) -> str:
        if self.cost is None or self.one_cost is None or self.hours is None or self.one_hours is None:
            return "no expected hours (give a throughput) to compare the costs"
        if self.one_cost < self.cost:
            return (
                f"one machine for longer is cheaper: {self.one_cost:,.0f} USD over {self.one_hours:,.1f} h "
                f"against {self.cost:,.0f} USD over {self.hours:,.1f} h on {self.machines} machines "
                f"({self.cost - self.one_cost:,.0f} USD more for {self.one_hours - self.hours:,.1f} h sooner)"
            )
        return (
            f"{self.machines} machines are no dearer than one "
            f"({self.cost:,.0f} against {self.one_cost:,.0f} USD)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": True,
            "machines": self.machines,
            "hardware": self.hardware,
            "speedup": round(self.speedup, 3),
            "efficiency": round(self.efficiency, 4),
            "hourly": _rate(self.hourly),
            "expected_hours": _hours(self.hours),
            "expected_cost": _money(self.cost),
            "one_machine": {
                "hourly": _rate(self.one_hourly),
                "expected_hours": _hours(self.one_hours),
                "expected_cost": _money(self.one_cost),
            },
        }


def machines(spec: JobSpec, book: pricing.PriceBook, est: Estimate) -> Machines | None:
    """N machines beside one (None: one machine, or no scaling estimate)."""
    s = est.scaling
    if s is None or spec.replicas < 2:
        return None
    first, base = est.attempts[0], est.plan[0]
    one = pricing.machine_price(
        book, region=base.region, strategy=base.strategy, **_hardware_args(base.hardware)
    )
    hours = first.expected_hours
    return Machines(
        spec.replicas,
        first.hardware,
        s.speedup,
        s.efficiency,
        first.hourly,
        hours,
        one.hourly,
        None if hours is None else hours * s.speedup,
    )


@dataclass(frozen=True)
class Comparison:
    estimate: Estimate
    rows: list[Alternative]
    facts: Facts
    recommendation: Recommendation
    notes: tuple[str, ...] = field(default=())
    machines: Machines | None = None  # a multi-machine job beside one machine (issue 35)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.estimate.to_json(),
            "alternatives": [r.to_json() for r in self.rows],
            "recommendation": self.recommendation.to_json(),
            **({"machines": self.machines.to_json()} if self.machines else {}),
        }


def compare(
    spec: JobSpec,
    book: pricing.PriceBook,
    est: Estimate,
    *,
    can_wait: bool = True,
    checkpoints: bool | None = None,
    quota: Callable[[str, str, str], int | None] | None = None,
) -> Comparison:
    """`cost --compare`: the alternatives and one recommendation (see `alternatives`, `recommend`)."""
    f = facts(spec, est, can_wait=can_wait, checkpoints=checkpoints)
    rec = recommend(spec, book, f, est.plan[0])
    m = machines(spec, book, est)
    if m is not None and m.cost is not None and m.one_cost is not None and m.one_cost < m.cost:
        rec = replace(rec, reason=f"{rec.reason}. Estimate: {m.verdict()}")
    return Comparison(est, alternatives(spec, book, est, quota), f, rec, machines=m)
