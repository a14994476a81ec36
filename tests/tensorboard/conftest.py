"""Fixtures for `tensorboard: auto` (issue 43 item 4): the T4 job of tests/shared.py with a service
account and `tensorboard: auto`, submitted through the CLI in this process to the fake Vertex AI
(`fake`, `run_cli`: tests/conftest.py). No job runs: the fake scripts its states."""

from __future__ import annotations

import json

import pytest

from tests.shared import PROJECT, REGION, spec_yaml, write_spec

SA = f"trainer@{PROJECT}.iam.gserviceaccount.com"
AUTO = spec_yaml(service_account=SA, tensorboard="auto")
PARENT = f"projects/{PROJECT}/locations/{REGION}"


@pytest.fixture
def auto_spec(tmp_path):
    """The spec file of the T4 job with `tensorboard: auto`."""
    return write_spec(tmp_path, AUTO, "auto.yaml")


@pytest.fixture
def submit(run_cli, auto_spec):
    """`submit SPEC -o json --idempotency-key KEY`: returns (the JSON object, the stderr)."""

    def run(key: str, spec=None):
        result = run_cli("submit", spec or auto_spec, "-o", "json", "--idempotency-key", key)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout), result.stderr

    return run
