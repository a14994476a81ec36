"""The rules Vertex AI training enforces on hardware, over the hardware catalog (data).

The catalog is data: vertex_trainer/catalog/*.csv (machines, accelerators, TPU topologies, N1 GPU
limits, CPU families, presets), every row naming its sources (catalog/sources.csv: URL and the
date it was read). This module loads the tables once and holds the rules that read them; see
docs/spec-and-hardware.md, "The catalog", for the public API other layers use (cost, capacity):
`machine(name)`, `accelerator(name)`, `accelerators()`, `presets()`, `tpu_slice(...)`.

Vertex AI pages the rules follow (dated in sources.csv):
- Configure compute for custom training: https://cloud.google.com/vertex-ai/docs/training/configure-compute
- Train with TPU VMs: https://cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm
- Flex Start (DWS): https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws
- MachineSpec / AcceleratorType: https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec

Plain records and pure functions: no network, no heavy imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vertex_trainer import catalog
from vertex_trainer.durations import fmt_duration
from vertex_trainer.errors import SpecError
from vertex_trainer.suggest import suggest  # the "did you mean" ranking (a leaf)

SEVEN_DAYS = 7 * 24 * 3600
CONFIGURE_COMPUTE = "https://cloud.google.com/vertex-ai/docs/training/configure-compute"


def _sources(ids: str) -> tuple[str, ...]:
    return tuple(s.url for s in catalog.cited(ids))


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type as Vertex names it (the AcceleratorType enum name).

    `training` is "offered" when a Vertex AI training page lists it, "unconfirmed" when only the
    API enum and Compute Engine / GKE pages name it. `source` holds ids of catalog/sources.csv.
    """

    name: str
    kind: str  # "gpu" | "tpu"
    memory_gb: int  # per GPU, or per TPU chip/core as sold
    precision: str  # the trainer's `auto` choice on this device
    flex_start: bool  # served by Dynamic Workload Scheduler (Flex Start)
    label: str
    quota_metric: str = ""
    training: str = "offered"
    source: str = ""

    @property
    def family(self) -> str:
        """The label without its per-unit note: "TPU v5e (per chip)" -> "TPU v5e"."""
        return self.label.split(" (")[0]

    @property
    def sources(self) -> tuple[str, ...]:
        """The URLs this row was read from."""
        return _sources(self.source)


@dataclass(frozen=True)
class Machine:
    """A machine type with the accelerators it takes.

    `counts` lists the accelerator counts Vertex accepts (empty: CPU only). `family` is "gpu"
    (accelerator fixed by the machine), "tpu-board" (cloud-tpu), "tpu-slice" (the machine implies
    the TPU, `tpu_chips` per VM, the slice given by a topology), "n1" or "cpu".
    """

    name: str
    accelerator: str | None = None
    counts: tuple[int, ...] = ()
    vcpus: int | None = None
    memory_gb: float | None = None
    tpu_chips: int = 0
    tpu_topologies: tuple[str, ...] = ()
    spot_or_flex_only: bool = False
    family: str = "cpu"
    accelerators: tuple[str, ...] = ()  # every accelerator type the machine takes
    boot_disk: str = "pd"  # "hyperdisk": boots only from Hyperdisk
    arch: str = "amd64"  # the CPU architecture the image must be built for
    source: str = ""

    @property
    def is_tpu(self) -> bool:
        return self.family in ("tpu-board", "tpu-slice")

    @property
    def sources(self) -> tuple[str, ...]:
        """The URLs this row was read from."""
        return _sources(self.source)


@dataclass(frozen=True)
class TpuSlice:
    """A TPU slice Vertex provisions for (machine type, topology): its chips and TPU VMs."""

    machine_type: str
    topology: str
    chips: int
    hosts: int
    source: str = ""


@dataclass(frozen=True)
class Preset:
    """A named hardware shape: `hardware: h100x8` in a spec."""

    name: str
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0
    tpu_topology: str | None = None
    source: str = ""

    def as_hardware(self) -> dict:
        d = {"machine_type": self.machine_type}
        if self.accelerator_type:
            d["accelerator_type"] = self.accelerator_type
            d["accelerator_count"] = self.accelerator_count
        if self.tpu_topology:
            d["tpu_topology"] = self.tpu_topology
        return d


def _int(text: str) -> int | None:
    return int(text) if text else None


def _num(text: str) -> float | None:
    return float(text) if text else None


ACCELERATORS: dict[str, Accelerator] = {
    r["name"]: Accelerator(
        r["name"],
        r["kind"],
        int(r["memory_gb"]),
        r["precision"],
        r["flex_start"] == "yes",
        r["label"],
        r["quota_metric"],
        r["training"],
        r["source"],
    )
    for r in catalog.table("accelerators")
}
TPU_SLICES: dict[tuple[str, str], TpuSlice] = {
    (r["machine_type"], r["topology"]): TpuSlice(
        r["machine_type"], r["topology"], int(r["chips"]), int(r["hosts"]), r["source"]
    )
    for r in catalog.table("tpu_topologies")
}


