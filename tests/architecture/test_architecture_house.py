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

import pytest
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


@pytest.fixture
def probe_package(tmp_path, monkeypatch):
    """Write a package `l5_probe_capability` (files: name -> text) importable for one test."""

    def write(files: dict[str, str]) -> str:
        package = tmp_path / "l5_probe_capability"
        package.mkdir()
        for name, text in files.items():
            (package / name).write_text(text)
        return package.name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in [m for m in sys.modules if m.startswith("l5_probe_capability")]:
        del sys.modules[name]


STEPS = "def steps():\n    return 1\n\n\ndef total():\n    return 2\n"


def test_an_exported_name_stays_itself_after_its_namesake_module_is_imported(probe_package):
    package = probe_package(
        {
            "__init__.py": '"""A capability exporting `steps`, the name of one of its modules."""\n'
            "from vertex_trainer import interface\n"
            "from l5_probe_capability import early\n"  # bound before exports() is called
            '__all__ = ["early", "steps", "total"]\n'
            "__getattr__, __dir__ = interface.exports(\n"
            '    __name__, {"early": "early", "steps": "steps", "total": "steps"}\n'
            ")\n",
            "steps.py": STEPS,
            "early.py": "def early():\n    return 3\n",
            "helpers.py": "",
        }
    )
    module = importlib.import_module(package)
    steps_module = importlib.import_module(f"{package}.steps")  # binds `steps` on the package, unguarded
    importlib.import_module(f"{package}.helpers")
    assert module.steps is steps_module.steps and module.steps() == 1
    assert module.early() == 3  # the module imported before the table was set was unbound
    from l5_probe_capability.steps import total  # the submodule itself stays importable

    assert total is module.total and total() == 2
    assert isinstance(module.helpers, types.ModuleType)  # a module not exported binds as usual
    assert dir(module) == ["early", "steps", "total"]
    assert _interface_problems(package) == []


def test_the_interface_check_sees_a_name_shadowed_by_a_module(probe_package):
    package = probe_package(  # its own __getattr__, without interface.exports's guard
        {
            "__init__.py": '"""A capability exporting `steps`, the name of one of its modules."""\n'
            "import importlib\n"
            '__all__ = ["steps", "total"]\n\n\n'
            "def __getattr__(name):\n"
            '    return getattr(importlib.import_module(__name__ + ".steps"), name)\n',
            "steps.py": STEPS,
        }
    )
    assert _interface_problems(package) == [
        f"{package}.steps is a module of the package, not the name it exports"
    ]
