"""A capability's named interface: what its package exports to the others, loaded on first use.

Each capability (cost, capacity, deploy, ...; docs/architecture.md) is a package whose modules
the other capabilities never import directly: they import the package and use the names its
interface table lists (the import contracts in pyproject.toml enforce it). The table is resolved
lazily (PEP 562 module `__getattr__`), so importing one module of a capability, e.g. its text for
people, does not load the rest of it:

    __getattr__, __dir__ = interface.exports(__name__, {"job_cost": "estimate"})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(package: str, table: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` for `table` (name -> the package's module holding it)."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__