def _machine(r: dict) -> Machine:
    accs = catalog.words(r["accelerator"])
    return Machine(
        r["name"],
        accs[0] if len(accs) == 1 else None,
        tuple(int(c) for c in catalog.words(r["counts"])),
        _int(r["vcpus"]),
        _num(r["memory_gb"]),
        int(r["tpu_chips"] or 0),
        tuple(t for (name, t) in TPU_SLICES if name == r["name"]),
        r["strategies"] != "any",
        r["family"],
        accs,
        r["boot_disk"],
        r["arch"],
        r["source"],
    )


FIXED_MACHINES: dict[str, Machine] = {r["name"]: _machine(r) for r in catalog.table("machines")}

# N1 machines take T4/P4/P100/V100: allowed counts, and the vCPU / memory ceiling per count.
N1_GPU_LIMITS: dict[str, dict[int, tuple[int, float]]] = {}
for _r in catalog.table("n1_gpus"):
    N1_GPU_LIMITS.setdefault(_r["accelerator"], {})[int(_r["count"])] = (
        int(_r["max_vcpus"]),
        float(_r["max_memory_gb"]),
    )
_CPU_FAMILIES: dict[str, dict[str, str]] = {r["family"]: r for r in catalog.table("cpu_families")}

PRESETS: dict[str, Preset] = {
    r["name"]: Preset(
        r["name"],
        r["machine_type"],
        r["accelerator_type"] or None,
        int(r["accelerator_count"] or 0),
        r["tpu_topology"] or None,
        r["source"],
    )
    for r in catalog.table("presets")
}
READ = max(s.read for s in catalog.sources().values())  # the newest date a catalog source was read


def machine(name: str) -> Machine | None:
    """Look up a machine type.

    Args:
        name: a Compute Engine machine type, e.g. "a3-highgpu-8g" or "n1-standard-8".

    Returns:
        Its Machine (vCPUs, memory, accelerator and counts, TPU chips, sources), or None if Vertex
        AI training does not offer it.
    """
    if name in FIXED_MACHINES:
        return FIXED_MACHINES[name]
    family, _, size = name.rpartition("-")
    row = _CPU_FAMILIES.get(family)
    if (
        row is None
        or not size.isdigit()
        or (row["sizes"] != "any" and size not in catalog.words(row["sizes"]))
    ):
        return None
    vcpus = int(size)
    per_vcpu = _num(row["memory_per_vcpu"])
    return Machine(
        name,
        None,
        (),
        vcpus,
        vcpus * per_vcpu if per_vcpu else None,
        family="n1" if family.startswith("n1-") else "cpu",
        source=row["source"],
    )


def machines() -> list[Machine]:
    """Every machine type with built-in accelerators, and the TPU machines, in the table's order."""
    return list(FIXED_MACHINES.values())


def accelerator(name: str) -> Accelerator | None:
    """The catalog's row for an AcceleratorType name (None if Vertex AI training has none)."""
    return ACCELERATORS.get(name)


def accelerators() -> list[Accelerator]:
    """Every accelerator of the catalog (the v1 AcceleratorType values Vertex training offers)."""
    return list(ACCELERATORS.values())


def presets() -> list[Preset]:
    """Every hardware preset, in the table's order."""
    return list(PRESETS.values())


def tpu_slice(machine_type: str, topology: str | None) -> TpuSlice | None:
    """The TPU slice of a TPU machine type and topology (chips, TPU VMs), None if not a valid one."""
    return TPU_SLICES.get((machine_type, topology or ""))


def machines_per_replica(machine_type: str, topology: str | None) -> int:
    """The VMs one replica occupies (and is billed for): a multi-host TPU slice's hosts, else 1."""
    s = tpu_slice(machine_type, topology)
    return s.hosts if s else 1


def known_machine_names() -> list[str]:
    names = list(FIXED_MACHINES)
    for family, row in _CPU_FAMILIES.items():
        names += [f"{family}-{n}" for n in catalog.words(row["listed"])]
    return names


def resolve_preset(name: str, field: str = "hardware") -> dict:
    """A preset name -> the explicit hardware mapping, or a SpecError with a suggestion."""
    preset = PRESETS.get(name)
    if preset is None:
        near = suggest(name, PRESETS)
        hint = f"did you mean '{near}'? " if near else ""
        raise SpecError(
            field,
            f"unknown hardware preset {name!r}",
            has_value=False,
            hint=hint + "run `vertex-trainer hardware` for the list, or give "
            "{machine_type: ..., accelerator_type: ..., accelerator_count: ...}",
        )
    return preset.as_hardware()


