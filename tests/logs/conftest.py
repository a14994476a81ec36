"""Fixtures for the logs tests: a fake Cloud Logging and a fake Vertex AI on loopback, the real
client code against them (in process, and as the CLI in a subprocess)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli_support import cli_command, edge_env

from vertex_trainer.emulators.logging import FakeLogging
from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings

PROJECT, REGION = "test-project", "us-central1"
FAST_RETRY = RetryPolicy(attempts=5, initial=0.01, maximum=0.05, deadline=10, read_timeout=5)
ROOT = Path(__file__).resolve().parents[2]

SPEC = """\
name: logs-test
project: test-project
region: us-central1
hardware: t4x1
image:
  uri: us-docker.pkg.dev/test-project/training/trainer:v1
scheduling:
  strategy: spot
  timeout: 2h
output_dir: gs://test-bucket/runs/logs
trainer:
  model: tiny-cnn
  train_data: gs://test-bucket/data/train-*
  num_classes: 10
  image_size: 32
  epochs: 1
  batch_size: 64
"""


@pytest.fixture
def logging_fake():
    with FakeLogging() as server:
        yield server


@pytest.fixture
def vertex_fake():
    with FakeVertex() as server:
        yield server


@pytest.fixture
def settings(logging_fake, vertex_fake) -> Settings:
    return Settings(logging_endpoint=logging_fake.url, vertex_endpoint=vertex_fake.url,
                    retry=FAST_RETRY, poll=PollPolicy(initial=0.02, maximum=0.1))


@pytest.fixture
def spec_file(tmp_path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


def job_body(**scheduling) -> dict:
    """A CustomJob REST body (what render produces), for jobs added straight to the fake."""
    return {
        "displayName": "logs-job",
        "labels": {"vertex-trainer-key": "k1", "vertex-trainer-spec": "s1"},
        "jobSpec": {
            "workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                "acceleratorCount": 1},
                "replicaCount": "1",
                "containerSpec": {"imageUri": "us-docker.pkg.dev/test-project/training/trainer:v1"},
            }],
            "scheduling": {"timeout": "3600s", **scheduling},
        },
    }


@pytest.fixture
def cli_env(logging_fake, vertex_fake, tmp_path) -> dict[str, str]:
    """The CLI's environment: both fakes, fast retries and polls, no gcloud configuration."""
    return edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=vertex_fake.url,
                    VERTEX_TRAINER_LOGGING_ENDPOINT=logging_fake.url,
                    VERTEX_TRAINER_RETRY="attempts=5,initial=0.01,maximum=0.05,deadline=10,read_timeout=5")


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...`; returns the CompletedProcess (text)."""

    def run(*args, env: dict[str, str] | None = None, timeout: float = 60):
        return subprocess.run([*cli_command(), *map(str, args)], capture_output=True, text=True,
                              env={**cli_env, **(env or {})}, timeout=timeout, cwd=ROOT)

    return run


@pytest.fixture
def popen_cli(cli_env):
    """Start `vertex-trainer ARGS...` without waiting; the test awaits events, then communicates."""
    started = []

    def start(*args, env: dict[str, str] | None = None):
        proc = subprocess.Popen([*cli_command(), *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**cli_env, **(env or {})},
                                cwd=ROOT)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
