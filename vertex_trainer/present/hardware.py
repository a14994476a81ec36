"""`vertex-trainer hardware` for people: the presets' columns, the region header of --region, and
the footer naming each accelerator's training regions and where each row was read
(api.HardwareCatalog)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.api.catalog import HardwareCatalog

__all__ = ["HEADER", "provenance_lines", "region_lines", "table_rows"]

HEADER = ("preset", "machine type", "accelerators", "acc. memory", "vCPUs", "flex-start", "precision")


def table_rows(cat: HardwareCatalog) -> list[tuple[str, ...]]:
    """One row of HEADER's columns per preset."""
    out: list[tuple[str, ...]] = []
    for row in cat.rows:
        acc = f"{row['accelerator_count']} x {row['accelerator_type']}" if row["accelerator_type"] else "-"
        if row["tpu_topology"]:
            acc += f" ({row['tpu_topology']})"
        flex = "yes" if row["flex_start"] else "no"
        if row["spot_or_flex_only"]:
            flex += " (spot/flex only)"
        out.append(
            (
                row["preset"],
                row["machine_type"],
                acc,
                f"{row['accelerator_memory_gb']} GB" if row["accelerator_memory_gb"] else "-",
                str(row["vcpus"] or "-"),
                flex,
                row["default_precision"],
            )
        )
    return out


def region_lines(cat: HardwareCatalog) -> list[str]:
    """--region: what training offers there, and the table's source and date."""
    if cat.region is None:
        return []
    uncertain = f" ({', '.join(cat.uncertain)}: likely, not in the training table)" if cat.uncertain else ""
    return [
        f"# {cat.region}: Vertex AI training offers {', '.join(cat.offered) or 'no accelerators (CPU only)'}"
        + uncertain,
        f"# source: {cat.region_source}, read {cat.region_read}",
    ]


def provenance_lines(cat: HardwareCatalog) -> list[str]:
    """Footer lines: each accelerator's training regions and sources, then the sources' URLs."""
    lines = ["", "# accelerator, the regions that offer it for training, and where it was read:"]
    for a in cat.accelerators:
        place = " ".join(a.regions) if a.regions else "no training region known"
        if a.confidence != "high":
            place += f" (lower confidence: {a.note})" if a.note else " (lower confidence)"
        unconfirmed = "; not yet on a Vertex AI training page" if a.unconfirmed else ""
        lines.append(
            f"#   {a.name}: {place}{unconfirmed}; sources: {' '.join(a.source_ids)}; "
            f"regions: {' '.join(a.region_source_ids)}"
        )
    lines += ["# sources:"] + [f"#   {i}  {url} (read {read})" for i, (url, read) in cat.sources.items()]
    return lines
