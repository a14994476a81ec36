"""A capability's named interface: what its package exports to the others, loaded on first use.

Each capability (cost, capacity, deploy, ...; docs/architecture.md) is a package whose modules
the other capabilities never import directly: they import the package and use the names its
interface table lists (the import contracts in pyproject.toml enforce it). The table is resolved
lazily (PEP 562 module `__getattr__`), so importing one module of a capability, e.g. its text for
people, does not load the rest of it:

    __getattr__, __dir__ = interface.exports(__name__, {"job_cost": "estimate"})

An exported name may also be the name of one of the package's modules (`api.cost`, the function,
and `vertex_trainer.api.cost`, its module). Importing a submodule binds it on its package, which
would hide the exported name from then on; `exports` makes the package an `Interface` module that
refuses that binding, so `package.NAME` is always what the table exports. The submodule itself
stays importable (`from package.NAME import x`, `importlib.import_module`).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

_TABLES: dict[str, dict[str, str]] = {}  # package -> its table, for Interface.__setattr__


class Interface(types.ModuleType):
    """A package whose exported names are never replaced by its submodules of the same name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _TABLES.get(self.__name__, {}):
            return  # the import system binding a submodule: NAME stays the exported object
        super().__setattr__(name, value)


def exports(package: str, table: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` for `table` (name -> the package's module holding
    it); called from the package's `__init__`, it also guards the exported names (`Interface`)."""
    _TABLES[package] = dict(table)
    module = sys.modules[package]
    for name in table:  # a submodule imported before this call is already bound: unbind it
        if isinstance(module.__dict__.get(name), types.ModuleType):
            del module.__dict__[name]
    module.__class__ = Interface

    def __getattr__(name: str) -> Any:
        holder = table.get(name)
        if holder is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{holder}"), name)

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__
