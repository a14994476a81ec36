"""Fixtures for the storage-triggered runs: the rendered function served by the real
functions-framework (a subprocess on loopback), fed CloudEvents as Eventarc sends them (binary
content mode: ce-* headers, the StorageObjectData JSON body), talking to the fake Vertex AI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from vertex_trainer.emulators.vertex import FakeVertex

BIN = Path(sys.executable).parent
IMAGE = "us-central1-docker.pkg.dev/test-project/training/trainer:v1"
BUCKET = "data-bucket"

SPEC = f"""\
name: digits
project: test-project
region: us-central1
hardware: a100x1
image:
  uri: {IMAGE}
scheduling:
  strategy: flex-start
  max_wait: 4h
  timeout: 1d
output_dir: "gs://out-bucket/runs/{{{{ trigger.folder_name }}}}-{{{{ trigger.generation }}}}"
labels: {{team: vision}}
trainer:
  model: tiny-cnn
  train_data: "{{{{ trigger.folder }}}}/train-*"
  num_classes: 10
  epochs: 1
"""
DEPLOY = """\
deploy:
  endpoint: digits
  machine_type: n1-standard-2
"""


@pytest.fixture(scope="module")
def fake():
    with FakeVertex() as server:
        yield server


def write_spec(directory: Path, text: str = SPEC) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "digits.yaml"
    path.write_text(text)
    return path


def function_env(fake_url: str, home: Path) -> dict:
    """The function's environment: the fake Vertex AI, fast retries, no gcloud configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_CLOUD", "CLOUDSDK_", "STORAGE_EMULATOR"))
    }
    env.update(
        VERTEX_TRAINER_API_ENDPOINT=fake_url,
        HOME=str(home),
        CLOUDSDK_CONFIG=str(home / "gcloud"),
        VERTEX_TRAINER_RETRY="attempts=3,initial=0.01,maximum=0.05,deadline=5",
        VERTEX_TRAINER_POLL_INTERVAL="0.01",
        GUNICORN_LOG_LEVEL="info",
        PYTHONUNBUFFERED="1",
    )
    return env


class Lines:
    """A process's output lines as they come, and a way to await one (no sleeping)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()

    def add(self, line: str) -> None:
        with self._changed:
            self.lines.append(line.rstrip("\n"))
            self._changed.notify_all()

    def wait_for(self, predicate, timeout: float = 30.0):
        """The first line (as found by `predicate`, which returns a value or None) to come."""

        def found():
            return next((v for v in map(predicate, self.lines) if v), None)

        with self._changed:
            self._changed.wait_for(lambda: found() is not None, timeout=timeout)
            return found()

    def records(self, predicate=lambda r: True) -> list[dict]:
        return [r for r in log_records(self.lines) if predicate(r)]

    def await_records(self, count: int, predicate, timeout: float = 30.0) -> list[dict]:
        """Wait until `count` JSON log records match `predicate` (the function logs one per
        event before it answers, but the pipe may deliver the line a moment later)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.records(predicate)) >= count, timeout=timeout)
            return self.records(predicate)


@contextmanager
def served(function_dir: Path, env: dict):
    """`functions-framework --target on_object_finalized` in the function directory, as Cloud Run
    runs it, on a free loopback port. Yields (url, stdout Lines, stderr Lines)."""
    proc = subprocess.Popen(
        [
            str(BIN / "functions-framework"),
            "--target=on_object_finalized",
            "--source=main.py",
            "--signature-type=cloudevent",
            "--host=127.0.0.1",
            "--port=0",
        ],
        cwd=function_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = Lines(), Lines()

    def pump(stream, sink: Lines) -> None:
        for line in stream:
            sink.add(line)
        sink.add("<closed>")

    for stream, sink in ((proc.stdout, out), (proc.stderr, err)):
        threading.Thread(target=pump, args=(stream, sink), daemon=True).start()
    try:

        def listening(line: str):
            m = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
            return m.group(1) if m else ("exited" if line == "<closed>" else None)

        url = err.wait_for(listening, timeout=30)
        assert url and url != "exited", "the function did not start:\n" + "\n".join(err.lines[-40:])
        yield url, out, err
    finally:
        proc.send_signal(signal.SIGINT)  # gunicorn's quick shutdown (TERM waits for its workers)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def send_event(
    url: str,
    name: str,
    generation: int | str,
    *,
    bucket: str = BUCKET,
    event_id: str | None = None,
    event_type: str = "google.cloud.storage.object.v1.finalized",
):
    """POST one CloudEvent the way Eventarc delivers a Cloud Storage event (binary content mode)."""
    import requests

    data = {
        "kind": "storage#object",
        "id": f"{bucket}/{name}/{generation}",
        "bucket": bucket,
        "name": name,
        "generation": str(generation),
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "size": "0",
        "storageClass": "STANDARD",
        "timeCreated": "2026-11-30T07:00:00.000Z",
        "updated": "2026-11-30T07:00:00.000Z",
        "md5Hash": "1B2M2Y8AsgTpgAmY7PhCfg==",
        "crc32c": "AAAAAA==",
        "etag": "CAE=",
    }
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "ce-specversion": "1.0",
        "ce-type": event_type,
        "ce-source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "ce-subject": f"objects/{name}",
        "ce-id": event_id or f"{abs(hash((name, generation)))}",
        "ce-time": "2026-11-30T07:00:00.123Z",
        "ce-bucket": bucket,
    }
    return requests.post(url, data=json.dumps(data), headers=headers, timeout=60)


def log_records(lines: list[str]) -> list[dict]:
    """The function's JSON log lines (what Cloud Logging would show as structured entries)."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "severity" in record:
            out.append(record)
    return out
