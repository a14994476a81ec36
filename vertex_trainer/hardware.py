"""The hardware catalog (data) and the rules Vertex AI enforces on it (validation).

Sources (Vertex AI documentation, checked 2026-11):
- Configure compute resources for custom training:
  https://cloud.google.com/vertex-ai/docs/training/configure-compute
  (machine types, accelerator types and the counts each machine allows; n1 vCPU limits per GPU)
- GPU machine types (Compute Engine): https://cloud.google.com/compute/docs/gpus
- Train with TPU VMs: https://cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm
- Flex Start (Dynamic Workload Scheduler) for training:
  https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws
- Spot VMs for training: https://cloud.google.com/vertex-ai/docs/training/use-spot-vms
- AcceleratorType enum: https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec

Everything here is plain data and pure functions: no I/O, no heavy imports.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from vertex_trainer.errors import SpecError
from vertex_trainer.suggest import suggest  # the "did you mean" ranking (a leaf)

SEVEN_DAYS = 7 * 24 * 3600


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type as Vertex names it (the AcceleratorType enum name)."""

    name: str
    kind: str  # "gpu" | "tpu"
    memory_gb: int  # per GPU, or per TPU chip/board as sold
    precision: str  # the trainer's `auto` choice on this device
    flex_start: bool  # served by Dynamic Workload Scheduler (Flex Start)
    label: str


# compute capability >= 8.0 (A100, L4, H100, H200, B200) and TPUs: bfloat16; V100/T4/P100: fp16.
ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in [
        Accelerator("NVIDIA_TESLA_T4", "gpu", 16, "mixed_float16", False, "NVIDIA T4"),
        Accelerator("NVIDIA_TESLA_P4", "gpu", 8, "float32", False, "NVIDIA P4"),
        Accelerator("NVIDIA_TESLA_P100", "gpu", 16, "mixed_float16", False, "NVIDIA P100"),
        Accelerator("NVIDIA_TESLA_V100", "gpu", 16, "mixed_float16", False, "NVIDIA V100"),
        Accelerator("NVIDIA_L4", "gpu", 24, "mixed_bfloat16", True, "NVIDIA L4"),
        Accelerator("NVIDIA_TESLA_A100", "gpu", 40, "mixed_bfloat16", True, "NVIDIA A100 40GB"),
        Accelerator("NVIDIA_A100_80GB", "gpu", 80, "mixed_bfloat16", True, "NVIDIA A100 80GB"),
        Accelerator("NVIDIA_H100_80GB", "gpu", 80, "mixed_bfloat16", True, "NVIDIA H100 80GB"),
        Accelerator("NVIDIA_H100_MEGA_80GB", "gpu", 80, "mixed_bfloat16", True, "NVIDIA H100 Mega 80GB"),
        Accelerator("NVIDIA_H200_141GB", "gpu", 141, "mixed_bfloat16", True, "NVIDIA H200 141GB"),
        Accelerator("NVIDIA_B200", "gpu", 180, "mixed_bfloat16", True, "NVIDIA B200"),
        Accelerator("TPU_V2", "tpu", 8, "mixed_bfloat16", False, "TPU v2 (per core)"),
        Accelerator("TPU_V3", "tpu", 16, "mixed_bfloat16", False, "TPU v3 (per core)"),
        Accelerator("TPU_V5_LITEPOD", "tpu", 16, "mixed_bfloat16", False, "TPU v5e (per chip)"),
    ]
}


@dataclass(frozen=True)
class Machine:
    """A machine type with the accelerators it takes.

    `counts` lists the accelerator counts Vertex accepts (empty: CPU only). For TPU v5e machines
    `tpu_chips` is the chips per host and `accelerator` is implied by the machine type (Vertex takes
    no accelerator_type there, only a topology).
    """

    name: str
    accelerator: str | None = None
    counts: tuple[int, ...] = ()
    vcpus: int | None = None
    memory_gb: float | None = None
    tpu_chips: int = 0
    tpu_topologies: tuple[str, ...] = ()
    spot_or_flex_only: bool = False

    @property
    def is_tpu(self) -> bool:
        return self.tpu_chips > 0 or self.name == "cloud-tpu"


def _m(name, acc, counts, vcpus, mem, **kw) -> Machine:
    return Machine(name, acc, tuple(counts), vcpus, mem, **kw)


