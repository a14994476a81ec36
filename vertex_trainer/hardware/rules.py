"""The rules Vertex AI training enforces on hardware and scheduling, over the catalog's records
(hardware/records.py): machine and accelerator pairs and counts, TPU slices and topologies, N1
GPU limits, Spot / Flex Start (DWS) and the 7-day limit. Each raises SpecError naming the field.

Vertex AI pages the rules follow (dated in catalog/sources.csv):
- Configure compute for custom training: https://cloud.google.com/vertex-ai/docs/training/configure-compute
- Train with TPU VMs: https://cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm
- Flex Start (DWS): https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws
- MachineSpec / AcceleratorType: https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec
"""

from __future__ import annotations

from vertex_trainer.durations import fmt_duration
from vertex_trainer.errors import SpecError
from vertex_trainer.hardware.records import (
    ACCELERATORS,
    FIXED_MACHINES,
    N1_GPU_LIMITS,
    PRESETS,
    TPU_SLICES,
    Machine,
    accelerator_of,
    devices_per_machine,
    known_machine_names,
    machine,
    machines_per_replica,
    slice_machines,
)
from vertex_trainer.suggest import suggest

SEVEN_DAYS = 7 * 24 * 3600
CONFIGURE_COMPUTE = "https://cloud.google.com/vertex-ai/docs/training/configure-compute"


def check_hardware(
    field: str,
    machine_type: str,
    accelerator_type: str | None,
    accelerator_count: int,
    tpu_topology: str | None,
) -> None:
    """Raise SpecError if Vertex AI would refuse this machine/accelerator/count/topology."""
    m = machine(machine_type)
    if m is None:
        near = suggest(machine_type, known_machine_names())
        raise SpecError(
            f"{field}.machine_type",
            f"{machine_type!r} is not a machine type Vertex AI training offers",
            has_value=False,
            hint=(f"did you mean '{near}'? " if near else "")
            + f"see `vertex-trainer hardware` or {CONFIGURE_COMPUTE}",
        )
    if accelerator_type is not None and accelerator_type not in ACCELERATORS:
        near = suggest(accelerator_type, ACCELERATORS)
        raise SpecError(
            f"{field}.accelerator_type",
            f"unknown accelerator type {accelerator_type!r}",
            has_value=False,
            hint=(f"did you mean '{near}'? " if near else "")
            + "allowed: "
            + ", ".join(a.name for a in ACCELERATORS.values() if a.api_enum),
        )
    if accelerator_type is not None and not ACCELERATORS[accelerator_type].api_enum:
        # v5p and v6e: the v1 API has no AcceleratorType value; the machine type implies the TPU.
        implied = [x.name for x in FIXED_MACHINES.values() if accelerator_type in x.accelerators]
        presets = [p.name for p in PRESETS.values() if p.machine_type in implied]
        raise SpecError(
            f"{field}.accelerator_type",
            f"{accelerator_type} is not an AcceleratorType of the v1 API: Vertex AI takes "
            f"{ACCELERATORS[accelerator_type].family} as its machine type ({', '.join(implied)}) "
            "with a tpu_topology",
            has_value=False,
            hint="remove accelerator_type; e.g. hardware: " + ", ".join(presets[:3]),
        )
    slice_machine = m.family == "tpu-slice"
    if accelerator_type and accelerator_count < 1 and not slice_machine:
        raise SpecError(
            f"{field}.accelerator_count",
            f"must be at least 1 when accelerator_type is {accelerator_type}",
            value=accelerator_count,
            hint="set accelerator_count, or remove accelerator_type for a CPU machine",
        )
    if accelerator_count and not accelerator_type and not slice_machine:
        raise SpecError(
            f"{field}.accelerator_type",
            f"accelerator_count is {accelerator_count} but no accelerator_type is set",
            has_value=False,
            hint=_accel_hint(m),
        )
    if slice_machine:
        _check_slice(field, m, accelerator_type, accelerator_count, tpu_topology)
        return
    if tpu_topology:
        families = " and ".join(dict.fromkeys(_family(s) for s in slice_machines()))
        raise SpecError(
            f"{field}.tpu_topology",
            f"only {families} machines "
            f"({', '.join(s.name for s in slice_machines())}) take a topology, not {machine_type}",
            value=tpu_topology,
            hint="remove tpu_topology",
        )
    if m.family == "tpu-board":
        if accelerator_type not in m.accelerators:
            raise SpecError(
                f"{field}.accelerator_type",
                f"{machine_type} takes {' or '.join(m.accelerators)}",
                value=accelerator_type,
                hint="e.g. accelerator_type: TPU_V3, accelerator_count: 8",
            )
        if accelerator_count not in m.counts:
            raise SpecError(
                f"{field}.accelerator_count",
                f"{machine_type} takes exactly {' or '.join(map(str, m.counts))} TPU cores",
                value=accelerator_count,
                hint=f"set accelerator_count: {m.counts[0]}",
            )
        return
    acc = ACCELERATORS.get(accelerator_type or "")
    if acc is not None and acc.kind == "tpu":
        hosts = [x.name for x in FIXED_MACHINES.values() if accelerator_type in x.accelerators]
        tpu_presets = [
            p.name for p in PRESETS.values() if accelerator_of(p.machine_type, p.accelerator_type) == acc
        ]
        raise SpecError(
            f"{field}.accelerator_type",
            f"{accelerator_type} runs on {' or '.join(hosts)} machines, not {machine_type}",
            has_value=False,
            hint="use a preset: " + ", ".join(tpu_presets),
        )

    if m.family == "gpu":  # accelerator-optimized: type and count fixed by the machine
        if accelerator_type is None:
            raise SpecError(
                f"{field}.accelerator_type",
                f"{machine_type} comes with {m.counts[0]} x {m.accelerator}; the accelerator must be given",
                has_value=False,
                hint=f"accelerator_type: {m.accelerator}, accelerator_count: {m.counts[0]}",
            )
        if accelerator_type != m.accelerator:
            raise SpecError(
                f"{field}.accelerator_type",
                f"{machine_type} takes {m.accelerator}, not {accelerator_type}",
                has_value=False,
                hint=_machine_for(accelerator_type, accelerator_count),
            )
        if accelerator_count not in m.counts:
            raise SpecError(
                f"{field}.accelerator_count",
                f"{machine_type} has exactly {m.counts[0]} x {m.accelerator}",
                value=accelerator_count,
                hint=f"set accelerator_count: {m.counts[0]}, or "
                + (_machine_for(accelerator_type, accelerator_count) or "pick another machine"),
            )
        return
    _check_general_purpose(field, m, accelerator_type, accelerator_count)


