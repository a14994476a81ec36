"""Fixtures for the local-runner tests: a Cloud Storage emulator (with TensorFlow's TLS route),
hand-written CustomJob bodies, Settings built the way the edge builds them, and checks that no
process outlives a run."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from vertex_trainer.emulators.gcs import GcsEmulator
from vertex_trainer.settings import Settings

# Variables of the Cloud Storage route; removed from the environment a test gives run_local when
# it needs "no route" regardless of the shell the suite runs in.
GCS_ROUTE_VARS = (
    "STORAGE_EMULATOR_HOST",
    "https_proxy",
    "HTTPS_PROXY",
    "http_proxy",
    "HTTP_PROXY",
    "CURL_CA_BUNDLE",
    "GOOGLE_AUTH_TOKEN_FOR_TESTING",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
)


def local_settings(**extra: str) -> Settings:
    """Settings as the edge makes them: this process's environment plus `extra`."""
    return Settings(environ=dict(os.environ) | extra)


def settings_without_gcs(tmp_path, **extra: str) -> Settings:
    """Settings whose environment has no Cloud Storage route: no emulator variables, and no
    Application Default Credentials (HOME points at an empty directory)."""
    env = {k: v for k, v in os.environ.items() if k not in GCS_ROUTE_VARS}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return Settings(environ=env | {"HOME": str(home)} | extra)


@pytest.fixture(scope="session")
def gcs_emulator():
    """One in-memory gcp-storage-emulator + TLS proxy for the whole session (reusable)."""
    with GcsEmulator() as emu:
        yield emu


@pytest.fixture
def gcs_bucket(gcs_emulator) -> str:
    """A fresh bucket in the session emulator; its name."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    gcs_emulator.create_bucket(name)
    return name


@pytest.fixture
def gcs_env(gcs_emulator) -> dict[str, str]:
    """The emulator route (what `vertex-trainer dev gcs-emulator` tells users to export)."""
    return gcs_emulator.env()


@pytest.fixture
def marker() -> str:
    """A per-test token: put it in the replicas' environment to find their processes in /proc."""
    return f"VT_TEST_{uuid.uuid4().hex}"


def worker_pool(args=(), *, replicas: int = 1, command=None, env=None) -> dict:
    cs: dict = {"imageUri": "us-docker.pkg.dev/p/r/trainer:local", "args": list(args)}
    if command is not None:
        cs["command"] = list(command)
    if env:
        cs["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": str(replicas),
        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
        "containerSpec": cs,
    }


def custom_job(output_dir: str, pools: list[dict], name: str = "local-test") -> dict:
    """A CustomJob REST body of the shape render.custom_job produces."""
    return {
        "displayName": name,
        "labels": {"vertex-trainer-key": "k"},
        "jobSpec": {"workerPoolSpecs": pools, "baseOutputDirectory": {"outputUriPrefix": output_dir}},
    }


def python_command(script: str) -> list[str]:
    """A stand-in for the trainer: `python -c SCRIPT` (python is mapped to this interpreter)."""
    return ["python", "-c", script]


@pytest.fixture
def python_exe() -> str:
    return sys.executable
