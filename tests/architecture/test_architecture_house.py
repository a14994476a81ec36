"""The house's shape stays written down and whole (docs/architecture.md, issue 44): the page names
every package of vertex_trainer and nothing that is gone, the docs name only files and modules
that exist, no module basename is used more than twice, and each capability's named interface
(the names its __init__ lists) resolves to what its modules define."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import types
from collections import Counter
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vertex_trainer"
PAGE = ROOT / "docs" / "architecture.md"
INTERFACE_CONTRACT = "a capability uses another only through that package's named interface"
# A row of the "Where does X live" table: | `cli/` | ... or | `render.py` | ...
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)
# A path below a package of ours, as the docs write one: local/netns.py, templates/report.html.j2
PATH = re.compile(r"(?<![\w./:-])((?:[a-z_]+/)+[A-Za-z0-9_.-]*\.(?:py|j2|csv|json))(?![\w.])")
DOTTED = re.compile(r"\bvertex_trainer((?:\.[A-Za-z_]\w*)+)")


def _packages() -> set[str]:
    """Each top-level module and folder of vertex_trainer, as the page writes it (`cli/`,
    `render.py`), and the container's trainer."""
    names = {
        f"{p.name}/" if p.is_dir() else p.name
        for p in PACKAGE.iterdir()
        if (p.is_dir() and p.name != "__pycache__") or p.suffix == ".py"
    }
    return names | {"trainer_image/trainer/"}


def test_the_architecture_page_names_every_package_and_nothing_gone():
    text = PAGE.read_text()
    rows = set(ROW.findall(text.split("## Where does X live", 1)[1].split("\n## ", 1)[0]))
    packages = _packages()
    assert {"cli/", "cost/", "render.py", "emulators/", "trainer_image/trainer/"} <= packages
    assert packages - rows == set(), "a package without its row in docs/architecture.md"
    assert rows - packages == set(), "a row of docs/architecture.md names a package that is gone"


def _stale(text: str) -> list[str]:
    """Paths below a package of ours, and `vertex_trainer.x.y` names, that name nothing."""
    top = {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    stale = [
        path
        for path in PATH.findall(text)
        if (path.split("/")[0] in top and not (PACKAGE / path).exists())
        or (path.split("/")[0] in ("tests", "benchmarks", "trainer_image") and not (ROOT / path).exists())
    ]
    for m in DOTTED.finditer(text):
        where, parts = PACKAGE, m[1].lstrip(".").split(".")
        while parts and (where / parts[0] / "__init__.py").exists():
            where = where / parts.pop(0)
        if parts and (where / f"{parts[0]}.py").exists():
            where = where / f"{parts.pop(0)}.py"
        if parts and parts[0] not in _defined(where / "__init__.py" if where.is_dir() else where):
            stale.append(m[0])
    return stale


def _defined(path: Path) -> set[str]:
    """The names a module's source defines, imports, or lists as strings (__all__, a lazy table)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return names


def test_the_docs_and_the_sources_name_only_modules_that_exist():
    """After a move (issue 44 renamed 53 modules), a docstring, comment or page that still
    names the old place is found here. (tests/ is not read: its probes name made-up modules.)"""
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "pyproject.toml"]
    sources = [
        p
        for folder in ("vertex_trainer", "trainer_image", "benchmarks")
        for p in (ROOT / folder).rglob("*.py")
    ]
    assert len(sources) > 200
    stale = [f"{p.relative_to(ROOT)}: {name}" for p in pages + sources for name in _stale(p.read_text())]
    assert stale == []


def test_the_stale_scan_sees_a_name_that_is_gone():
    found = _stale(
        "cost/workflows.py, vertex/jobs.py, `vertex_trainer.trigger.events`, "
        "vertex_trainer.vertex.custom_jobs.no_such_name; kept: local/netns.py, a/b.py, "
        "templates/report.html.j2, vertex_trainer.vertex.custom_jobs.create_idempotent, "
        "vertex_trainer.submit, vertex_trainer.cost.job_cost"
    )
    assert found == [
        "cost/workflows.py",
        "vertex/jobs.py",
        "vertex_trainer.trigger.events",
        "vertex_trainer.vertex.custom_jobs.no_such_name",
    ]


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
