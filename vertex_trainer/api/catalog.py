"""The hardware catalog as the API gives it (`vertex-trainer hardware`, docs/contract.md section
11): the presets, the training regions of each accelerator and where each row was read, and the
JSON Schema of the spec. Values only; their text is present/hardware.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vertex_trainer import catalog, hardware, regions
from vertex_trainer.errors import UserError
from vertex_trainer.suggest import nearest

__all__ = ["AcceleratorSource", "HardwareCatalog", "hardware_catalog", "spec_schema"]


@dataclass(frozen=True)
class AcceleratorSource:
    """Where an accelerator's row and its training regions were read."""

    name: str
    regions: tuple[str, ...]
    confidence: str  # "high" | "low"
    note: str | None
    unconfirmed: bool  # not yet on a Vertex AI training page
    source_ids: tuple[str, ...]  # the accelerator row's (catalog/sources.csv)
    region_source_ids: tuple[str, ...]  # the regions row's


@dataclass(frozen=True)
class HardwareCatalog:
    """The presets (`rows`, each with its "regions" provenance), each accelerator's sources and
    the sources' URLs and dates; with a region, what training offers there."""

    rows: list[dict[str, Any]]
    accelerators: tuple[AcceleratorSource, ...]
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (url, read)
    region: str | None = None
    offered: tuple[str, ...] = ()  # in `region`
    uncertain: tuple[str, ...] = ()  # of `offered`: likely, not in the training table
    region_source: str | None = None
    region_read: str | None = None


def hardware_catalog(region: str | None = None) -> HardwareCatalog:
    """The hardware presets, the training regions of each accelerator and where each row was read.

    Args:
        region: only what Vertex AI training offers there (CPU presets always).

    Returns:
        a HardwareCatalog.

    Raises:
        UserError: `region` is not in the training regions table (exit 2, did-you-mean).
    """
    rows = hardware.catalog_rows()
    offered: list[str] = []
    if region is not None:
        if not regions.known(region):
            near = nearest(region, regions.REGIONS)
            raise UserError(
                f"--region: {region!r} is not a Vertex AI training region in the table (read {regions.READ})",
                hint=(f"did you mean '{near[0]}'? " if near else "") + "known: " + ", ".join(regions.REGIONS),
            )
        offered = regions.offered_in(region)
        rows = [r for r in rows if not r["accelerator_type"] or r["accelerator_type"] in offered]
    for row in rows:  # the regions table (regions.py), dated and cited like the rest
        row["regions"] = regions.provenance(row["accelerator_type"]) if row["accelerator_type"] else None
    accelerators, used = [], {}
    for name in dict.fromkeys(r["accelerator_type"] for r in rows if r["accelerator_type"]):
        acc = hardware.accelerator(name)
        where = next(r["regions"] for r in rows if r["accelerator_type"] == name)
        ids = tuple(acc.source.split()) if acc else ()
        region_ids = tuple(where["source_ids"]) if where else ()
        used.update(dict.fromkeys(ids + region_ids))
        accelerators.append(
            AcceleratorSource(
                name,
                tuple(where["regions"]) if where and where["regions"] else (),
                where["confidence"] if where else "high",
                where["note"] if where else None,
                bool(acc and acc.training == "unconfirmed"),
                ids,
                region_ids,
            )
        )
    known = catalog.sources()
    return HardwareCatalog(
        rows,
        tuple(accelerators),
        {i: (known[i].url, known[i].read) for i in used},
        region,
        tuple(offered),
        tuple(a for a in offered if a in regions.UNCERTAIN),
        regions.SOURCE if region is not None else None,
        regions.READ if region is not None else None,
    )


def spec_schema() -> dict:
    """The JSON Schema of the job spec (for editor completion).

    Returns:
        the schema as a dict.
    """
    from vertex_trainer.spec import json_schema  # the spec's models: `hardware` loads none

    return json_schema()
