"""The house rules that a reviewer would otherwise have to remember (docs/architecture.md):
nothing below the edge reads the environment, no source file grows past ~600 lines, the layer
contracts hold (import-linter, also run by `make test`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vertex_trainer"
# The edge reads the environment once; the emulators are servers of their own (run by `dev`
# commands and tests), not part of the client's layers.
EDGE = ("cli/", "api/", "emulators/")
MAX_LINES = 600


def _env_reads(path: Path) -> list[int]:
    """Lines of a file that use `os.environ`, `os.getenv` or `from os import environ/getenv`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv", "environb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "getenv") for a in node.names)
        ):
            found.append(node.lineno)
    return sorted(found)


def test_nothing_below_the_edge_reads_the_environment():
    below = [p for p in PACKAGE.rglob("*.py") if not p.relative_to(PACKAGE).as_posix().startswith(EDGE)]
    assert len(below) > 20  # the walk found the package
    reads = [f"{p.relative_to(ROOT)}:{line}" for p in below for line in _env_reads(p)]
    assert reads == [], "read the environment at the edge (cli/, api.py) and pass Settings down"


def test_the_env_scanner_sees_a_read(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nx = os.environ.get('A')\nfrom os import getenv\n")
    assert _env_reads(probe) == [2, 3]


@pytest.mark.parametrize("folder", ["vertex_trainer", "trainer_image/trainer", "tests", "benchmarks"])
def test_no_source_file_over_600_lines(folder):
    files = list((ROOT / folder).rglob("*.py"))
    assert files
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these by job (at most {MAX_LINES} lines)"


def test_layer_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
