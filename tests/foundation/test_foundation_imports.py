"""The CLI stays fast: --help and validate never import the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("tensorflow", "google.cloud.aiplatform", "google.cloud.aiplatform_v1", "google.cloud.storage", "keras",
         "tf_keras")
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


@pytest.mark.parametrize("args", [["--help"], ["validate", "job_specs/resnet50-h100x8-flex.yaml"],
                                  ["validate", "--help"], ["submit", "--help"], ["hardware"],
                                  ["render", "job_specs/resnet50-tpu-v5e.yaml", "--set", "image.repository=null",
                                   "--set", "image.uri=x/y:z"]])
def test_no_heavy_imports(args):
    result = probe(*args)
    assert result["code"] in (0, None)
    assert result["heavy"] == [], result["heavy"]


def test_probe_can_see_a_heavy_import():
    # The probe itself must be able to fail: importing storage shows up.
    proc = subprocess.run([sys.executable, "-c", "import sys; from google.cloud import storage; "
                           "print(any(m.startswith('google.cloud.storage') for m in sys.modules))"],
                          capture_output=True, text=True)
    assert proc.stdout.strip() == "True"