def _family(m: Machine) -> str:
    """The accelerator family of a machine that implies its accelerator (a TPU slice machine)."""
    assert m.accelerator is not None, m.name  # the catalog's slice machines each name theirs
    return ACCELERATORS[m.accelerator].family


def _check_slice(
    field: str, m: Machine, accelerator_type: str | None, accelerator_count: int, tpu_topology: str | None
) -> None:
    """A TPU slice machine: the machine implies the TPU, the topology the slice."""
    label = _family(m)
    if accelerator_type is not None:
        raise SpecError(
            f"{field}.accelerator_type",
            f"{m.name} is a {label} host: the machine type implies the chips",
            value=accelerator_type,
            hint="remove accelerator_type; give tpu_topology instead",
        )
    if not tpu_topology:
        raise SpecError(
            f"{field}.tpu_topology",
            f"{m.name} needs a tpu_topology",
            has_value=False,
            hint="allowed: " + ", ".join(m.tpu_topologies),
        )
    if tpu_topology not in m.tpu_topologies:
        others = [
            f"{name} ({_family(FIXED_MACHINES[name])})" for (name, topo) in TPU_SLICES if topo == tpu_topology
        ]
        raise SpecError(
            f"{field}.tpu_topology",
            f"{tpu_topology!r} does not match {m.name}",
            has_value=False,
            hint="allowed for this machine: "
            + ", ".join(m.tpu_topologies)
            + (
                f" ({tpu_topology} runs on {', '.join(others)})"
                if others
                else " (or pick the machine that matches the topology)"
            ),
        )
    if accelerator_count not in (0, m.tpu_chips):
        raise SpecError(
            f"{field}.accelerator_count",
            f"{m.name} has {m.tpu_chips} chips per host",
            value=accelerator_count,
            hint=f"remove accelerator_count for {label}",
        )


def _check_general_purpose(
    field: str, m: Machine, accelerator_type: str | None, accelerator_count: int
) -> None:
    """N1 (GPUs within the per-count vCPU/memory ceilings) and CPU-only families."""
    if accelerator_type is None:
        return
    if m.family != "n1":
        raise SpecError(
            f"{field}.accelerator_type",
            f"{m.name} takes no accelerators",
            value=accelerator_type,
            hint=_machine_for(accelerator_type, accelerator_count),
        )
    limits = N1_GPU_LIMITS.get(accelerator_type)
    if limits is None:
        raise SpecError(
            f"{field}.accelerator_type",
            f"{accelerator_type} does not attach to n1 machines",
            has_value=False,
            hint=_machine_for(accelerator_type, accelerator_count),
        )
    if accelerator_count not in limits:
        raise SpecError(
            f"{field}.accelerator_count",
            f"n1 machines take 1 of {sorted(limits)} x {accelerator_type}",
            value=accelerator_count,
            hint="allowed counts: " + ", ".join(map(str, sorted(limits))),
        )
    max_vcpus, max_mem = limits[accelerator_count]
    if m.vcpus and m.vcpus > max_vcpus:
        raise SpecError(
            f"{field}.machine_type",
            f"{m.name} has {m.vcpus} vCPUs; {accelerator_count} x "
            f"{accelerator_type} allows at most {max_vcpus}",
            has_value=False,
            hint=f"use a smaller n1 machine (<= {max_vcpus} vCPUs) or more GPUs",
        )
    if m.memory_gb and m.memory_gb > max_mem:
        raise SpecError(
            f"{field}.machine_type",
            f"{m.name} has {m.memory_gb:g} GB of memory; "
            f"{accelerator_count} x {accelerator_type} allows at most {max_mem:g} GB",
            has_value=False,
            hint="use a machine with less memory or more GPUs",
        )


