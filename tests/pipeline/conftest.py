"""Fixtures for the pipeline tests: a spec that trains on Flex Start and deploys, the fake
Vertex AI (which learns pipelineJobs, models and endpoints), fast settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared import QUICK_RETRY, fake_settings, spec_yaml, write_spec
from vertex_trainer.settings import Settings

IMAGE = "us-central1-docker.pkg.dev/test-project/training/trainer:v1"
JOB = {
    "name": "digits-flex",
    "project": "test-project",
    "region": "europe-west4",
    "hardware": "a100x2",
    "replicas": 2,
    "image": {"uri": IMAGE},
    "scheduling": {"strategy": "flex-start", "max_wait": "4h", "timeout": "1d"},
    "output_dir": "gs://out-bucket/runs/digits",
    "service_account": "trainer@test-project.iam.gserviceaccount.com",
    "network": "projects/123/global/networks/vpc",
    "labels": {"team": "vision"},
    "env": {"TF_CPP_MIN_LOG_LEVEL": "1"},
    "trainer": {
        "model": "tiny-cnn",
        "train_data": "gs://data-bucket/digits/train-*",
        "num_classes": 10,
        "batch_size": 64,
    },
    "deploy": {
        "model": "digits",
        "endpoint": "digits",
        "machine_type": "n1-standard-4",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 1,
        "min_replicas": 1,
        "max_replicas": 3,
        "traffic": 50,
    },
}
SPEC = spec_yaml(JOB)


@pytest.fixture
def settings(fake) -> Settings:
    return fake_settings(fake, retry=QUICK_RETRY)


@pytest.fixture
def spec_file(tmp_path) -> Path:
    return write_spec(tmp_path, SPEC, "digits-flex.yaml")


@pytest.fixture
def spec(spec_file, settings):
    from vertex_trainer import api

    return api.load_spec(spec_file, settings=settings)