# Accelerator-optimized families: the accelerator and count are fixed by the machine type.
_FIXED: list[Machine] = [
    _m("a2-highgpu-1g", "NVIDIA_TESLA_A100", [1], 12, 85),
    _m("a2-highgpu-2g", "NVIDIA_TESLA_A100", [2], 24, 170),
    _m("a2-highgpu-4g", "NVIDIA_TESLA_A100", [4], 48, 340),
    _m("a2-highgpu-8g", "NVIDIA_TESLA_A100", [8], 96, 680),
    _m("a2-megagpu-16g", "NVIDIA_TESLA_A100", [16], 96, 1360),
    _m("a2-ultragpu-1g", "NVIDIA_A100_80GB", [1], 12, 170),
    _m("a2-ultragpu-2g", "NVIDIA_A100_80GB", [2], 24, 340),
    _m("a2-ultragpu-4g", "NVIDIA_A100_80GB", [4], 48, 680),
    _m("a2-ultragpu-8g", "NVIDIA_A100_80GB", [8], 96, 1360),
    # Smaller A3 High shapes are served to training only as Spot or Flex Start VMs.
    _m("a3-highgpu-1g", "NVIDIA_H100_80GB", [1], 26, 234, spot_or_flex_only=True),
    _m("a3-highgpu-2g", "NVIDIA_H100_80GB", [2], 52, 468, spot_or_flex_only=True),
    _m("a3-highgpu-4g", "NVIDIA_H100_80GB", [4], 104, 936, spot_or_flex_only=True),
    _m("a3-highgpu-8g", "NVIDIA_H100_80GB", [8], 208, 1872),
    _m("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", [8], 208, 1872),
    _m("a3-ultragpu-8g", "NVIDIA_H200_141GB", [8], 224, 2952),
    _m("a4-highgpu-8g", "NVIDIA_B200", [8], 224, 3968),
    _m("g2-standard-4", "NVIDIA_L4", [1], 4, 16),
    _m("g2-standard-8", "NVIDIA_L4", [1], 8, 32),
    _m("g2-standard-12", "NVIDIA_L4", [1], 12, 48),
    _m("g2-standard-16", "NVIDIA_L4", [1], 16, 64),
    _m("g2-standard-24", "NVIDIA_L4", [2], 24, 96),
    _m("g2-standard-32", "NVIDIA_L4", [1], 32, 128),
    _m("g2-standard-48", "NVIDIA_L4", [4], 48, 192),
    _m("g2-standard-96", "NVIDIA_L4", [8], 96, 384),
    # TPU v2/v3 (one 8-core board) and TPU v5e hosts.
    _m("cloud-tpu", None, [8], None, None),
    _m("ct5lp-hightpu-1t", "TPU_V5_LITEPOD", [], 24, 48, tpu_chips=1, tpu_topologies=("1x1",)),
    _m("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", [], 112, 192, tpu_chips=4, tpu_topologies=("2x2",)),
    _m("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", [], 224, 384, tpu_chips=8, tpu_topologies=("2x4",)),
]
FIXED_MACHINES: dict[str, Machine] = {m.name: m for m in _FIXED}

# N1 machines take T4/P4/P100/V100: allowed counts, and the vCPU / memory ceiling per count.
N1_GPU_LIMITS: dict[str, dict[int, tuple[int, float]]] = {
    "NVIDIA_TESLA_T4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
    "NVIDIA_TESLA_P4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "NVIDIA_TESLA_P100": {1: (16, 104), 2: (32, 208), 4: (64, 416)},
    "NVIDIA_TESLA_V100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
}
_N1 = re.compile(r"^n1-(standard|highmem|highcpu)-(1|2|4|8|16|32|64|96)$")
_N1_MEM_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
# General-purpose CPU families Vertex training accepts (no accelerators).
_CPU_FAMILIES = re.compile(
    r"^(e2-(standard|highmem|highcpu)|n2d?-(standard|highmem|highcpu)|c2d?-(standard|highmem|highcpu)"
    r"|c3-(standard|highmem|highcpu)|m1-ultramem)-\d+$"
)


def machine(name: str) -> Machine | None:
    """Look up a machine type; None if Vertex training does not offer it."""
    if name in FIXED_MACHINES:
        return FIXED_MACHINES[name]
    m = _N1.match(name)
    if m:
        vcpus = int(m.group(2))
        return Machine(name, None, (), vcpus, vcpus * _N1_MEM_PER_VCPU[m.group(1)])
    if _CPU_FAMILIES.match(name):
        return Machine(name, None, (), int(name.rsplit("-", 1)[1]), None)
    return None


