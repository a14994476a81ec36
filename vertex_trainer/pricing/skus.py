"""Cloud Billing Catalog SKUs -> (machine family or accelerator, region, usage type): the mapping.

A Vertex AI training price is not one SKU: a machine costs its vCPUs times the family's "Instance
Core" SKU plus its memory times the family's "Instance Ram" SKU, and each accelerator has a SKU of
its own ("Nvidia H100 80GB GPU"). Each SKU (cloudbilling.v1 `Sku`: `description`, `category
{resourceFamily, resourceGroup, usageType}`, `serviceRegions`, `pricingInfo[].pricingExpression
{usageUnit, tieredRates[].unitPrice {units, nanos}}`) is classified here from its description and
usage type; everything that is not custom training (prediction, generative AI, commitments) is
skipped. `snapshot()` folds the classified SKUs into the snapshot shipped in this package.

Pure: no I/O. The phrases are the Compute Engine resource names the SKU descriptions use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Longest phrase first: "Nvidia Tesla A100 80GB" before "Nvidia Tesla A100".
ACCELERATOR_PHRASES: tuple[tuple[str, str], ...] = (
    ("Nvidia H100 80GB Mega", "NVIDIA_H100_MEGA_80GB"),
    ("Nvidia H100 80GB", "NVIDIA_H100_80GB"),
    ("Nvidia H200 141GB", "NVIDIA_H200_141GB"),
    ("Nvidia H200", "NVIDIA_H200_141GB"),
    ("Nvidia B200", "NVIDIA_B200"),
    ("Nvidia Tesla A100 80GB", "NVIDIA_A100_80GB"),
    ("Nvidia A100 80GB", "NVIDIA_A100_80GB"),
    ("Nvidia Tesla A100", "NVIDIA_TESLA_A100"),
    ("Nvidia L4", "NVIDIA_L4"),
    ("Nvidia Tesla T4", "NVIDIA_TESLA_T4"),
    ("Nvidia Tesla V100", "NVIDIA_TESLA_V100"),
    ("Nvidia Tesla P100", "NVIDIA_TESLA_P100"),
    ("Nvidia Tesla P4", "NVIDIA_TESLA_P4"),
)
# TPU SKUs are per chip-hour (per core-hour for v2/v3 boards), the TPU VM host included; the
# phrases are Cloud TPU's names ("TPU v5e", Compute Engine's "TPU v5 Lite"), longest first.
TPU_PHRASES: tuple[tuple[str, str], ...] = (
    ("TPU v5 Lite", "TPU_V5_LITEPOD"),
    ("TPU v5e", "TPU_V5_LITEPOD"),
    ("TPU v5p", "TPU_V5P"),
    ("TPU v6e", "TPU_V6E"),
    ("TPU v4", "TPU_V4_POD"),
    ("TPU v3", "TPU_V3"),
    ("TPU v2", "TPU_V2"),
)
# SKU family phrase -> the family key machine types map to (`family_of`).
FAMILY_PHRASES: dict[str, str] = {
    "N1 Predefined": "n1",
    "N2D": "n2d",
    "N2": "n2",
    "E2": "e2",
    "C2D": "c2d",
    "C2": "c2",
    "C3": "c3",
    "A2": "a2",
    "A3 High": "a3-high",
    "A3 Mega": "a3-mega",
    "A3 Ultra": "a3-ultra",
    "A4": "a4",
    "G2": "g2",
}
_FAMILY = re.compile(
    r"\b("
    + "|".join(sorted(map(re.escape, FAMILY_PHRASES), key=len, reverse=True))
    + r") Instance (Core|Ram)\b"
)
_ACCEL = [(re.compile(r"\b" + re.escape(p) + r" GPU\b"), name) for p, name in ACCELERATOR_PHRASES] + [
    (re.compile(r"\b" + re.escape(p) + r"\b"), name) for p, name in TPU_PHRASES
]
_NOT_TRAINING = re.compile(r"Prediction|Commitment|Serving|Endpoint", re.I)
_FLEX = re.compile(r"\bDWS\b|Flex[ -]?Start|Dynamic Workload Scheduler", re.I)
USAGE = {"OnDemand": "standard", "Preemptible": "spot"}  # the strategies' names
UNITS = {"core": "h", "ram": "GiBy.h", "accelerator": "h"}


@dataclass(frozen=True)
class PricedSku:
    """One classified SKU: `kind` core | ram | accelerator, `name` the family key or the
    AcceleratorType name, `usage` standard | spot | flex-start, `price` USD per unit-hour."""

    kind: str
    name: str
    usage: str
    regions: tuple[str, ...]
    price: float
    sku_id: str


def family_of(machine_type: str) -> str:
    """The SKU family of a machine type: "a2-highgpu-8g" -> "a2", "a3-highgpu-8g" -> "a3-high".

    Args:
        machine_type: a Compute Engine machine type name.
    Returns:
        The family key of FAMILY_PHRASES' values."""
    parts = machine_type.split("-")
    if parts[0] == "a3" and len(parts) > 1:
        return "a3-" + parts[1].replace("gpu", "")
    return parts[0]


