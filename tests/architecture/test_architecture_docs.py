"""The project's documents are in the project: every `docs/contract.md section N` the tree cites
exists, every `docs/*.md` it names is there, and nothing cites a document that only exists
outside the repository (STYLE: "a comment cites docs/..., never a file outside"). And they name
what is there: docs/architecture.md has a row for every package of vertex_trainer (and none for
one gone), and no page or source names a module path or `vertex_trainer.x.y` that is gone."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".txt", "Makefile", "Dockerfile")
OUTSIDE = re.compile(r"\b(?:FACTS\.md|CONTRACT\.md|shared/STYLE\.md|CONTRACT section \d+)")
CITED = re.compile(r"docs/contract\.md,?\s+sections?\s+(\d+)(?:\s*(?:-|and)\s*(\d+))?")
DOC = re.compile(r"\bdocs/([\w-]+\.md)")
PACKAGE = ROOT / "vertex_trainer"
PAGE = ROOT / "docs" / "architecture.md"
# A row of the "Where does X live" table: | `cli/` | ... or | `render.py` | ...
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)
# A path below a package of ours, as the docs write one: local/netns.py, templates/report.html.j2
PATH = re.compile(r"(?<![\w./:-])((?:[a-z_]+/)+[A-Za-z0-9_.-]*\.(?:py|j2|csv|json))(?![\w.])")
DOTTED = re.compile(r"\bvertex_trainer((?:\.[A-Za-z_]\w*)+)")


def _tree() -> dict[Path, str]:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        ROOT / f: (ROOT / f).read_text(errors="replace")
        for f in files
        if f.endswith(TEXT) and (ROOT / f).is_file()
    }


def _sections() -> set[int]:
    text = (ROOT / "docs" / "contract.md").read_text()
    return {int(n) for n in re.findall(r"^## (\d+)\. ", text, re.M)}


def test_every_cited_contract_section_exists():
    sections = _sections()
    assert sections == set(range(1, max(sections) + 1))  # numbered without gaps
    missing = []
    for path, text in _tree().items():
        for first, last in CITED.findall(text):
            for n in range(int(first), int(last or first) + 1):
                if n not in sections:
                    missing.append(f"{path.relative_to(ROOT)}: section {n}")
    assert not missing, missing


def test_every_docs_page_named_exists():
    missing = sorted(
        {
            f"{path.relative_to(ROOT)}: docs/{name}"
            for path, text in _tree().items()
            for name in DOC.findall(text)
            if not (ROOT / "docs" / name).exists()
        }
    )
    assert not missing, missing


def test_nothing_cites_a_document_outside_the_repository():
    here = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}: {m}"
        for path, text in _tree().items()
        if path != here
        for m in OUTSIDE.findall(text)
    ]
    assert not found, found


def test_the_checks_see_citations():
    """The scans above really read the tree (so they can fail)."""
    tree = _tree()
    assert sum(len(CITED.findall(t)) for t in tree.values()) > 50
    assert OUTSIDE.findall("see shared/FACTS.md") and CITED.findall("docs/contract.md sections 8 and 11")


def test_the_cli_reference_is_generated_from_the_cli_and_current():
    """docs/cli.md is what `make docs` prints now (run it after changing a command), in a bare
    environment: the reference does not depend on this machine's settings."""
    import os
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer.cli.reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(ROOT / "nonexistent")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "docs" / "cli.md").read_text(), "docs/cli.md is stale: run `make docs`"
    for command in ("## `submit`", "### `data synth`", "| `--idempotency-key KEY` |"):
        assert command in proc.stdout


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


def test_each_package_row_names_its_modules():
    """A package's row says what each of its modules holds: a module added (or renamed) is added
    to its row in docs/architecture.md."""
    rows = dict(re.findall(r"^\| `([^`]+/)` \| (.*)$", PAGE.read_text(), re.M))
    assert len(rows) > 20
    missing = [
        f"{folder}{module.name}"
        for folder, row in rows.items()
        for module in sorted(
            ((ROOT if folder.startswith("trainer_image/") else PACKAGE) / folder).glob("*.py")
        )
        if module.stem not in ("__init__", "__main__") and f"`{module.stem}`" not in row
    ]
    assert missing == [], "name each module in its package's row of docs/architecture.md"


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
