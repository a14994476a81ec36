"""`vertex-trainer --help` imports no pydantic model (issue 44, "Win back the CLI's start-up").

--help lists every command from its module's docstrings; it must not load the spec's pydantic
models (nor pydantic itself) on the way, which once came in through cli/logs.py -> present/logs.py
-> local/display.py -> the eager local/__init__.py -> local/run.py -> local/owncode.py ->
spec/images.py and cost --help twice its time (benchmarks/RESULTS-cli.md). Each probe is a fresh
`python -m vertex_trainer` (run through runpy, then sys.modules is read), under `-X importtime`
so that a failure names the chain of imports that brought the model in.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.shared import MODULES_PROBE

ROOT = Path(__file__).resolve().parents[2]

_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$")


def _run(*args: str) -> tuple[int | None, str, set[str], list[tuple[int, str]]]:
    """(exit code, stdout, the modules loaded, importtime's (depth, module) lines in its order)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", MODULES_PROBE, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    result = json.loads(lines[-1])
    imports = [(len(m[1]), m[2]) for m in map(_IMPORT_LINE.match, lines) if m]
    return result["code"], proc.stdout, set(result["modules"]), imports


def _model_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] == "pydantic" or m.startswith("vertex_trainer.spec"))


def _chain(imports: list[tuple[int, str]], module: str) -> str:
    """Who imported `module` first: importtime prints a module after its imports, one level
    deeper, so its importers are the next lines each at a lesser depth."""
    at = next((i for i, (_, name) in enumerate(imports) if name == module), None)
    if at is None:
        return module
    depth, chain = imports[at][0], [module]
    for level, name in imports[at + 1 :]:
        if level < depth:
            chain.append(name)
            depth = level
    return " -> ".join(reversed(chain))


def test_help_imports_no_pydantic_model():
    code, out, modules, imports = _run("--help")
    assert code in (0, None)
    assert "Usage: vertex-trainer" in out and "validate" in out and "submit" in out
    loaded = _model_modules(modules)
    first = next((name for _, name in imports if name in loaded), "")
    # The chain down to the first of them it entered (e.g. ... -> spec/images.py -> spec).
    chain = _chain(imports, first).split(" -> ")
    chain = chain[: next((i + 1 for i, name in enumerate(chain) if name in loaded), len(chain))]
    assert loaded == [], (
        f"--help imported {len(loaded)} modules of pydantic and vertex_trainer.spec, "
        f"first through {' -> '.join(chain)}"
    )


def test_the_probe_sees_the_models_a_command_loads(tmp_path):
    # The same probe, on a command that does read a spec: the models and pydantic show up, and
    # the chain names who imported them.
    spec = tmp_path / "job.yaml"
    spec.write_text((ROOT / "job_specs" / "resnet50-a100x8.yaml").read_text())
    code, _, modules, imports = _run(
        "validate", str(spec), "--set", "image.repository=null", "--set", "image.uri=x/y:z"
    )
    assert code in (0, None)
    assert {"pydantic", "vertex_trainer.spec.model"} <= set(_model_modules(modules))
    chain = _chain(imports, "vertex_trainer.spec.model").split(" -> ")
    assert chain[-1] == "vertex_trainer.spec.model" and chain[0].startswith("vertex_trainer")
