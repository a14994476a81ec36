"""Fixtures for the tuning tests: a tune: spec, the fake Vertex, a CLI runner, and (for the local
search) scikit-learn's 8x8 digits as PNG TFRecords."""

from __future__ import annotations

import copy
import io
import subprocess
from pathlib import Path

import pytest

from tests.cli_support import cli_command, edge_env
import yaml

from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings

PROJECT, REGION = "test-project", "us-central1"
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.05, deadline=10, read_timeout=5)
FAST_POLL = PollPolicy(initial=0.01, maximum=0.02)

# docs/contract.md section 10's example block, on the submit tests' job.
SPEC = """\
name: tune-test
project: test-project
region: us-central1
hardware: t4x1
image:
  uri: us-docker.pkg.dev/test-project/training/trainer:v1
scheduling:
  strategy: spot
  timeout: 2h
output_dir: gs://test-bucket/runs/tune
labels: {team: vision}
trainer:
  model: tiny-cnn
  train_data: gs://test-bucket/data/train-*
  eval_data: gs://test-bucket/data/validation-*
  num_classes: 10
  image_size: 32
  epochs: 8
  batch_size: 256
tune:
  metric: accuracy
  goal: maximize
  max_trials: 16
  parallel_trials: 4
  max_failed_trials: 2
  algorithm: auto
  parameters:
    learning_rate: {min: 0.01, max: 1.0, scale: log}
    warmup_epochs: {min: 0, max: 5, type: integer}
    batch_size: {values: [256, 512, 1024]}
    optimizer: {values: [sgd, lamb]}
"""


def spec_data() -> dict:
    return yaml.safe_load(SPEC)


@pytest.fixture
def fake():
    with FakeVertex() as server:
        yield server


@pytest.fixture
def settings(fake) -> Settings:
    return Settings(vertex_endpoint=fake.url, retry=FAST_RETRY, poll=FAST_POLL)


@pytest.fixture
def spec_file(tmp_path) -> Path:
    path = tmp_path / "tune.yaml"
    path.write_text(SPEC)
    return path


def write_spec(tmp_path: Path, change=None, name: str = "spec.yaml") -> Path:
    """SPEC with `change(data)` applied, written to a file."""
    data = copy.deepcopy(spec_data())
    if change:
        change(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def cli_env(fake, tmp_path) -> dict[str, str]:
    return edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url)


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in a subprocess; returns CompletedProcess (text)."""

    def run(*args, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*cli_command(), *map(str, args)], capture_output=True, text=True,
                              env=env or cli_env, timeout=timeout, cwd=Path(__file__).parents[2])

    return run


@pytest.fixture(scope="session")
def digits_data(tmp_path_factory) -> Path:
    """scikit-learn's bundled 8x8 digits as PNG TFRecords: 1500 train (2 shards), 297 validation."""
    import numpy as np
    import tensorflow as tf
    from PIL import Image
    from sklearn.datasets import load_digits

    from trainer import datagen

    out = tmp_path_factory.mktemp("tune-digits")
    digits = load_digits()
    images = np.clip(digits.images * 16, 0, 255).astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(images))
    for split, idx, shards in (("train", order[:1500], 2), ("validation", order[1500:], 1)):
        for s in range(shards):
            with tf.io.TFRecordWriter(datagen.shard_name(str(out), split, s, shards)) as w:
                for i in idx[s::shards]:
                    buf = io.BytesIO()
                    Image.fromarray(images[i]).convert("RGB").save(buf, format="PNG")
                    w.write(datagen.encode_example(buf.getvalue(), int(digits.target[i]),
                                                   height=8, width=8, image_format="PNG"))
    return out
