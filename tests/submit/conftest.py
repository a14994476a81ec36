"""Fixtures for the submitter tests: a fake Vertex server, specs, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.cli_support import cli_command, edge_env

from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.settings import RetryPolicy, Settings
from vertex_trainer.vertex.jobs import JobsClient

PROJECT, REGION = "test-project", "us-central1"
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.05, deadline=10, read_timeout=5)

SPEC = """\
name: tiny-cnn-test
project: test-project
region: us-central1
hardware: t4x1
image:
  uri: us-docker.pkg.dev/test-project/training/trainer:v1
scheduling:
  strategy: spot
  timeout: 2h
output_dir: gs://test-bucket/runs/tiny
labels: {team: vision}
env: {TF_CPP_MIN_LOG_LEVEL: "1"}
trainer:
  model: tiny-cnn
  train_data: gs://test-bucket/data/train-*
  eval_data: gs://test-bucket/data/validation-*
  num_classes: 10
  image_size: 32
  epochs: 2
  batch_size: 64
"""


@pytest.fixture
def fake():
    with FakeVertex() as server:
        yield server


@pytest.fixture
def client(fake):
    return JobsClient(PROJECT, REGION, settings=Settings(vertex_endpoint=fake.url, retry=FAST_RETRY))


@pytest.fixture
def spec_file(tmp_path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def job_body():
    """A plain CustomJob REST body (enum names, int64 as strings), as render produces."""

    def make(key: str = "key-1", spec_hash: str = "abc123") -> dict:
        return {
            "displayName": "plain-job",
            "labels": {"vertex-trainer-key": key, "vertex-trainer-spec": spec_hash},
            "jobSpec": {
                "workerPoolSpecs": [{
                    "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                    "acceleratorCount": 1},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/t:v1", "args": ["--epochs=1"]},
                }],
                "scheduling": {"strategy": "SPOT", "timeout": "3600s"},
            },
        }

    return make


@pytest.fixture
def cli_env(fake, tmp_path) -> dict[str, str]:
    """Environment for CLI subprocesses: the fake endpoint, fast retries and polls, no gcloud config."""
    return edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url)


@pytest.fixture
def cli() -> list[str]:
    """The command that runs vertex-trainer."""
    return cli_command()


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in a subprocess; returns CompletedProcess (text)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([*cli_command(), *map(str, args)], capture_output=True, text=True,
                              env=env or cli_env, timeout=timeout, cwd=Path(__file__).parents[2])

    return run


@pytest.fixture
def no_socket_env(cli_env, tmp_path) -> dict[str, str]:
    """cli_env plus an audit hook that kills the process (exit 99) on any socket connect."""
    hook_dir = tmp_path / "no-socket"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(textwrap.dedent("""\
        import os, sys
        def _hook(event, args):
            if event in ("socket.connect", "socket.getaddrinfo"):
                sys.stderr.write(f"SOCKET USED: {event} {args[1:]!r}\\n")
                sys.stderr.flush()
                os._exit(99)
        sys.addaudithook(_hook)
        """))
    env = dict(cli_env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
    return env