def _accel_hint(m: Machine) -> str:
    if m.accelerator:
        return f"{m.name} takes accelerator_type: {m.accelerator}"
    return "e.g. accelerator_type: NVIDIA_TESLA_T4"


def _machine_for(accelerator_type: str | None, count: int) -> str:
    """A hint naming the machine type that takes this accelerator and count."""
    gpu_machines = [m for m in FIXED_MACHINES.values() if m.family == "gpu"]
    for m in gpu_machines:
        if m.accelerator == accelerator_type and count in m.counts:
            return f"{count} x {accelerator_type} runs on {m.name}"
    if accelerator_type in N1_GPU_LIMITS:
        return f"{accelerator_type} attaches to n1-standard-* machines"
    names = [m.name for m in gpu_machines if m.accelerator == accelerator_type]
    return f"{accelerator_type} runs on: {', '.join(names)}" if names else ""


def check_scheduling(
    *,
    hardware_field: str,
    machine_type: str,
    accelerator_type: str | None,
    strategy: str,
    max_wait: int | None,
    timeout: int | None,
    restart: bool,
    disable_retries: bool,
    replicas: int,
    tpu_topology: str | None = None,
) -> None:
    """Raise SpecError for scheduling that Vertex AI (or DWS) would refuse."""
    acc = accelerator_of(machine_type, accelerator_type)
    m = machine(machine_type)
    if max_wait is not None and strategy != "flex-start":
        raise SpecError(
            "scheduling.max_wait",
            f"only applies to flex-start, but strategy is {strategy!r}",
            has_value=False,
            hint="remove max_wait, or set scheduling.strategy: flex-start "
            "(or list flex-start in scheduling.fallback)",
        )
    if strategy == "flex-start":
        if acc is None or not acc.flex_start:
            what = acc.name if acc else f"{machine_type} (no GPU)"
            served = ", ".join(a.name for a in ACCELERATORS.values() if a.flex_start)
            raise SpecError(
                "scheduling.strategy",
                f"flex-start (Dynamic Workload Scheduler) does not serve {what}",
                has_value=False,
                hint=f"flex-start serves {served}; use strategy standard or spot here, "
                "or pick e.g. hardware: h100x8",
            )
        if timeout is not None and timeout > SEVEN_DAYS:
            raise SpecError(
                "scheduling.timeout",
                f"flex-start jobs run at most 7 days, got {fmt_duration(timeout)}",
                has_value=False,
                hint="set scheduling.timeout to 7d or less",
            )
    if m is not None and m.spot_or_flex_only and strategy == "standard":
        raise SpecError(
            f"{hardware_field}",
            f"{machine_type} is offered for training only as Spot or Flex Start VMs",
            has_value=False,
            hint="set scheduling.strategy: spot or flex-start, or use hardware: h100x8",
        )
    if restart and disable_retries:
        raise SpecError(
            "scheduling.restart_on_worker_restart",
            "cannot be true when disable_retries is true (Vertex forces it off)",
            has_value=False,
            hint="drop one of the two",
        )
    if m is not None and m.is_tpu and replicas > 1:
        # Vertex runs a TPU slice as one replica and provisions the hosts its topology needs
        # (configure-compute-tpu in catalog/sources.csv): more chips is a larger topology.
        hosts = machines_per_replica(machine_type, tpu_topology)
        want = devices_per_machine(machine_type, accelerator_type, 0, tpu_topology) * replicas
        bigger = sorted(
            (
                p
                for p in PRESETS.values()
                if machines_per_replica(p.machine_type, p.tpu_topology) > hosts
                and accelerator_of(p.machine_type, p.accelerator_type) == acc
            ),
            key=lambda p: abs(devices_per_machine(p.machine_type, None, 0, p.tpu_topology) - want),
        )
        names = [p.name for p in bigger]
        raise SpecError(
            "replicas",
            "a TPU job is one replica on Vertex AI: the slice's topology says how many TPU hosts it gets",
            value=replicas,
            hint=f"set replicas: 1 and pick a larger slice, e.g. hardware: {(names or ['tpu-v5e-16'])[0]}",
        )
