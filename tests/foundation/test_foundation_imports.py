"""The CLI stays fast: --help and validate never import the heavy libraries."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "tensorflow",
    "google.cloud.aiplatform",
    "google.cloud.aiplatform_v1",
    "google.cloud.storage",
    "keras",
    "tf_keras",
)
PROBE = """
import json, sys
from vertex_trainer.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')
               or m.startswith(('google.cloud.aiplatform', 'google.cloud.storage')))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def probe(*args):
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT)
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["validate", "job_specs/resnet50-h100x8-flex.yaml"],
        ["validate", "--help"],
        ["submit", "--help"],
        ["hardware"],
        [
            "render",
            "job_specs/resnet50-tpu-v5e.yaml",
            "--set",
            "image.repository=null",
            "--set",
            "image.uri=x/y:z",
        ],
    ],
)
def test_no_heavy_imports(args):
    result = probe(*args)
    assert result["code"] in (0, None)
    assert result["heavy"] == [], result["heavy"]


def test_probe_can_see_a_heavy_import():
    # The probe itself must be able to fail: importing storage shows up.
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from google.cloud import storage; "
            "print(any(m.startswith('google.cloud.storage') for m in sys.modules))",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.stdout.strip() == "True"


LOADED = """
import json, sys
from vertex_trainer.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("vertex_trainer.cli."))), file=sys.stderr)
"""


def _cli_modules_loaded(*args) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", LOADED, *args], capture_output=True, text=True, cwd=ROOT)
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_a_command_loads_only_its_own_module():
    """Lazy command modules (cli/__init__.py): `validate` imports spec_cmds (and the shared
    common), not the modules of submit, data, dev or pipeline."""
    assert _cli_modules_loaded("validate", "job_specs/resnet50-h100x8-flex.yaml") == [
        "vertex_trainer.cli.common",
        "vertex_trainer.cli.spec_cmds",
    ]
    assert "vertex_trainer.cli.jobs" in _cli_modules_loaded("submit", "--help")


def test_the_command_table_names_what_each_module_registers_and_help_lists_it_all():
    """cli.COMMANDS cannot drift from the modules: each module registers exactly the commands
    its line names, and --help lists every one of them with its docstring's first line."""
    from vertex_trainer.cli import COMMANDS, _infos

    for module, names in COMMANDS.items():
        assert tuple(_infos(module)) == names, module
    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    assert listed == [name for names in COMMANDS.values() for name in names]
    submit = r"^  submit +Create the Vertex AI CustomJob \(or run it here with --local\)\.$"
    assert re.search(submit, proc.stdout, re.M)
