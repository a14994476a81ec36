"""Where Vertex AI training offers each accelerator, and the quota metric each one counts against.

The rules (the hardware layer, beside hardware/) over two tables of the catalog:
vertex_trainer/catalog/regions.csv (accelerator -> training regions, with a confidence, its
sources and a note) and training_regions.csv (every training region); the quota metric names are
a column of accelerators.csv. Sources and dates: catalog/sources.csv, mainly
- the Vertex AI quotas page, "Custom-trained model quotas > Training" (read 2026-11-30): a value
  per region for each accelerator, or "Not available" where training does not offer it;
- Cloud TPU and Compute Engine zone pages for the accelerators that table does not list (TPU v5e,
  GB200, RTX PRO 6000): lower confidence, so their warning says "may not offer".

Quota metrics (aiplatform.googleapis.com/...): `custom_model_training_<x>` for standard jobs and
`custom_model_training_preemptible_<x>` for Spot and for Flex Start (Dynamic Workload Scheduler
jobs count against the preemptible quota, billed at on-demand prices:
https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws#quota).

No I/O beyond reading the package's own tables, no project imports but the catalog reader.
"""

from __future__ import annotations

from typing import Any

from vertex_trainer import catalog
from vertex_trainer.suggest import nearest

SOURCE = "https://cloud.google.com/vertex-ai/docs/quotas (custom training, per region)"
LOCATIONS_URL = "https://cloud.google.com/vertex-ai/docs/general/locations#accelerators"
READ = catalog.sources()["quotas"].read

# Every region of the table (Vertex AI training regions), in the page's order.
REGIONS: tuple[str, ...] = tuple(r["region"] for r in catalog.table("training_regions"))

_ROWS = {r["accelerator"]: r for r in catalog.table("regions")}
# Accelerator (AcceleratorType name) -> the training regions that offer it.
TRAINING: dict[str, tuple[str, ...]] = {name: catalog.words(r["regions"]) for name, r in _ROWS.items()}
# Accelerators whose regions the training table does not give (see the module docstring).
UNCERTAIN = frozenset(name for name, r in _ROWS.items() if r["confidence"] != "high")

_ACCELERATORS = {r["name"]: r for r in catalog.table("accelerators")}
# Accelerator -> the part of its quota metric between custom_model_training_[preemptible_] and the end.
_METRIC = {name: r["quota_metric"] for name, r in _ACCELERATORS.items() if r["quota_metric"]}
SERVICE = "aiplatform.googleapis.com"


def region_of(resource_name: str) -> str:
    """The region (location) of a Vertex AI / Cloud resource name.

    Args:
        resource_name: projects/PROJECT/locations/REGION/... (a job, a persistent resource, a
            TensorBoard instance, a Cloud KMS key ...).

    Returns:
        REGION.

    Raises:
        ValueError: the name is not of the form projects/PROJECT/locations/REGION/... (a short
            id, a zonal or global name), naming it and the form expected.
    """
    parts = resource_name.split("/")
    if len(parts) < 4 or parts[0] != "projects" or parts[2] != "locations" or not all(parts[1:4:2]):
        raise ValueError(
            f"{resource_name!r} is not a regional resource name: expected "
            "projects/PROJECT/locations/REGION/..."
        )
    return parts[3]


def region_or_none(resource_name: str) -> str | None:
    """region_of(resource_name), or None for a name that is not regional (empty, a short id, a
    zonal or global name): for reading a resource the service returned, where a missing region
    means "not known", not bad input."""
    try:
        return region_of(resource_name)
    except ValueError:
        return None


def known(region: str) -> bool:
    return region in REGIONS


def unknown_hint(region: str, suffix: str = "") -> str:
    """The hint for a region that is not one of the table's (a spec field's, a --region flag's):
    the nearest ones (a zone's `suffix`, e.g. "-a", kept on each) and where to see what a region
    offers."""
    near = [r + suffix for r in nearest(str(region).lower(), REGIONS, n=3)]
    did = f"did you mean {' or '.join(repr(r) for r in near)}? " if near else ""
    return did + "`vertex-trainer hardware --region R` lists what a region offers"


