"""The hardware catalog's tables, shipped as CSV files beside this module.

Each file starts with `#` comment lines saying what it holds; every row carries a `source` column
naming ids of `sources.csv` (the page's URL and the date it was read). The rules that read the
tables live in `vertex_trainer.hardware` and `vertex_trainer.regions`; this module only reads
files (a leaf: standard library only, cached, no network).
"""

from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass

_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Source:
    """Where catalog rows were read: `url`, the date `read` (YYYY-MM-DD) and what it says."""

    id: str
    url: str
    read: str
    note: str


@functools.cache
def table(name: str) -> tuple[dict[str, str], ...]:
    """The rows of `<name>.csv` as dicts of strings (comment lines skipped).

    Args:
        name: the file's name without `.csv`, e.g. "machines".

    Returns:
        One dict per row, keyed by the header's column names, values stripped.
    """
    with open(os.path.join(_HERE, f"{name}.csv"), encoding="utf-8") as f:  # shipped as package data
        text = f.read()
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return tuple({k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(lines))


@functools.cache
def sources() -> dict[str, Source]:
    """Every source of the catalog by id (the rows of sources.csv)."""
    return {r["id"]: Source(r["id"], r["url"], r["read"], r["note"]) for r in table("sources")}


def cited(ids: str) -> tuple[Source, ...]:
    """The sources a row's space-separated `source` field names.

    Args:
        ids: e.g. "api-v1 configure-compute".

    Returns:
        The Source of each id, in order; a KeyError names an id that sources.csv lacks.
    """
    known = sources()
    return tuple(known[i] for i in ids.split())


def read_date(ids: str) -> str:
    """The latest date on which the sources named by `ids` were read ("" when none)."""
    return max((s.read for s in cited(ids)), default="")


def words(field: str) -> tuple[str, ...]:
    """A space-separated field as a tuple ("" -> ())."""
    return tuple(field.split())
