"""Fixtures for the foundation tests: a valid base spec and a CLI runner that returns exit codes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "name": "base-job",
    "project": "my-project",
    "region": "us-central1",
    "hardware": "a100x8",
    "image": {"uri": "us-docker.pkg.dev/my-project/training/trainer:v1"},
    "output_dir": "gs://my-bucket/runs/base",
    "trainer": {
        "model": "resnet50",
        "train_data": "gs://my-bucket/train-*",
        "num_classes": 1000,
        "batch_size": 2048,
    },
}


@pytest.fixture
def base_spec():
    return copy.deepcopy(BASE)


@pytest.fixture
def write_spec(tmp_path):
    def write(data, name="job.yaml"):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return path

    return write


@pytest.fixture
def cli(monkeypatch):
    """Run the CLI in-process (main(), as the console script does); returns exit code and output."""
    from tests.cli_support import run_in_process

    monkeypatch.delenv("VERTEX_TRAINER_DEBUG", raising=False)
    return run_in_process


@pytest.fixture(autouse=True)
def _no_ambient_gcloud(monkeypatch, tmp_path):
    # The developer's own gcloud config or project must not leak into spec resolution.
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud-config"))
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_AI_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("USER", "tester")