def offers(region: str, accelerator: str) -> bool | None:
    """Does Vertex AI training offer `accelerator` in `region`? None when the table cannot say
    (an accelerator or a region it does not list)."""
    regions = TRAINING.get(accelerator)
    if regions is None or region not in REGIONS:
        return None
    return region in regions


def regions_for(accelerator: str) -> tuple[str, ...]:
    """The training regions that offer `accelerator` (empty if the table does not list it)."""
    return TRAINING.get(accelerator, ())


def offered_in(region: str) -> list[str]:
    """The accelerators Vertex AI training offers in `region`, in the table's order."""
    return [name for name, regions in TRAINING.items() if region in regions]


def provenance(accelerator: str) -> dict[str, Any] | None:
    """Where the region row of `accelerator` comes from, for `vertex-trainer hardware`.

    Args:
        accelerator: an AcceleratorType name.

    Returns:
        {"regions": [...], "confidence": "high"|"low", "note": str, "sources": [URL, ...],
        "source_ids": [id of catalog/sources.csv, ...], "read": "YYYY-MM-DD"}, or None when the
        table has no row for it.
    """
    row = _ROWS.get(accelerator)
    if row is None:
        return None
    return {
        "regions": list(TRAINING[accelerator]),
        "confidence": row["confidence"],
        "note": row["note"],
        "sources": [s.url for s in catalog.cited(row["source"])],
        "source_ids": row["source"].split(),
        "read": catalog.read_date(row["source"]),
    }


def availability_warning(region: str | None, accelerator: str | None) -> str | None:
    """A warning when the table says `region` does not offer `accelerator` for training (naming
    the regions that do), does not know `region` at all, or when no Vertex AI training page
    lists the accelerator yet; None when it offers it or cannot say."""
    if not region or not accelerator or accelerator not in TRAINING:
        return None
    row = _ROWS[accelerator]
    urls = [s.url for s in catalog.cited(row["source"])]
    where_read = "Vertex AI docs" if row["confidence"] == "high" else "Cloud TPU / Compute Engine zones"
    url = LOCATIONS_URL if LOCATIONS_URL in urls or not urls else urls[0]
    source = f"({where_read}, read {catalog.read_date(row['source'])}: {url})"
    if not TRAINING[accelerator]:
        return (
            f"warning: hardware: no Vertex AI training region is known to offer {accelerator} "
            f"({row['note']}; read {catalog.read_date(row['source'])}); the service decides"
        )
    where = ", ".join(regions_for(accelerator))
    unconfirmed = _ACCELERATORS.get(accelerator, {}).get("training") == "unconfirmed"
    tail = (
        (
            f"; no Vertex AI training page read {catalog.read_date(_ACCELERATORS[accelerator]['source'])} "
            f"lists {accelerator} yet (the API does): the service decides"
        )
        if unconfirmed
        else ""
    )
    if region not in REGIONS:
        return (
            f"warning: region: {region} is not a Vertex AI training region we know of; "
            f"{accelerator} trains in {where} {source}{tail}"
        )
    if region in TRAINING[accelerator]:
        return f"warning: hardware: {tail[2:]}" if unconfirmed else None
    may = "may not offer" if accelerator in UNCERTAIN else "does not offer"
    return (
        f"warning: region: {region} {may} {accelerator} for Vertex AI training; regions that do: "
        f"{where} {source}{tail}"
    )


def quota_metric(accelerator: str | None, strategy: str) -> str | None:
    """The quota metric a job on `accelerator` counts against with this scheduling strategy:
    standard -> custom_model_training_<x>; spot and flex-start -> the preemptible variant."""
    suffix = _METRIC.get(accelerator or "")
    if suffix is None:
        return None
    preemptible = "preemptible_" if strategy in ("spot", "flex-start") else ""
    return f"{SERVICE}/custom_model_training_{preemptible}{suffix}"
