"""Fixtures for the cost tests (docs/contract.md section 12): the fake Vertex AI, the Cloud Billing
Catalog stand-in, the seed's spec (2 x 8 H100, 4 days, the bundled trainer) and a CLI runner."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import PROJECT, REGION, cli_runner, server_fixture, write_spec
from vertex_trainer.emulators.billing import FakeBilling
from vertex_trainer.emulators.vertex import FakeVertex

__all__ = ["PROJECT", "REGION", "spec_data"]  # (the tests import them from here)

SEED = {
    "name": "resnet50-h100x16",
    "project": PROJECT,
    "region": REGION,
    "hardware": "h100x8",
    "replicas": 2,
    "image": {"repository": "us-central1-docker.pkg.dev/test-project/training/trainer"},
    "scheduling": {"strategy": "standard", "timeout": "4d"},
    "output_dir": "gs://test-bucket/runs/resnet50",
    "trainer": {
        "model": "resnet50",
        "train_data": "gs://test-bucket/imagenet/train-*",
        "num_classes": 1000,
        "image_size": 224,
        "epochs": 90,
        "batch_size": 8192,
        "steps_per_epoch": 156,
    },
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
        return write_spec(tmp_path, yaml.safe_dump(spec_data(**changes), sort_keys=False))

    return write


billing = server_fixture("billing", FakeBilling)


@pytest.fixture
def run_cli(tmp_path):
    """Run `vertex-trainer ARGS...` (in this process, tests/shared.py `cli_runner`) with the given
    endpoints (vertex=, billing=) and no other."""
    return _runner(tmp_path, process=False)


@pytest.fixture
def run_cli_process(tmp_path):
    """`run_cli` in a real subprocess: for a run whose output is a child process's."""
    return _runner(tmp_path, process=True)


def _runner(tmp_path: Path, *, process: bool):
    run = cli_runner(edge_env(tmp_path), process=process)

    def run_with(
        *args, vertex: FakeVertex | None = None, billing: FakeBilling | None = None, timeout: float = 60
    ):
        env = {}
        if vertex is not None:
            env["VERTEX_TRAINER_API_ENDPOINT"] = vertex.url
        if billing is not None:
            env["VERTEX_TRAINER_BILLING_ENDPOINT"] = billing.url
        return run(*args, env=env, timeout=timeout)

    return run_with
