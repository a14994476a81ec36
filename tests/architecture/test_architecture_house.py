"""The house's shape stays whole (docs/architecture.md, issue 44): no module basename is used more
than twice, and each capability's named interface (the names its __init__ lists) resolves to what
its modules define. (That the page names every package: test_architecture_docs.py.)"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from collections import Counter
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vertex_trainer"
INTERFACE_CONTRACT = "a capability uses another only through that package's named interface"


def _reused(root: Path) -> dict[str, int]:
    """Module basenames used more than twice below `root` (__init__.py, __main__.py aside)."""
    counts = Counter(p.name for p in root.rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    return {name: n for name, n in counts.items() if n > 2}


def test_no_module_basename_is_used_more_than_twice():
    assert sum(1 for _ in PACKAGE.rglob("*.py")) > 100  # the walk found the package
    assert _reused(PACKAGE) == {}


def test_the_basename_count_sees_a_third_use(tmp_path):
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "jobs.py").write_text("")
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "a" / "plan.py").write_text("")
    (tmp_path / "b" / "plan.py").write_text("")
    assert _reused(tmp_path) == {"jobs.py": 3}


def _capabilities() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == INTERFACE_CONTRACT]
    return list(contract["source_modules"])


def _typed_imports(package: str) -> list[tuple[str, str, str]]:
    """(module, name, as) of each import the package's __init__ makes for mypy only."""
    path = Path(importlib.import_module(package).__file__ or "")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    found += [(inner.module, a.name, a.asname or a.name) for a in inner.names]
    return found


def _interface_problems(package: str) -> list[str]:
    """What is wrong with a package's named interface (its __all__): a name that does not
    resolve, resolves to a module (a name that is also a module of the package: `from package
    import name` then gives the module once the module is loaded), changes between two reads, or
    is not the object mypy was told it is."""
    module = importlib.import_module(package)
    problems = []
    for name in getattr(module, "__all__", []):
        try:
            first = getattr(module, name)
            scope: dict[str, object] = {}
            exec(f"from {package} import {name}", scope)
        except (AttributeError, ImportError) as exc:
            problems.append(f"{package}.{name}: {exc}")
            continue
        if isinstance(first, types.ModuleType) or isinstance(scope[name], types.ModuleType):
            problems.append(f"{package}.{name} is a module of the package, not the name it exports")
        elif getattr(module, name) is not first or scope[name] is not first:
            problems.append(f"{package}.{name} changes from one read to the next")
    for source, name, alias in _typed_imports(package):
        if any(problem.startswith(f"{package}.{alias} ") for problem in problems):
            continue  # said above
        typed = getattr(importlib.import_module(source), name)
        if alias not in getattr(module, "__all__", []) or getattr(module, alias, None) is not typed:
            problems.append(f"{package}.{alias}: not {source}.{name}, as its TYPE_CHECKING import says")
    return problems


def test_every_capability_is_a_package_whose_interface_resolves():
    capabilities = _capabilities()
    assert {"vertex_trainer.cost", "vertex_trainer.capacity", "vertex_trainer.automation"} <= set(
        capabilities
    )
    for package in capabilities:
        init = PACKAGE / package.split(".", 1)[1] / "__init__.py"
        assert init.is_file() and ast.get_docstring(ast.parse(init.read_text())), package
    assert sum(len(getattr(importlib.import_module(p), "__all__", [])) for p in capabilities) > 20
    problems = [problem for package in capabilities for problem in _interface_problems(package)]
    assert problems == []


def test_the_interface_check_sees_a_name_shadowed_by_a_module(tmp_path, monkeypatch):
    package = tmp_path / "l5_probe_capability"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A capability whose exported `steps` is also the name of one of its modules."""\n'
        "from vertex_trainer import interface\n"
        '__all__ = ["steps", "total"]\n'
        '__getattr__, __dir__ = interface.exports(__name__, {"steps": "steps", "total": "steps"})\n'
    )
    (package / "steps.py").write_text("def steps():\n    return 1\n\n\ndef total():\n    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        problems = _interface_problems("l5_probe_capability")
    finally:
        for name in [m for m in sys.modules if m.startswith("l5_probe_capability")]:
            del sys.modules[name]
    assert problems == ["l5_probe_capability.steps is a module of the package, not the name it exports"]
