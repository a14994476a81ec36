"""Fixtures for the cost tests (docs/contract.md section 12): the fake Vertex AI, the Cloud Billing
Catalog stand-in, the seed's spec (2 x 8 H100, 4 days, the bundled trainer) and a CLI runner."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli_support import FAST_RETRY, cli_command
from vertex_trainer.emulators.billing import FakeBilling
from vertex_trainer.emulators.vertex import FakeVertex

PROJECT, REGION = "test-project", "us-central1"

SEED = {
    "name": "resnet50-h100x16",
    "project": PROJECT,
    "region": REGION,
    "hardware": "h100x8",
    "replicas": 2,
    "image": {"repository": "us-central1-docker.pkg.dev/test-project/training/trainer"},
    "scheduling": {"strategy": "standard", "timeout": "4d"},
    "output_dir": "gs://test-bucket/runs/resnet50",
    "trainer": {"model": "resnet50", "train_data": "gs://test-bucket/imagenet/train-*",
                "num_classes": 1000, "image_size": 224, "epochs": 90, "batch_size": 8192,
                "steps_per_epoch": 156},
}


def spec_data(**changes) -> dict:
    """The seed's spec with `changes` merged into its top level (and into scheduling/trainer)."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in SEED.items()}
    for key, value in changes.items():
        if key in ("scheduling", "trainer") and isinstance(value, dict):
            data[key] = {**data[key], **value}
        elif value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


@pytest.fixture
def spec_file(tmp_path):
    def write(**changes) -> Path:
        path = tmp_path / f"job-{len(list(tmp_path.glob('job-*.yaml')))}.yaml"
        path.write_text(yaml.safe_dump(spec_data(**changes), sort_keys=False))
        return path

    return write


@pytest.fixture
def fake():
    with FakeVertex() as server:
        yield server


@pytest.fixture
def billing():
    with FakeBilling() as server:
        yield server


@pytest.fixture
def run_cli(tmp_path):
    """Run `vertex-trainer ARGS...` with the given endpoints (vertex=, billing=)."""

    def run(*args, vertex: FakeVertex | None = None, billing: FakeBilling | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "STORAGE_EMULATOR"))}
        (tmp_path / "gcloud").mkdir(exist_ok=True)
        env.update({"VERTEX_TRAINER_RETRY": FAST_RETRY, "VERTEX_TRAINER_POLL_INTERVAL": "0.02",
                    "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "NO_GCE_CHECK": "true", "COLUMNS": "200"})
        if vertex is not None:
            env["VERTEX_TRAINER_API_ENDPOINT"] = vertex.url
        if billing is not None:
            env["VERTEX_TRAINER_BILLING_ENDPOINT"] = billing.url
        return subprocess.run([*cli_command(), *map(str, args)], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=Path(__file__).parents[2])

    return run
