"""Fixtures of the run-identity tests (issue 40 items 1-2, docs/contract.md section 15): a script
job of our own whose "training" is a few lines of Python (no TensorFlow), writing what a trainer
writes where Vertex AI says it goes, so that whose folder holds what can be read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPOSITORY = "us-central1-docker.pkg.dev/my-project-1/training/digits"  # (unused here: a local run)

# The run's code: optionally empties a folder first (as a Google course's trainer does with
# `tf.io.gfile.rmtree(output_dir)`), then writes a model and metrics.json in its own folder, each
# carrying the job id the run was given, and a checkpoint that counts the runs of that folder.
TASK = """
import json, os, shutil, sys
wipe = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--wipe=")), None)
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
base = os.path.dirname(model)
if wipe == "run":
    shutil.rmtree(base, ignore_errors=True)
elif wipe == "output_dir":
    shutil.rmtree(os.path.dirname(base), ignore_errors=True)
job = os.environ["CLOUD_ML_JOB_ID"]
checkpoints = os.environ["AIP_CHECKPOINT_DIR"]
os.makedirs(checkpoints, exist_ok=True)
seen = os.path.join(checkpoints, "runs.txt")
runs = (open(seen).read().split() if os.path.exists(seen) else []) + [job]
open(seen, "w").write(" ".join(runs))
os.makedirs(model, exist_ok=True)
open(os.path.join(model, "saved_model.pb"), "w").write(job)
json.dump({"job": job, "runs_in_folder": len(runs), "eval_accuracy": 0.5},
          open(os.path.join(base, "metrics.json"), "w"))
print("trained", job, "run", len(runs), "of this folder")
"""


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(TASK)
    return code


def write_spec(tmp_path: Path, code: Path, **changes: Any) -> Path:
    """A one-replica CPU script job `digits` with output_dir <tmp>/runs (a local-only spec)."""
    data: dict[str, Any] = {
        "name": "digits",
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", "repository": REPOSITORY},
        "output_dir": str(tmp_path / "runs"),
    }
    data.update(changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path
