"""The CLI calls only the API (issue 31): an import contract forbids cli/ every module below the API
except the leaves, its list names every such module (a new one is covered too), and lint-imports
fails on a CLI module that reaches past the API, not on one that keeps to it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vertex_trainer"
LINT = Path(sys.executable).with_name("lint-imports")
CLI = "cli imports only the API, the text for people and the leaves"
# What a command may import: the API, the presentation layer, itself, and the leaves; and of each
# capability (a folder: docs/architecture.md) only its text for people, the modules named *_text.
ALLOWED = {
    "vertex_trainer.cli",
    "vertex_trainer.api",
    "vertex_trainer.present",
    "vertex_trainer.errors",
    "vertex_trainer.contract",
    "vertex_trainer.durations",
    "vertex_trainer.sizes",
    "vertex_trainer.suggest",
    "vertex_trainer.settings",
    "vertex_trainer.lazy",
    "vertex_trainer.catalog",
    "vertex_trainer.redact",
    "vertex_trainer.log",
}


def _contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["name"] == CLI)


def _top_level_modules() -> set[str]:
    found = {
        f"vertex_trainer.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")
    }
    found |= {f"vertex_trainer.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    return found


def _capabilities() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    interface = next(c for c in config["contracts"] if "named interface" in c["name"])
    return sorted(interface["source_modules"])


def test_the_contract_forbids_the_cli_every_module_but_the_api_present_the_text_and_the_leaves():
    contract = _contract()
    assert contract["type"] == "forbidden" and contract["source_modules"] == ["vertex_trainer.cli"]
    modules = _top_level_modules()
    assert ALLOWED <= modules  # a renamed leaf would make the set below vacuous
    capabilities = _capabilities()
    assert {"vertex_trainer.cost", "vertex_trainer.capacity", "vertex_trainer.deployment"} <= set(
        capabilities
    )
    logic = {
        f"{cap}.{p.stem}"
        for cap in capabilities
        for p in (ROOT / cap.replace(".", "/")).glob("*.py")
        if p.stem != "__init__" and not p.stem.endswith("_text")
    }
    assert "vertex_trainer.cost.estimate" in logic and "vertex_trainer.cost.cost_text" not in logic
    # ... and the container's trainer, which data synth and serve reach through the API.
    expected = (modules - ALLOWED - set(capabilities)) | logic | {"trainer"}
    assert set(contract["forbidden_modules"]) == expected
    # `dev sandbox` and `dev vertex|gcs|logging` start the stand-ins: only cli.dev may import them.
    ignored = contract.get("ignore_imports", [])
    assert "vertex_trainer.cli.dev -> vertex_trainer.sandbox" in ignored
    assert "vertex_trainer.cli.dev -> vertex_trainer.emulators.**" in ignored


def _lint_copy(tmp_path: Path, modules: dict[str, str]) -> str:
    """lint-imports' report on a copy of the package (and this pyproject.toml) with `modules`
    added: {path under vertex_trainer/: source}. The tree itself is never touched."""
    shutil.copytree(PACKAGE, tmp_path / "vertex_trainer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for rel, source in modules.items():
        (tmp_path / "vertex_trainer" / rel).write_text(source)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [str(LINT), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    return " ".join(proc.stdout.split())  # the report wraps long names


def test_lint_imports_fails_on_a_command_that_reaches_past_the_api(tmp_path):
    out = _lint_copy(
        tmp_path,
        {
            "cli/offender.py": (
                "from vertex_trainer.cost.estimate import estimate\n"
                "from vertex_trainer.local.display import SUMMARY_METRICS\n"
            ),
            # what a command may do: the API, the presentation layer and a leaf
            "cli/keeper.py": (
                "from vertex_trainer import api\n"
                "from vertex_trainer.cost.cost_text import estimate_text\n"
                "from vertex_trainer.errors import UserError\n"
            ),
            # the stand-ins from another command than dev: refused
            "cli/starter.py": "from vertex_trainer.sandbox import Sandbox\n",
        },
    )
    assert f"{CLI} BROKEN" in out, out[-3000:]
    assert "vertex_trainer.cli.offender -> vertex_trainer.cost.estimate" in out
    assert "vertex_trainer.cli.offender -> vertex_trainer.local.display" in out
    assert "vertex_trainer.cli.starter -> vertex_trainer.sandbox" in out
    assert "vertex_trainer.cli.keeper" not in out
