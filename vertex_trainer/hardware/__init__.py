"""Vertex AI training's hardware: the catalog (data) and the rules that read it, one import.

    records.py   the catalog's rows as typed records (Accelerator, Machine, TpuSlice, Preset),
                 loaded once from vertex_trainer/catalog/*.csv (every row naming its sources,
                 catalog/sources.csv: URL and the date it was read), and their look-ups
    rules.py     what Vertex AI training refuses: `check_hardware`, `check_scheduling`

Every public name of both is exported here (`from vertex_trainer import hardware as hw`); see
docs/spec-and-hardware.md, "The catalog", for the API other layers use (cost, capacity):
`machine(name)`, `accelerator(name)`, `accelerators()`, `presets()`, `tpu_slice(...)`.
Plain records and pure functions: no network, no heavy imports.
"""

from vertex_trainer.hardware.records import (
    ACCELERATORS,
    FIXED_MACHINES,
    N1_GPU_LIMITS,
    PRESETS,
    READ,
    TPU_SLICES,
    Accelerator,
    Machine,
    Preset,
    TpuSlice,
    accelerator,
    accelerator_kind,
    accelerator_of,
    accelerators,
    boots_from_hyperdisk,
    catalog_rows,
    default_precision,
    device_noun,
    devices_per_machine,
    known_machine_names,
    machine,
    machines,
    machines_per_replica,
    preset_for,
    presets,
    resolve_preset,
    slice_machines,
    tpu_slice,
)
from vertex_trainer.hardware.rules import (
    CONFIGURE_COMPUTE,
    SEVEN_DAYS,
    check_hardware,
    check_scheduling,
)
from vertex_trainer.suggest import suggest

__all__ = [
    "ACCELERATORS",
    "CONFIGURE_COMPUTE",
    "FIXED_MACHINES",
    "N1_GPU_LIMITS",
    "PRESETS",
    "READ",
    "SEVEN_DAYS",
    "TPU_SLICES",
    "Accelerator",
    "Machine",
    "Preset",
    "TpuSlice",
    "accelerator",
    "accelerator_kind",
    "accelerator_of",
    "accelerators",
    "boots_from_hyperdisk",
    "catalog_rows",
    "check_hardware",
    "check_scheduling",
    "default_precision",
    "device_noun",
    "devices_per_machine",
    "known_machine_names",
    "machine",
    "machines",
    "machines_per_replica",
    "preset_for",
    "presets",
    "resolve_preset",
    "slice_machines",
    "suggest",
    "tpu_slice",
]
