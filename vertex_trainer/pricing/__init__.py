"""Vertex AI custom-training list prices as data, and the rules that price one machine.

The prices are a dated snapshot shipped in this package (`snapshot.json`, made by `vertex-trainer
dev refresh-prices` from the Cloud Billing Catalog API; how its figures were checked:
docs/cost.md). A machine's hourly price is its vCPUs times its family's core price, plus its
memory (GiB) times the family's RAM price, plus each accelerator's price, for one usage type
(standard = on-demand, spot, flex-start) in one region; a TPU is priced per chip (per core for
the v2/v3 boards), the host included, so a slice is its chips times the chip-hour price. Where the
snapshot has no price the
answer is None with the reason, never a guess; Flex Start, whose Vertex AI list prices the
snapshot does not hold, is priced at the standard price and marked as an upper bound.

Pure data and rules: no I/O beyond reading the shipped file, no heavy imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from vertex_trainer import hardware as hw
from vertex_trainer.pricing.skus import family_of

if TYPE_CHECKING:
    from importlib.abc import Traversable

SNAPSHOT_FILE = "snapshot.json"
STRATEGIES = ("standard", "spot", "flex-start")


@dataclass(frozen=True)
class PriceBook:
    """A price snapshot: `data` in snapshot.json's shape; `source` "snapshot" or "billing-api"."""

    data: Mapping[str, Any]
    source: str = "snapshot"

    @property
    def as_of(self) -> str:
        return str(self.data.get("as_of") or "unknown")

    @property
    def currency(self) -> str:
        return str(self.data.get("currency") or "USD")

    @property
    def where(self) -> str:
        """Where the prices were read (for messages)."""
        return str(self.data.get("source") or self.source)

    def family(self, family: str, region: str, usage: str) -> Mapping[str, Any] | None:
        rates: Mapping[str, Any] | None = (
            ((self.data.get("families") or {}).get(family) or {}).get(region, {}).get(usage)
        )
        return rates

    def accelerator(self, name: str, region: str, usage: str) -> float | None:
        price = ((self.data.get("accelerators") or {}).get(name) or {}).get(region, {}).get(usage)
        return None if price is None else float(price)

    def regions_for(self, family: str, accelerator: str | None, usage: str = "standard") -> tuple[str, ...]:
        """The regions where the snapshot prices this family (and accelerator) for `usage`."""
        regions = [r for r, u in ((self.data.get("families") or {}).get(family) or {}).items() if usage in u]
        if accelerator:
            priced = (self.data.get("accelerators") or {}).get(accelerator) or {}
            regions = [r for r in regions if usage in priced.get(r, {})]
        return tuple(sorted(regions))


@dataclass(frozen=True)
class Price:
    """The hourly list price of one machine (or of all a job's machines): `hourly` USD, or None
    with `reason`; `upper_bound` when the price is a ceiling, not the list price itself."""

    hourly: float | None
    reason: str | None = None
    upper_bound: bool = False

    def times(self, n: int) -> Price:
        """The price of `n` such machines."""
        return Price(None if self.hourly is None else self.hourly * n, self.reason, self.upper_bound)

    def plus(self, other: Price | None) -> Price:
        """This price and `other`'s together (other None: this one); None when either is missing."""
        if other is None:
            return self
        hourly = None if self.hourly is None or other.hourly is None else self.hourly + other.hourly
        return Price(hourly, self.reason or other.reason, self.upper_bound or other.upper_bound)


def load_snapshot(path: str | None = None) -> PriceBook:
    """The shipped snapshot (or the one at `path`).

    Args:
        path: a snapshot.json to read instead of the one in the package.
    Returns:
        A PriceBook with source "snapshot"."""
    if path is not None:
        with open(path, encoding="utf-8") as f:
            return PriceBook(json.load(f))
    return PriceBook(_shipped(_stamp()))


def shipped_path() -> Traversable:
    """The path of the snapshot shipped in the package (what refresh-prices rewrites)."""
    return resources.files(__package__).joinpath(SNAPSHOT_FILE)


