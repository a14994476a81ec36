"""Fixtures for the capacity tests: the fake Vertex AI and the fake Cloud Quotas API, an H100 spec
whose plan is flex-start -> spot -> standard, and a CLI runner pointed at the fakes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.shared import FAST_RETRY, PROJECT, REGION, cli_runner, server_fixture, write_spec
from vertex_trainer.emulators.quotas import FakeQuotas
from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.settings import PollPolicy, Settings

__all__ = ["FAST_RETRY", "PROJECT", "REGION"]  # (the tests import them from here)
H100 = "aiplatform.googleapis.com/custom_model_training_nvidia_h100_gpus"
H100_SPOT = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100_gpus"

SPEC = {
    "name": "h100-fallback",
    "project": PROJECT,
    "region": REGION,
    "hardware": "h100x8",
    "image": {"uri": "us-docker.pkg.dev/test-project/training/trainer:v1"},
    "scheduling": {
        "strategy": "flex-start",
        "max_wait": "30m",
        "timeout": "2h",
        "fallback": ["spot", "standard"],
    },
    "output_dir": "gs://test-bucket/runs/h100",
    "trainer": {
        "model": "tiny-cnn",
        "train_data": "gs://test-bucket/data/train-*",
        "num_classes": 10,
        "image_size": 32,
        "epochs": 1,
        "batch_size": 64,
    },
}


quotas = server_fixture("quotas", FakeQuotas)


@pytest.fixture
def settings(fake) -> Settings:
    return Settings(vertex_endpoint=fake.url, retry=FAST_RETRY, poll=PollPolicy.parse("0.02"))


@pytest.fixture
def spec_file(tmp_path):
    """Write the spec (with `changes` merged into its top level) and return its path."""

    def write(**changes) -> Path:
        return write_spec(tmp_path, yaml.safe_dump({**SPEC, **changes}, sort_keys=False))

    return write


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in this process (tests/conftest.py's cli_env: the fake Vertex
    AI); `quotas=` points it at a fake Cloud Quotas too."""
    run = cli_runner(cli_env)

    def run_with(*args, quotas: FakeQuotas | None = None, timeout: float = 60):
        return run(
            *args, env={"VERTEX_TRAINER_QUOTAS_ENDPOINT": quotas.url} if quotas else None, timeout=timeout
        )

    return run_with


def strategies(fake: FakeVertex) -> list[str]:
    """The scheduling strategy of every create the fake received, in order."""
    return [c.body["jobSpec"]["scheduling"]["strategy"] for c in fake.calls("create")]


@pytest.fixture(autouse=True, scope="session")
def _aiplatform_types_loaded():
    """The fake parses bodies with aiplatform_v1: import it before any request, so the first
    create is not slower than the client's read timeout on a busy machine (a lost answer whose
    job the fake has not committed yet would be created again, as a real lost answer could)."""
    from google.cloud import aiplatform_v1  # noqa: F401
