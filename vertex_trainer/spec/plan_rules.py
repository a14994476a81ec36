"""The rules of a spec's capacity plan (spec/attempts.py; docs/contract.md sections 8 and 11).

Each attempt of `attempts(spec)` is checked as what it is: a fallback entry is another attempt than
the ones before it and one its hardware takes; a reservation goes with strategy standard, in the
attempt's region, never on a persistent resource; a persistent resource keeps every attempt in its
region and shape. rules.py runs each of them (`check_fallback`, `check_reservations`,
`check_persistent_resource`) after the hardware is known to be valid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertex_trainer import hardware as hw
from vertex_trainer.errors import SpecError
from vertex_trainer.regions import region_of
from vertex_trainer.spec.attempts import PlannedAttempt, attempts, reservation_zone, zone_region

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import JobSpec


def check_fallback(spec: JobSpec) -> None:
    """scheduling.fallback (docs/contract.md sections 8 and 11): each entry another attempt than
    the ones before it (strategy, region, hardware or reservation differ), each one its hardware
    takes (flex-start: a GPU DWS serves, timeout <= 7d)."""
    s = spec.scheduling
    if not s.fallback:
        return
    hint = "e.g. scheduling: {strategy: flex-start, max_wait: 4h, fallback: [spot, standard]}"
    plan = attempts(spec)

    def shape(a: PlannedAttempt) -> tuple[Any, ...]:
        return (a.region, a.strategy, a.hardware, a.reservation)

    seen = {shape(plan[0]): plan[0]}
    for a, entry in zip(plan[1:], s.fallback, strict=True):
        field = a.field
        named = isinstance(entry, str)
        earlier = seen.get(shape(a))
        if earlier is not None:
            if named and earlier.n == 1:
                raise SpecError(
                    field,
                    f"{entry!r} is already scheduling.strategy: a fallback is another strategy",
                    has_value=False,
                    hint=f"remove it; {hint}",
                )
            if named:
                raise SpecError(
                    field,
                    f"{entry!r} is listed twice",
                    has_value=False,
                    hint="list each strategy once, in the order to try them",
                )
            raise SpecError(
                field,
                f"is the same attempt as attempt {earlier.n} ({a.strategy} in "
                f"{a.region or 'the spec region'} on {a.hardware_name})",
                has_value=False,
                hint="change its strategy, region, hardware or reservation, or remove it",
            )
        seen[shape(a)] = a
        hw_field = "hardware" if isinstance(entry, str) or entry.hardware is None else f"{field}.hardware"
        if hw_field != "hardware":
            h = a.hardware
            hw.check_hardware(
                hw_field, h.machine_type, h.accelerator_type, h.accelerator_count, h.tpu_topology
            )
            if (spec.boot_disk.type or "").startswith("pd-") and hw.boots_from_hyperdisk(h.machine_type):
                raise SpecError(
                    hw_field,
                    f"{h.machine_type} boots only from hyperdisk-balanced, and "
                    f"boot_disk.type is {spec.boot_disk.type}",
                    has_value=False,
                    hint="remove boot_disk.type (each attempt's machine then boots from "
                    "its own default disk), or pick other hardware for this entry",
                )
            # script jobs (issue 32): a job without trainer: has no global batch to split
            batch = spec.trainer.batch_size if spec.trainer else None
            devices = spec.replicas * h.devices
            if batch is not None and batch % devices:
                raise SpecError(
                    hw_field,
                    f"{a.hardware_name} has {devices} "
                    f"{hw.device_noun(h.machine_type, h.accelerator_type)}s (one data-parallel "
                    f"replica each), and the global batch {batch} does not split evenly over them",
                    has_value=False,
                    hint="use a batch that is a multiple of every attempt's device count, or "
                    "hardware with the same number of devices",
                )
        try:
            hw.check_scheduling(
                hardware_field=hw_field,
                machine_type=a.hardware.machine_type,
                accelerator_type=a.hardware.accelerator_type,
                strategy=a.strategy,
                max_wait=s.max_wait if a.strategy == "flex-start" else None,
                timeout=s.timeout,
                restart=False,
                disable_retries=False,
                replicas=1 if hw_field == "hardware" else spec.replicas,
            )
        except SpecError as e:
            message = e.message.split("\n")[0].removeprefix(f"{e.field}: ")
            raise SpecError(
                field, f"the fallback {a.strategy!r}: {message}", has_value=False, hint=e.hint
            ) from None
    if spec.tune is not None:
        raise SpecError(
            "scheduling.fallback",
            "is not supported with tune: (each trial is a job of the tuning job, not a submit of ours)",
            has_value=False,
            hint="remove scheduling.fallback, or submit the job without tune:",
        )


def check_reservations(spec: JobSpec) -> None:
    """scheduling.reservation (and a fallback entry's own, docs/contract.md section 11).

    What Vertex AI training accepts with a reservation (read 2026-12-01):
    - Flex Start (Dynamic Workload Scheduler) and persistent resources are not supported with
      Compute Engine reservations ("Use reservations with training", limitations:
      https://cloud.google.com/vertex-ai/docs/training/use-reservations).
    - Spot VMs do not consume reservations: a reservation holds standard capacity (Compute
      Engine reservations serve on-demand VMs; SkyPilot skips reservations for Spot for the same
      reason, skypilot-org/skypilot#2393).
    - The reservation is zonal and must lie in the job's region; its VM shape must match the
      job's exactly (machine type, accelerators), which only the service can check.
    So a reservation goes with strategy standard only, and never with persistent_resource."""
    for a in attempts(spec):
        if a.reservation is None:
            continue
        entry = (spec.scheduling.fallback or ())[a.n - 2] if a.n > 1 else None
        inherited = entry is not None and (isinstance(entry, str) or entry.reservation is None)
        field = "scheduling.reservation" if a.n == 1 else a.field if inherited else f"{a.field}.reservation"
        drop = (
            "; or give this entry reservation: none (it inherits scheduling.reservation)" if inherited else ""
        )
        if a.strategy != "standard":
            why = (
                "Flex Start (Dynamic Workload Scheduler) does not consume reservations"
                if a.strategy == "flex-start"
                else "Spot VMs do not consume reservations"
            )
            raise SpecError(
                field,
                f"{a.describe()} uses a reservation with strategy {a.strategy}: {why}",
                has_value=False,
                hint=f"use strategy standard with a reservation{drop}",
            )
        if spec.persistent_resource:
            raise SpecError(
                field,
                "a job on a persistent_resource cannot also consume a reservation "
                "(the persistent resource holds the machines)",
                has_value=False,
                hint="remove scheduling.reservation, or persistent_resource",
            )
        zone = reservation_zone(a.reservation)
        if zone and a.region and zone_region(zone) != a.region:
            raise SpecError(
                field,
                f"{a.describe()}: the reservation is in zone {zone}, outside the attempt's region {a.region}",
                has_value=False,
                hint=f"use a reservation in a zone of {a.region} ({a.region}-a, -b, ...), "
                f"or run the attempt in {zone_region(zone)}{drop}",
            )


def check_persistent_resource(spec: JobSpec) -> None:
    """persistent_resource: in the job's region, one region and one machine shape for every
    attempt (the resource's pools are fixed), no Flex Start (docs/contract.md section 11)."""
    name = spec.persistent_resource
    if not name:
        return
    if name.startswith("projects/"):
        where = region_of(name)
        if spec.region and where != spec.region:
            raise SpecError(
                "persistent_resource",
                f"the persistent resource is in {where}, the job in {spec.region}",
                has_value=False,
                hint="a job runs on a persistent resource of its own region: set region: "
                f"{where}, or use a resource in {spec.region}",
            )
    for a in attempts(spec):
        if a.n > 1 and (a.region != spec.region or a.hardware != spec.hardware):
            raise SpecError(
                a.field,
                "moves to another region or hardware, but the job runs on "
                "persistent_resource (its machines are in one region, one shape per pool)",
                has_value=False,
                hint="drop the entry's region and hardware, or remove persistent_resource",
            )
        if a.strategy == "flex-start":
            raise SpecError(
                "scheduling.strategy" if a.n == 1 else a.field,
                "flex-start does not apply to a job on a persistent_resource (its machines already exist)",
                has_value=False,
                hint="use strategy standard on a persistent resource",
            )