def _stamp() -> tuple[int, int]:
    """The shipped file's mtime and size: the snapshot is read again once refresh-prices has
    rewritten it, so a long-lived process (a notebook) prices with what it just refreshed."""
    try:
        st = os.stat(str(shipped_path()))
    except OSError:  # not a file on disk (a zipped package): it cannot be rewritten either
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=1)
def _shipped(stamp: tuple[int, int]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(shipped_path().read_text(encoding="utf-8"))
    return data


def machine_price(
    book: PriceBook,
    *,
    machine_type: str,
    accelerator_type: str | None,
    accelerator_count: int,
    region: str | None,
    strategy: str,
    tpu_topology: str | None = None,
) -> Price:
    """The hourly list price of one machine of this shape, for `strategy` in `region` (a TPU
    slice: the whole slice, every host of its topology, as Vertex AI runs it as one replica).

    Args:
        book: the prices.
        machine_type, accelerator_type, accelerator_count: the machine (HardwareSpec's fields).
        region: the Vertex AI region (None: no price).
        strategy: standard | spot | flex-start.
        tpu_topology: a TPU slice machine's topology (None: the machine's own chips).
    Returns:
        A Price: the list price, the standard price as an upper bound for flex-start when the
        snapshot has no Flex Start price, or None with the reason."""
    if not region:
        return Price(None, "no region: a local run has no list price")
    m = hw.machine(machine_type)
    if m is None:
        return Price(
            None, f"machine type {machine_type} prices are not in the price snapshot (as of {book.as_of})"
        )
    if m.is_tpu:
        return _tpu_price(book, m, accelerator_type, accelerator_count, tpu_topology, region, strategy)
    if m.vcpus is None or m.memory_gb is None:
        return Price(None, f"{machine_type}: vCPUs and memory are not in the hardware catalog")
    price = _priced(book, m, accelerator_type, accelerator_count, region, strategy)
    if price.hourly is None and strategy == "flex-start":
        standard = _priced(book, m, accelerator_type, accelerator_count, region, "standard")
        if standard.hourly is not None:
            return Price(
                standard.hourly,
                "Flex Start list prices for Vertex AI training are not in the "
                "snapshot; Flex Start is billed below on-demand, so the standard price is a "
                "ceiling",
                upper_bound=True,
            )
    return price


def _tpu_price(
    book: PriceBook,
    m: hw.Machine,
    accelerator_type: str | None,
    count: int,
    topology: str | None,
    region: str,
    usage: str,
) -> Price:
    """A TPU's price: its chips (a slice's, from the topology) or cores (a v2/v3 board) times the
    snapshot's per-chip (per-core) hour price; the TPU VM hosts are in that price."""
    accelerator = hw.accelerator_of(m.name, accelerator_type)
    if accelerator is None:
        return Price(None, f"{m.name}: no TPU type")
    if m.family == "tpu-slice":
        s = hw.tpu_slice(m.name, topology) if topology else None
        units = s.chips if s is not None else m.tpu_chips
    else:
        units = count or (m.counts[0] if m.counts else 0)
    each = book.accelerator(accelerator.name, region, usage)
    if each is None:
        return Price(
            None,
            f"no {usage} price for {accelerator.family} in {region} in the price snapshot "
            f"(as of {book.as_of})",
        )
    return Price(units * each)


def _priced(
    book: PriceBook, m: hw.Machine, accelerator_type: str | None, count: int, region: str, usage: str
) -> Price:
    if m.vcpus is None or m.memory_gb is None:  # price() says so first; here for the arithmetic
        return Price(None, f"{m.name}: vCPUs and memory are not in the hardware catalog")
    family = family_of(m.name)
    rates = book.family(family, region, usage)
    if not rates:
        return Price(
            None,
            f"no {usage} price for {m.name} ({family} machines) in {region} in the "
            f"price snapshot (as of {book.as_of})",
        )
    hourly = m.vcpus * float(rates["core"]) + m.memory_gb * float(rates["ram"])
    accelerator = hw.accelerator_of(m.name, accelerator_type)
    n = count or (m.counts[0] if m.counts else 0)
    if accelerator is not None and n:
        each = book.accelerator(accelerator.name, region, usage)
        if each is None:
            return Price(
                None,
                f"no {usage} price for {accelerator.name} in {region} in the price "
                f"snapshot (as of {book.as_of})",
            )
        hourly += n * float(each)
    return Price(hourly)