def preset_for(
    machine_type: str, accelerator_type: str | None, count: int, topology: str | None
) -> str | None:
    """The preset name matching an explicit hardware mapping, if any."""
    for p in PRESETS.values():
        if (p.machine_type, p.accelerator_type, p.accelerator_count or 0, p.tpu_topology) == (
            machine_type,
            accelerator_type,
            count or 0,
            topology,
        ):
            return p.name
    return None


def accelerator_of(machine_type: str, accelerator_type: str | None) -> Accelerator | None:
    """The accelerator a machine runs on (explicit type, or implied by a TPU slice machine)."""
    if accelerator_type:
        return ACCELERATORS.get(accelerator_type)
    m = machine(machine_type)
    if m is not None and m.accelerator:
        return ACCELERATORS[m.accelerator]
    return None


def boots_from_hyperdisk(machine_type: str) -> bool:
    """A3 Ultra, A4, A4X and G4 machines boot only from Hyperdisk (hyperdisk-balanced)."""
    m = machine(machine_type)
    return m is not None and m.boot_disk == "hyperdisk"


def accelerator_kind(machine_type: str, accelerator_type: str | None) -> str:
    """ "tpu", "gpu" or "cpu": what the machine computes on."""
    m = machine(machine_type)
    if m is not None and m.is_tpu:
        return "tpu"
    acc = accelerator_of(machine_type, accelerator_type)
    return acc.kind if acc else "cpu"


def default_precision(machine_type: str, accelerator_type: str | None) -> str:
    acc = accelerator_of(machine_type, accelerator_type)
    return acc.precision if acc else "float32"


def devices_per_machine(
    machine_type: str, accelerator_type: str | None, count: int, topology: str | None
) -> int:
    """How many data-parallel devices one replica contributes (a TPU machine: its whole slice)."""
    m = machine(machine_type)
    if m is not None and m.tpu_chips:
        return _topology_chips(topology) if topology else m.tpu_chips
    return max(count or 0, 1)


def _topology_chips(topology: str) -> int:
    return math.prod(int(x) for x in topology.split("x"))


def _slice_machines() -> list[Machine]:
    return [m for m in FIXED_MACHINES.values() if m.family == "tpu-slice"]


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
            hint=(f"did you mean '{near}'? " if near else "") + "allowed: " + ", ".join(ACCELERATORS),
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
        families = " and ".join(dict.fromkeys(ACCELERATORS[s.accelerator].family for s in _slice_machines()))
        raise SpecError(
            f"{field}.tpu_topology",
            f"only {families} machines "
            f"({', '.join(s.name for s in _slice_machines())}) take a topology, not {machine_type}",
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


def _check_slice(
    field: str, m: Machine, accelerator_type: str | None, accelerator_count: int, tpu_topology: str | None
) -> None:
    """A TPU slice machine: the machine implies the TPU, the topology the slice."""
    label = ACCELERATORS[m.accelerator].family
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
            f"{name} ({ACCELERATORS[FIXED_MACHINES[name].accelerator].family})"
            for (name, topo) in TPU_SLICES
            if topo == tpu_topology
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
                hint=f"flex-start serves {served}; use strategy standard or spot here, or pick e.g. hardware: h100x8",
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
        bigger = [p.name for p in bigger]
        raise SpecError(
            "replicas",
            "a TPU job is one replica on Vertex AI: the slice's topology says how many TPU hosts it gets",
            value=replicas,
            hint=f"set replicas: 1 and pick a larger slice, e.g. hardware: {(bigger or ['tpu-v5e-16'])[0]}",
        )


def catalog_rows() -> list[dict]:
    """One row per preset, for `vertex-trainer hardware`: the shape, its figures and its sources."""
    rows = []
    for p in PRESETS.values():
        m = machine(p.machine_type)
        acc = accelerator_of(p.machine_type, p.accelerator_type)
        s = tpu_slice(p.machine_type, p.tpu_topology)
        count = s.chips if s else (p.accelerator_count or 0)
        ids = " ".join(
            dict.fromkeys(
                " ".join(
                    x
                    for x in (
                        p.source,
                        m.source if m else "",
                        acc.source if acc else "",
                        s.source if s else "",
                    )
                    if x
                ).split()
            )
        )
        rows.append(
            {
                "preset": p.name,
                "machine_type": p.machine_type,
                "accelerator_type": acc.name if acc else None,
                "accelerator_count": count,
                "tpu_topology": p.tpu_topology,
                "hosts": s.hosts if s else 1,
                "accelerator_memory_gb": acc.memory_gb * count if acc else 0,
                "vcpus": m.vcpus if m else None,
                "memory_gb": m.memory_gb if m else None,
                "flex_start": bool(acc and acc.flex_start),
                "spot_or_flex_only": bool(m and m.spot_or_flex_only),
                "default_precision": acc.precision if acc else "float32",
                "arch": m.arch if m else "amd64",
                "training": acc.training if acc else "offered",
                "sources": list(_sources(ids)),
                "read": catalog.read_date(ids),
            }
        )
    return rows