def known_machine_names() -> list[str]:
    names = list(FIXED_MACHINES)
    names += [f"n1-{k}-{n}" for k in _N1_MEM_PER_VCPU for n in (4, 8, 16, 32, 64, 96)]
    names += [f"e2-standard-{n}" for n in (4, 8, 16, 32)] + [f"n2-standard-{n}" for n in (4, 8, 16, 32)]
    return names


@dataclass(frozen=True)
class Preset:
    """A named hardware shape: `hardware: h100x8` in a spec."""

    name: str
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0
    tpu_topology: str | None = None

    def as_hardware(self) -> dict:
        d = {"machine_type": self.machine_type}
        if self.accelerator_type:
            d["accelerator_type"] = self.accelerator_type
            d["accelerator_count"] = self.accelerator_count
        if self.tpu_topology:
            d["tpu_topology"] = self.tpu_topology
        return d


def _gpu(name, machine_type, acc, count) -> Preset:
    return Preset(name, machine_type, acc, count)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset("cpu", "n1-standard-8"),
        Preset("cpu-small", "n1-standard-4"),
        _gpu("t4x1", "n1-standard-8", "NVIDIA_TESLA_T4", 1),
        _gpu("t4x2", "n1-standard-16", "NVIDIA_TESLA_T4", 2),
        _gpu("t4x4", "n1-standard-32", "NVIDIA_TESLA_T4", 4),
        _gpu("l4x1", "g2-standard-8", "NVIDIA_L4", 1),
        _gpu("l4x2", "g2-standard-24", "NVIDIA_L4", 2),
        _gpu("l4x4", "g2-standard-48", "NVIDIA_L4", 4),
        _gpu("l4x8", "g2-standard-96", "NVIDIA_L4", 8),
        _gpu("v100x1", "n1-standard-8", "NVIDIA_TESLA_V100", 1),
        _gpu("v100x2", "n1-standard-16", "NVIDIA_TESLA_V100", 2),
        _gpu("v100x4", "n1-standard-32", "NVIDIA_TESLA_V100", 4),
        _gpu("v100x8", "n1-standard-64", "NVIDIA_TESLA_V100", 8),
        _gpu("a100x1", "a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
        _gpu("a100x2", "a2-highgpu-2g", "NVIDIA_TESLA_A100", 2),
        _gpu("a100x4", "a2-highgpu-4g", "NVIDIA_TESLA_A100", 4),
        _gpu("a100x8", "a2-highgpu-8g", "NVIDIA_TESLA_A100", 8),
        _gpu("a100x16", "a2-megagpu-16g", "NVIDIA_TESLA_A100", 16),
        _gpu("a100-80gbx1", "a2-ultragpu-1g", "NVIDIA_A100_80GB", 1),
        _gpu("a100-80gbx2", "a2-ultragpu-2g", "NVIDIA_A100_80GB", 2),
        _gpu("a100-80gbx4", "a2-ultragpu-4g", "NVIDIA_A100_80GB", 4),
        _gpu("a100-80gbx8", "a2-ultragpu-8g", "NVIDIA_A100_80GB", 8),
        _gpu("h100x1", "a3-highgpu-1g", "NVIDIA_H100_80GB", 1),
        _gpu("h100x2", "a3-highgpu-2g", "NVIDIA_H100_80GB", 2),
        _gpu("h100x4", "a3-highgpu-4g", "NVIDIA_H100_80GB", 4),
        _gpu("h100x8", "a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
        _gpu("h100-megax8", "a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        _gpu("h200x8", "a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
        _gpu("b200x8", "a4-highgpu-8g", "NVIDIA_B200", 8),
        Preset("tpu-v5e-1", "ct5lp-hightpu-1t", tpu_topology="1x1"),
        Preset("tpu-v5e-4", "ct5lp-hightpu-4t", tpu_topology="2x2"),
        Preset("tpu-v5e-8", "ct5lp-hightpu-8t", tpu_topology="2x4"),
        _gpu("tpu-v3-8", "cloud-tpu", "TPU_V3", 8),
        _gpu("tpu-v2-8", "cloud-tpu", "TPU_V2", 8),
    ]
}


def resolve_preset(name: str, field: str = "hardware") -> dict:
    """A preset name -> the explicit hardware mapping, or a SpecError with a suggestion."""
    preset = PRESETS.get(name)
    if preset is None:
        near = suggest(name, PRESETS)
        hint = f"did you mean '{near}'? " if near else ""
        raise SpecError(
            field, f"unknown hardware preset {name!r}", has_value=False,
            hint=hint + "run `vertex-trainer hardware` for the list, or give "
            "{machine_type: ..., accelerator_type: ..., accelerator_count: ...}",
        )
    return preset.as_hardware()


def preset_for(machine_type: str, accelerator_type: str | None, count: int,
               topology: str | None) -> str | None:
    """The preset name matching an explicit hardware mapping, if any."""
    for p in PRESETS.values():
        if (p.machine_type, p.accelerator_type, p.accelerator_count or 0, p.tpu_topology) == (
            machine_type, accelerator_type, count or 0, topology):
            return p.name
    return None


def accelerator_of(machine_type: str, accelerator_type: str | None) -> Accelerator | None:
    """The accelerator a machine runs on (explicit type, or implied by a TPU v5e machine)."""
    if accelerator_type:
        return ACCELERATORS.get(accelerator_type)
    m = machine(machine_type)
    if m is not None and m.accelerator:
        return ACCELERATORS[m.accelerator]
    return None


def boots_from_hyperdisk(machine_type: str) -> bool:
    """A3 Ultra and A4 machines boot only from Hyperdisk (hyperdisk-balanced)."""
    return machine_type.startswith(("a3-ultragpu-", "a4-"))


def accelerator_kind(machine_type: str, accelerator_type: str | None) -> str:
    """"tpu", "gpu" or "cpu": what the machine computes on."""
    m = machine(machine_type)
    if m is not None and m.is_tpu:
        return "tpu"
    acc = accelerator_of(machine_type, accelerator_type)
    return acc.kind if acc else "cpu"


def default_precision(machine_type: str, accelerator_type: str | None) -> str:
    acc = accelerator_of(machine_type, accelerator_type)
    return acc.precision if acc else "float32"


def devices_per_machine(machine_type: str, accelerator_type: str | None, count: int,
                        topology: str | None) -> int:
    """How many replicas (data-parallel devices) one machine contributes."""
    m = machine(machine_type)
    if m is not None and m.tpu_chips:
        return _topology_chips(topology) if topology else m.tpu_chips
    return max(count or 0, 1)


def _topology_chips(topology: str) -> int:
    return math.prod(int(x) for x in topology.split("x"))


def check_hardware(field: str, machine_type: str, accelerator_type: str | None,
                   accelerator_count: int, tpu_topology: str | None) -> None:
    """Raise SpecError if Vertex AI would refuse this machine/accelerator/count/topology."""
    m = machine(machine_type)
    if m is None:
        near = suggest(machine_type, known_machine_names())
        raise SpecError(
            f"{field}.machine_type", f"{machine_type!r} is not a machine type Vertex AI training offers",
            has_value=False,
            hint=(f"did you mean '{near}'? " if near else "")
            + "see `vertex-trainer hardware` or https://cloud.google.com/vertex-ai/docs/training/configure-compute",
        )
    if accelerator_type is not None and accelerator_type not in ACCELERATORS:
        near = suggest(accelerator_type, ACCELERATORS)
        raise SpecError(
            f"{field}.accelerator_type", f"unknown accelerator type {accelerator_type!r}", has_value=False,
            hint=(f"did you mean '{near}'? " if near else "") + "allowed: " + ", ".join(ACCELERATORS),
        )
    if accelerator_type and accelerator_count < 1 and not m.tpu_chips:
        raise SpecError(
            f"{field}.accelerator_count", f"must be at least 1 when accelerator_type is {accelerator_type}",
            value=accelerator_count, hint="set accelerator_count, or remove accelerator_type for a CPU machine",
        )
    if accelerator_count and not accelerator_type and not m.tpu_chips:
        raise SpecError(
            f"{field}.accelerator_type", f"accelerator_count is {accelerator_count} but no accelerator_type is set",
            has_value=False, hint=_accel_hint(m),
        )

    if m.tpu_chips:  # TPU v5e: the topology says it all
        if accelerator_type is not None:
            raise SpecError(f"{field}.accelerator_type",
                            f"{machine_type} is a TPU v5e host: the machine type implies the chips",
                            value=accelerator_type, hint="remove accelerator_type; give tpu_topology instead")
        if not tpu_topology:
            raise SpecError(f"{field}.tpu_topology", f"{machine_type} needs a tpu_topology", has_value=False,
                            hint="allowed: " + ", ".join(m.tpu_topologies))
        if tpu_topology not in m.tpu_topologies:
            raise SpecError(f"{field}.tpu_topology", f"{tpu_topology!r} does not match {machine_type}",
                            has_value=False, hint="allowed for this machine: " + ", ".join(m.tpu_topologies)
                            + " (or pick the machine that matches the topology)")
        if accelerator_count not in (0, m.tpu_chips):
            raise SpecError(f"{field}.accelerator_count", f"{machine_type} has {m.tpu_chips} chips",
                            value=accelerator_count, hint="remove accelerator_count for TPU v5e")
        return
    if tpu_topology:
        raise SpecError(f"{field}.tpu_topology", f"only TPU v5e machines (ct5lp-hightpu-*) take a topology, "
                        f"not {machine_type}", value=tpu_topology, hint="remove tpu_topology")

    if m.name == "cloud-tpu":
        if accelerator_type not in ("TPU_V2", "TPU_V3"):
            raise SpecError(f"{field}.accelerator_type", "cloud-tpu takes TPU_V2 or TPU_V3",
                            value=accelerator_type, hint="e.g. accelerator_type: TPU_V3, accelerator_count: 8")
        if accelerator_count != 8:
            raise SpecError(f"{field}.accelerator_count", "cloud-tpu takes exactly 8 TPU cores",
                            value=accelerator_count, hint="set accelerator_count: 8")
        return
    if accelerator_type in ("TPU_V2", "TPU_V3", "TPU_V5_LITEPOD"):
        raise SpecError(f"{field}.accelerator_type", f"{accelerator_type} runs on cloud-tpu or ct5lp-hightpu-* "
                        f"machines, not {machine_type}", has_value=False,
                        hint="use a preset: tpu-v3-8, tpu-v2-8, tpu-v5e-1/-4/-8")

    if m.accelerator:  # accelerator-optimized: type and count fixed by the machine
        if accelerator_type is None:
            raise SpecError(f"{field}.accelerator_type", f"{machine_type} comes with {m.counts[0]} x "
                            f"{m.accelerator}; the accelerator must be given", has_value=False,
                            hint=f"accelerator_type: {m.accelerator}, accelerator_count: {m.counts[0]}")
        if accelerator_type != m.accelerator:
            raise SpecError(f"{field}.accelerator_type", f"{machine_type} takes {m.accelerator}, "
                            f"not {accelerator_type}", has_value=False,
                            hint=_machine_for(accelerator_type, accelerator_count))
        if accelerator_count not in m.counts:
            raise SpecError(f"{field}.accelerator_count", f"{machine_type} has exactly {m.counts[0]} x "
                            f"{m.accelerator}", value=accelerator_count,
                            hint=f"set accelerator_count: {m.counts[0]}, or "
                            + (_machine_for(accelerator_type, accelerator_count) or "pick another machine"))
        return

    # N1 (and other general-purpose) machines.
    if accelerator_type is None:
        return
    if not machine_type.startswith("n1-"):
        raise SpecError(f"{field}.accelerator_type", f"{machine_type} takes no accelerators",
                        value=accelerator_type, hint=_machine_for(accelerator_type, accelerator_count))
    limits = N1_GPU_LIMITS.get(accelerator_type)
    if limits is None:
        raise SpecError(f"{field}.accelerator_type", f"{accelerator_type} does not attach to n1 machines",
                        has_value=False, hint=_machine_for(accelerator_type, accelerator_count))
    if accelerator_count not in limits:
        raise SpecError(f"{field}.accelerator_count", f"n1 machines take 1 of {sorted(limits)} x "
                        f"{accelerator_type}", value=accelerator_count,
                        hint="allowed counts: " + ", ".join(map(str, sorted(limits))))
    max_vcpus, max_mem = limits[accelerator_count]
    if m.vcpus and m.vcpus > max_vcpus:
        raise SpecError(f"{field}.machine_type", f"{machine_type} has {m.vcpus} vCPUs; {accelerator_count} x "
                        f"{accelerator_type} allows at most {max_vcpus}", has_value=False,
                        hint=f"use a smaller n1 machine (<= {max_vcpus} vCPUs) or more GPUs")
    if m.memory_gb and m.memory_gb > max_mem:
        raise SpecError(f"{field}.machine_type", f"{machine_type} has {m.memory_gb:g} GB of memory; "
                        f"{accelerator_count} x {accelerator_type} allows at most {max_mem:g} GB",
                        has_value=False, hint="use a machine with less memory or more GPUs")


def _accel_hint(m: Machine) -> str:
    if m.accelerator:
        return f"{m.name} takes accelerator_type: {m.accelerator}"
    return "e.g. accelerator_type: NVIDIA_TESLA_T4"


def _machine_for(accelerator_type: str | None, count: int) -> str:
    """A hint naming the machine type that takes this accelerator and count."""
    for m in FIXED_MACHINES.values():
        if m.accelerator == accelerator_type and count in m.counts:
            return f"{count} x {accelerator_type} runs on {m.name}"
    if accelerator_type in N1_GPU_LIMITS:
        return f"{accelerator_type} attaches to n1-standard-* machines"
    machines = [m.name for m in FIXED_MACHINES.values() if m.accelerator == accelerator_type]
    return f"{accelerator_type} runs on: {', '.join(machines)}" if machines else ""


def check_scheduling(*, hardware_field: str, machine_type: str, accelerator_type: str | None,
                     strategy: str, max_wait: int | None, timeout: int | None,
                     restart: bool, disable_retries: bool, replicas: int) -> None:
    """Raise SpecError for scheduling that Vertex AI (or DWS) would refuse."""
    acc = accelerator_of(machine_type, accelerator_type)
    m = machine(machine_type)
    if max_wait is not None and strategy != "flex-start":
        raise SpecError("scheduling.max_wait", f"only applies to flex-start, but strategy is {strategy!r}",
                        has_value=False, hint="remove max_wait, or set scheduling.strategy: flex-start "
                        "(or list flex-start in scheduling.fallback)")
    if strategy == "flex-start":
        if acc is None or not acc.flex_start:
            what = acc.name if acc else f"{machine_type} (no GPU)"
            raise SpecError(
                "scheduling.strategy",
                f"flex-start (Dynamic Workload Scheduler) does not serve {what}", has_value=False,
                hint="flex-start serves L4, A100, H100, H200 and B200 GPUs; use strategy standard or spot here,"
                " or pick e.g. hardware: h100x8",
            )
        if timeout is not None and timeout > SEVEN_DAYS:
            raise SpecError("scheduling.timeout", f"flex-start jobs run at most 7 days, got {fmt_duration(timeout)}",
                            has_value=False, hint="set scheduling.timeout to 7d or less")
    if m is not None and m.spot_or_flex_only and strategy == "standard":
        raise SpecError(
            f"{hardware_field}", f"{machine_type} is offered for training only as Spot or Flex Start VMs",
            has_value=False, hint="set scheduling.strategy: spot or flex-start, or use hardware: h100x8",
        )
    if restart and disable_retries:
        raise SpecError("scheduling.restart_on_worker_restart",
                        "cannot be true when disable_retries is true (Vertex forces it off)", has_value=False,
                        hint="drop one of the two")
    if m is not None and m.is_tpu and replicas > 1:
        raise SpecError("replicas", "multi-host TPU jobs are not supported yet: one TPU host per job",
                        value=replicas, hint="set replicas: 1 and pick a larger TPU host (e.g. tpu-v5e-8)")


_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(value) -> int:
    """'90s', '30m', '4h', '2d', '1h30m', plain seconds (int or digits), 0 -> seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like 90s, 30m, 4h, 2d")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    text = str(value).strip().lower()
    if text.isdigit():
        return int(text)
    m = _DURATION.match(text)
    if not text or m is None or not any(m.groups()):
        raise ValueError(f"invalid duration {value!r}; use 90s, 30m, 4h, 2d, 1h30m or a number of seconds")
    d, h, mi, s = (int(g or 0) for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def fmt_duration(seconds: int) -> str:
    """3600 -> '1h', 5400 -> '1h30m', 0 -> '0s'."""
    if seconds == 0:
        return "0s"
    out, rest = "", seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out


def catalog_rows() -> list[dict]:
    """One row per preset, for `vertex-trainer hardware`."""
    rows = []
    for p in PRESETS.values():
        m = machine(p.machine_type)
        acc = accelerator_of(p.machine_type, p.accelerator_type)
        count = p.accelerator_count or (m.tpu_chips if m and m.tpu_chips else 0)
        rows.append({
            "preset": p.name,
            "machine_type": p.machine_type,
            "accelerator_type": acc.name if acc else None,
            "accelerator_count": count,
            "tpu_topology": p.tpu_topology,
            "accelerator_memory_gb": acc.memory_gb * count if acc else 0,
            "vcpus": m.vcpus if m else None,
            "memory_gb": m.memory_gb if m else None,
            "flex_start": bool(acc and acc.flex_start),
            "spot_or_flex_only": bool(m and m.spot_or_flex_only),
            "default_precision": acc.precision if acc else "float32",
        })
    return rows
