"""Fixtures for the capacity tests: the fake Vertex AI and the fake Cloud Quotas API, an H100 spec
whose plan is flex-start -> spot -> standard, and a CLI runner pointed at the fakes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vertex_trainer.emulators.quotas import FakeQuotas
from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings

PROJECT, REGION = "test-project", "us-central1"
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.05, deadline=10, read_timeout=5)
H100 = "aiplatform.googleapis.com/custom_model_training_nvidia_h100_gpus"
H100_SPOT = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100_gpus"

SPEC = {
    "name": "h100-fallback",
    "project": PROJECT,
    "region": REGION,
    "hardware": "h100x8",
    "image": {"uri": "us-docker.pkg.dev/test-project/training/trainer:v1"},
    "scheduling": {"strategy": "flex-start", "max_wait": "30m", "timeout": "2h",
                   "fallback": ["spot", "standard"]},
    "output_dir": "gs://test-bucket/runs/h100",
    "trainer": {"model": "tiny-cnn", "train_data": "gs://test-bucket/data/train-*", "num_classes": 10,
                "image_size": 32, "epochs": 1, "batch_size": 64},
}


@pytest.fixture
def fake():
    with FakeVertex() as server:
        yield server


@pytest.fixture
def quotas():
    with FakeQuotas() as server:
        yield server


@pytest.fixture
def settings(fake) -> Settings:
    return Settings(vertex_endpoint=fake.url, retry=FAST_RETRY, poll=PollPolicy.parse("0.02"))


@pytest.fixture
def spec_file(tmp_path):
    """Write the spec (with `changes` merged into its top level) and return its path."""

    def write(**changes) -> Path:
        data = {**SPEC, **changes}
        path = tmp_path / f"job-{len(list(tmp_path.glob('job-*.yaml')))}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def cli_env(fake, tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "STORAGE_EMULATOR"))}
    (tmp_path / "gcloud").mkdir(exist_ok=True)
    env.update({
        "VERTEX_TRAINER_API_ENDPOINT": fake.url,
        "VERTEX_TRAINER_RETRY": "attempts=4,initial=0.01,maximum=0.05,deadline=10,read_timeout=5",
        "VERTEX_TRAINER_POLL_INTERVAL": "0.02",
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "NO_GCE_CHECK": "true",
        "COLUMNS": "200",
    })
    return env


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in a subprocess; `quotas=` points it at a fake Cloud Quotas."""

    def run(*args, quotas: FakeQuotas | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        env = dict(cli_env)
        if quotas is not None:
            env["VERTEX_TRAINER_QUOTAS_ENDPOINT"] = quotas.url
        script = Path(sys.executable).parent / "vertex-trainer"
        cmd = [str(script)] if script.exists() else [sys.executable, "-m", "vertex_trainer"]
        return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=Path(__file__).parents[2])

    return run


def strategies(fake: FakeVertex) -> list[str]:
    """The scheduling strategy of every create the fake received, in order."""
    return [c.body["jobSpec"]["scheduling"]["strategy"] for c in fake.calls("create")]
