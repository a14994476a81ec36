"""Fixtures for the logs tests: a fake Cloud Logging and a fake Vertex AI on loopback, the real
client code against them (through the API, and through the CLI: in this process, and as a
subprocess where the test follows a running `submit --wait`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.cli_support import edge_env
from tests.shared import FAST_RETRY, IMAGE, PROJECT, REGION, T4_JOB, server_fixture, spec_yaml, write_spec
from tests.shared import job_body as make_job_body
from vertex_trainer.emulators.logging import FakeLogging
from vertex_trainer.settings import PollPolicy, Settings

__all__ = ["PROJECT", "REGION", "job_body"]  # (the tests import them from here)

SPEC = spec_yaml(T4_JOB, name="logs-test", output_dir="gs://test-bucket/runs/logs", trainer={"epochs": 1})


logging_fake = server_fixture("logging_fake", FakeLogging)


@pytest.fixture
def vertex_fake(fake):
    """The fake Vertex AI (tests/conftest.py's `fake`), by the name these tests give it."""
    return fake


@pytest.fixture
def settings(logging_fake, vertex_fake) -> Settings:
    return Settings(
        logging_endpoint=logging_fake.url,
        vertex_endpoint=vertex_fake.url,
        retry=dataclasses.replace(FAST_RETRY, attempts=5),
        poll=PollPolicy(initial=0.02, maximum=0.1),
    )


@pytest.fixture
def spec_file(tmp_path) -> Path:
    return write_spec(tmp_path, SPEC, "job.yaml")


def job_body(**scheduling) -> dict:
    """A CustomJob REST body (what render produces), for jobs added straight to the fake."""
    return make_job_body("k1", "s1", name="logs-job", image=IMAGE, timeout="3600s", **scheduling)


@pytest.fixture
def cli_env(logging_fake, vertex_fake, tmp_path) -> dict[str, str]:
    """The CLI's environment: both fakes, fast retries and polls, no gcloud configuration."""
    return edge_env(
        tmp_path,
        VERTEX_TRAINER_API_ENDPOINT=vertex_fake.url,
        VERTEX_TRAINER_LOGGING_ENDPOINT=logging_fake.url,
        VERTEX_TRAINER_RETRY="attempts=5,initial=0.01,maximum=0.05,deadline=10,read_timeout=5",
    )
