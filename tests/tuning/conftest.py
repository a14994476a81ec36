"""Fixtures for the tuning tests: a tune: spec, the fake Vertex, a CLI runner, and (for the local
search) scikit-learn's 8x8 digits as PNG TFRecords."""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
import yaml

from tests.shared import FAST_POLL, PROJECT, REGION, T4_JOB, fake_settings, spec_yaml

from vertex_trainer.settings import Settings

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
SPEC = spec_yaml(T4_JOB, name="tune-test", output_dir="gs://test-bucket/runs/tune",
                 labels={"team": "vision"}, tune=TUNE,
                 trainer={"eval_data": "gs://test-bucket/data/validation-*", "epochs": 8,
                          "batch_size": 256})


def spec_data() -> dict:
    return yaml.safe_load(SPEC)


@pytest.fixture
def settings(fake) -> Settings:
    return fake_settings(fake, poll=FAST_POLL)


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
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in a subprocess (trials take longer: 120 s by default)."""
    from tests.shared import cli_runner

    return cli_runner(cli_env, timeout=120)


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
