"""Fixtures for the tuning tests: a tune: spec, the fake Vertex, a CLI runner, and (for the local
search) scikit-learn's 8x8 digits as PNG TFRecords."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.shared import PROJECT, REGION, T4_JOB, spec_yaml
from tests.shared import write_spec as write_text

__all__ = ["PROJECT", "REGION", "spec_data", "write_spec"]  # (the tests import them from here)

# docs/contract.md section 10's example block, on the submit tests' job.
TUNE = {
    "metric": "accuracy",
    "goal": "maximize",
    "max_trials": 16,
    "parallel_trials": 4,
    "max_failed_trials": 2,
    "algorithm": "auto",
    "parameters": {
        "learning_rate": {"min": 0.01, "max": 1.0, "scale": "log"},
        "warmup_epochs": {"min": 0, "max": 5, "type": "integer"},
        "batch_size": {"values": [256, 512, 1024]},
        "optimizer": {"values": ["sgd", "lamb"]},
    },
}
SPEC = spec_yaml(
    T4_JOB,
    name="tune-test",
    output_dir="gs://test-bucket/runs/tune",
    labels={"team": "vision"},
    tune=TUNE,
    trainer={"eval_data": "gs://test-bucket/data/validation-*", "epochs": 8, "batch_size": 256},
)


def spec_data() -> dict:
    return yaml.safe_load(SPEC)


@pytest.fixture
def spec_file(tmp_path) -> Path:
    return write_text(tmp_path, SPEC, "tune.yaml")


def write_spec(tmp_path: Path, change=None, name: str = "spec.yaml") -> Path:
    """SPEC with `change(data)` applied, written to a file."""
    data = copy.deepcopy(spec_data())
    if change:
        change(data)
    return write_text(tmp_path, yaml.safe_dump(data, sort_keys=False), name)


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in this process (tests/shared.py `cli_runner`); a trial takes
    longer, so the timeout a caller does not give is 120 s."""
    from tests.shared import cli_runner

    return cli_runner(cli_env, timeout=120)


@pytest.fixture(scope="session")
def digits_data(tmp_path_factory) -> Path:
    """scikit-learn's bundled 8x8 digits as PNG TFRecords: 1500 train (2 shards), 297 validation."""
    from tests.shared import write_digits

    return write_digits(tmp_path_factory.mktemp("tune-digits"), train_shards=2)
