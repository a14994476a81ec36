"""The import contracts are complete (issue 25 item 7): lint-imports fails on a product module that
imports the stand-ins, or on a stand-in that imports the client it stands in for; and the two
lists in pyproject.toml name every module of the package, so a new module is covered too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vertex_trainer"
LINT = Path(sys.executable).with_name("lint-imports")
FAKES = "the fakes share no code with the clients they stand in for"
STAND_INS = "only the sandbox and the dev commands import the stand-ins (vertex_trainer.emulators)"


def _contract(name: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["name"] == name)


def _top_level_modules() -> set[str]:
    found = {
        f"vertex_trainer.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")
    }
    found |= {f"vertex_trainer.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    return found


def test_the_contracts_name_every_module_of_the_package():
    modules = _top_level_modules()
    assert {"vertex_trainer.vertex", "vertex_trainer.contract", "vertex_trainer.emulators"} <= modules
    fakes_may_not = set(_contract(FAKES)["forbidden_modules"])
    assert fakes_may_not == modules - {"vertex_trainer.emulators"}
    product = set(_contract(STAND_INS)["source_modules"])
    assert product == modules - {"vertex_trainer.emulators", "vertex_trainer.sandbox"}


def _lint_copy(tmp_path: Path, offenders: dict[str, str]) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the package (and this pyproject.toml) with `offenders` added:
    {path under vertex_trainer/: source}. The tree itself is never touched."""
    shutil.copytree(PACKAGE, tmp_path / "vertex_trainer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for rel, source in offenders.items():
        (tmp_path / "vertex_trainer" / rel).write_text(source)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def test_lint_imports_fails_on_a_product_module_that_imports_the_stand_ins(tmp_path):
    proc = _lint_copy(
        tmp_path,
        {
            "cost/offender.py": "from vertex_trainer.emulators.vertex import FakeVertex\n",
            "emulators/offender.py": "from vertex_trainer.contract import KEY_LABEL\n",
        },
    )
    out = " ".join(proc.stdout.split())  # the report wraps long names
    assert proc.returncode != 0, out[-2000:]
    assert f"{STAND_INS} BROKEN" in out and f"{FAKES} BROKEN" in out
    assert "vertex_trainer.cost.offender -> vertex_trainer.emulators.vertex" in out
    assert "vertex_trainer.emulators.offender -> vertex_trainer.contract" in out
    assert ", 2 broken." in out  # those two, and no other


def test_the_copy_without_offenders_is_clean(tmp_path):
    # The same copy, unchanged, passes: the failure above is the offenders', not the copy's.
    proc = _lint_copy(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " 0 broken" in proc.stdout
