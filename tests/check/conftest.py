"""Fixtures for `check` and `setup` (issue 33): the sandbox in this process with an API disabled
and a permission denied, a spec that names a service account, a bucket and a repository, and the
CLI run in this process against it. Nothing here starts TensorFlow: no job is waited for."""

from __future__ import annotations

import os

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer.sandbox import Sandbox

PROJECT, REGION, BUCKET = "sandbox", "us-central1", "check-bucket"
SA = "trainer@sandbox.iam.gserviceaccount.com"
REPO = "projects/sandbox/locations/us-central1/repositories/training"
SPEC = f"""\
name: check-demo
project: {PROJECT}
region: {REGION}
hardware: cpu
service_account: {SA}
image:
  repository: us-central1-docker.pkg.dev/{PROJECT}/training/trainer
  builder: cloud-build
output_dir: gs://{BUCKET}/runs/demo
trainer:
  model: tiny-cnn
  train_data: gs://{BUCKET}/data/train-*
  num_classes: 10
  image_size: 16
  epochs: 1
  batch_size: 8
"""


def start_sandbox(**kwargs) -> Sandbox:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "AIP_"))}
    return Sandbox(env, project=PROJECT, region=REGION, **kwargs).start()


@pytest.fixture
def box():
    """The sandbox with the Vertex AI API disabled and actAs denied; the bucket and the
    repository exist."""
    sandbox = start_sandbox(buckets=[BUCKET], deny=["iam.serviceAccounts.actAs"], disable_apis=["aiplatform"])
    sandbox.iam.add_repository(REPO)
    try:
        yield sandbox
    finally:
        sandbox.stop()


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def run_box(box, tmp_path):
    """`vertex-trainer ARGS` in this process with the sandbox's variables."""
    return cli_runner(edge_env(tmp_path, **box.env()))
