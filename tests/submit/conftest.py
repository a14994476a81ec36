"""Fixtures for the submitter tests: a fake Vertex server, specs, and a CLI runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli_support import cli_command, no_socket_hook
from tests.shared import FAST_RETRY, PROJECT, REGION, T4_JOB, spec_yaml, write_spec
from tests.shared import job_body as make_job_body
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient

SPEC = spec_yaml(
    T4_JOB,
    labels={"team": "vision"},
    env={"TF_CPP_MIN_LOG_LEVEL": "1"},
    trainer={"eval_data": "gs://test-bucket/data/validation-*"},
)


@pytest.fixture
def client(fake):
    return JobsClient(PROJECT, REGION, settings=Settings(vertex_endpoint=fake.url, retry=FAST_RETRY))


@pytest.fixture
def spec_file(tmp_path) -> Path:
    return write_spec(tmp_path, SPEC, "job.yaml")


@pytest.fixture
def job_body():
    """A plain CustomJob REST body (enum names, int64 as strings), as render produces."""

    def make(key: str = "key-1", spec_hash: str = "abc123") -> dict:
        return make_job_body(key, spec_hash, args=["--epochs=1"])

    return make


@pytest.fixture
def cli() -> list[str]:
    """The command that runs vertex-trainer."""
    return cli_command()


@pytest.fixture
def no_socket_env(cli_env, tmp_path) -> dict[str, str]:
    """cli_env plus an audit hook that kills the process (exit 99) on any socket connect."""
    env = dict(cli_env)
    hook = no_socket_hook(tmp_path / "no-socket")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [hook, env.get("PYTHONPATH")]))
    return env
