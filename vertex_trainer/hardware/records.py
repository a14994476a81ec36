"""The hardware catalog as typed records, loaded once from vertex_trainer/catalog/*.csv, and its
look-ups: `machine(name)`, `accelerator(name)`, `accelerators()`, `presets()`, `tpu_slice(...)`,
what a machine computes on and how many devices it brings, and `catalog_rows` for `vertex-trainer
hardware`. The rules that read them are in hardware/rules.py; `vertex_trainer.hardware` exports
both (docs/spec-and-hardware.md, "The catalog").

Plain records and pure functions: no network, no heavy imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from vertex_trainer import catalog
from vertex_trainer.errors import SpecError
from vertex_trainer.suggest import suggest  # the "did you mean" ranking (a leaf)


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
    api_enum: bool = True  # an AcceleratorType value; False: a slice machine implies it (v5p, v6e)

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

    def as_hardware(self) -> dict[str, Any]:
        """The spec's explicit hardware mapping of this preset."""
        d: dict[str, Any] = {"machine_type": self.machine_type}
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
        r["api_enum"] == "yes",
    )
    for r in catalog.table("accelerators")
}
TPU_SLICES: dict[tuple[str, str], TpuSlice] = {
    (r["machine_type"], r["topology"]): TpuSlice(
        r["machine_type"], r["topology"], int(r["chips"]), int(r["hosts"]), r["source"]
    )
    for r in catalog.table("tpu_topologies")
}


def _machine(r: dict[str, str]) -> Machine:
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


def resolve_preset(name: str, field: str = "hardware") -> dict[str, Any]:
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


def device_noun(machine_type: str, accelerator_type: str | None) -> str:
    """What one data-parallel device of this hardware is, as Vertex AI counts it: "GPU", "TPU
    chip", "TPU core" (a v2/v3 board, sold by the core), or "machine" (CPU only). The trainer runs
    one replica per device; Vertex AI's replicas (replicaCount) are machines."""
    acc = accelerator_of(machine_type, accelerator_type)
    if acc is None:
        return "machine"
    if acc.kind == "gpu":
        return "GPU"
    return "TPU core" if "per core" in acc.label else "TPU chip"


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


def slice_machines() -> list[Machine]:
    return [m for m in FIXED_MACHINES.values() if m.family == "tpu-slice"]


def catalog_rows() -> list[dict[str, Any]]:
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
