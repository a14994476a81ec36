"""Fixtures for the local-runner tests: a Cloud Storage emulator (with TensorFlow's TLS route),
hand-written CustomJob bodies, and a check that no process outlives a run."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from vertex_trainer.emulators.gcs import GcsEmulator

# Env keys the emulator route sets; tests put them into os.environ with monkeypatch.setenv so
# the runner's children inherit them exactly as they would from a user's shell.


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
def gcs_env(gcs_emulator, monkeypatch) -> dict[str, str]:
    """Put the emulator route into os.environ (as `vertex-trainer dev gcs-emulator` tells users
    to); returns the variables."""
    env = gcs_emulator.env()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def worker_pool(args=(), *, replicas: int = 1, command=None, env=None) -> dict:
    cs: dict = {"imageUri": "us-docker.pkg.dev/p/r/trainer:local", "args": list(args)}
    if command is not None:
        cs["command"] = list(command)
    if env:
        cs["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": str(replicas),
            "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}, "containerSpec": cs}


def custom_job(output_dir: str, pools: list[dict], name: str = "local-test") -> dict:
    """A CustomJob REST body of the shape render.custom_job produces."""
    return {"displayName": name, "labels": {"vertex-trainer-key": "k"},
            "jobSpec": {"workerPoolSpecs": pools,
                        "baseOutputDirectory": {"outputUriPrefix": output_dir}}}


def python_command(script: str) -> list[str]:
    """A stand-in for the trainer: `python -c SCRIPT` (python is mapped to this interpreter)."""
    return ["python", "-c", script]


def pid_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie (read from /proc; psutil is not installed)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def processes_with_env(marker: str) -> list[int]:
    """PIDs whose environment contains `marker` (a per-test token given to every replica)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read() and pid_alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def python_exe() -> str:
    return sys.executable