def unit_price(sku: dict[str, Any]) -> float | None:
    """The first tier's unit price (USD) of the SKU's first pricing info, or None."""
    try:
        info = (sku.get("pricingInfo") or [])[0]
        rates = info["pricingExpression"]["tieredRates"]
        rate = min(rates, key=lambda r: float(r.get("startUsageAmount") or 0))
        money = rate["unitPrice"]
        return int(money.get("units") or 0) + int(money.get("nanos") or 0) / 1e9
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def classify(sku: dict[str, Any]) -> PricedSku | None:
    """The training price a SKU carries, or None for a SKU that is not one.

    Args:
        sku: one cloudbilling.v1 Sku, as the API answers it.
    Returns:
        A PricedSku, or None (prediction, generative AI, commitments, unknown resources, a unit
        that is not per hour)."""
    text = sku.get("description") or ""
    category = sku.get("category") or {}
    if "Training" not in text or _NOT_TRAINING.search(text):
        return None
    usage = "flex-start" if _FLEX.search(text) else USAGE.get(category.get("usageType") or "")
    if usage is None:
        return None
    kind = name = None
    family = _FAMILY.search(text)
    if family:
        kind, name = family.group(2).lower(), FAMILY_PHRASES[family.group(1)]
    else:
        name = next((n for pattern, n in _ACCEL if pattern.search(text)), None)
        kind = "accelerator" if name else None
    if kind is None or name is None:
        return None
    expression = (sku.get("pricingInfo") or [{}])[0].get("pricingExpression") or {}
    price = unit_price(sku)
    if expression.get("usageUnit") != UNITS[kind] or price is None:
        return None
    regions = tuple(sku.get("serviceRegions") or ())
    return PricedSku(kind, name, usage, regions, price, str(sku.get("skuId") or ""))


def snapshot(
    skus: Iterable[dict[str, Any]], *, as_of: str, source: str, read: int | None = None
) -> dict[str, Any]:
    """The price snapshot (this package's snapshot.json shape) from a service's SKUs.

    Args:
        skus: cloudbilling.v1 Skus (every page of `services/{id}/skus`).
        as_of: the date the prices were read (YYYY-MM-DD).
        source: where they were read (shown by `vertex-trainer cost`).
        read: how many SKUs were read (default: counted here).
    Returns:
        {"currency", "as_of", "source", "skus_read", "skus_used", "families": {family: {region:
        {usage: {"core", "ram"}}}}, "accelerators": {name: {region: {usage: price}}}}; a family
        appears in a region only with both its core and its RAM price."""
    count, used = 0, 0
    cores: dict[str, Any] = {}
    accelerators: dict[str, Any] = {}
    for sku in skus:
        count += 1
        priced = classify(sku)
        if priced is None:
            continue
        used += 1
        for region in priced.regions:
            if priced.kind == "accelerator":
                accelerators.setdefault(priced.name, {}).setdefault(region, {})[priced.usage] = priced.price
            else:
                slot = cores.setdefault(priced.name, {}).setdefault(region, {}).setdefault(priced.usage, {})
                slot[priced.kind] = priced.price
    families = {
        family: {
            region: {usage: rates for usage, rates in sorted(usages.items()) if len(rates) == 2}
            for region, usages in sorted(regions.items())
        }
        for family, regions in sorted(cores.items())
    }
    return {
        "currency": "USD",
        "as_of": as_of,
        "source": source,
        "skus_read": count if read is None else read,
        "skus_used": used,
        "families": families,
        "accelerators": {
            name: {region: dict(sorted(u.items())) for region, u in sorted(regions.items())}
            for name, regions in sorted(accelerators.items())
        },
    }
