"""Fixtures for the serving tests: two small trained exports (trained once per session) and the
container's entrypoint, `python -m trainer.serve`, running one of them.

- `digits_run`: tiny-cnn on scikit-learn's bundled 8x8 digits (PNG records), the suite's one
  local training of them to eval accuracy >= 0.9; the held-out digits are served and scored
  against the run's eval_accuracy.
- `synth_run`: tiny-cnn on random 24x24 JPEGs with the default 0.875 eval crop, trained under
  mixed_bfloat16 on two CPU replicas (MirroredStrategy): the export path with a real crop, a
  mixed-precision policy and distributed variables.
Training runs in subprocesses, as the container runs it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

PYTHON = sys.executable
# Two cores are shared with other test runs: keep every TensorFlow process small.
THREAD_FLAGS = ["--intra-op-threads=2", "--inter-op-threads=2", "--data-threads=2"]
DEADLINE_SECS = 90


def tf_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIP_", "CLUSTER_SPEC", "TF_CONFIG"))}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""})
    env.update(extra)
    return env


@dataclasses.dataclass(frozen=True)
class Run:
    """A finished training run: base dir (metrics.json), model dir, its held-out images."""

    base: Path
    data: Path
    images: list[bytes]  # encoded held-out images (the eval records' bytes, in order)
    labels: list[int]

    @property
    def model_dir(self) -> Path:
        return self.base / "model"

    @property
    def metrics(self) -> dict:
        return json.loads((self.base / "metrics.json").read_text())


def train(data: Path, base: Path, **flags) -> None:
    args = {
        "model": "tiny-cnn",
        "train-data": f"{data}/train-*",
        "eval-data": f"{data}/validation-*",
        "model-dir": f"{base}/model/",
        "checkpoint-dir": f"{base}/checkpoints/",
        "tensorboard-dir": f"{base}/logs/",
    }
    args.update({k.replace("_", "-"): v for k, v in flags.items()})
    cmd = [PYTHON, "-m", "trainer.task", *[f"--{k}={v}" for k, v in args.items()], *THREAD_FLAGS]
    result = subprocess.run(cmd, env=tf_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr


def write_records(path: Path, images: list[bytes], labels: list[int], image_format: str) -> None:
    import tensorflow as tf

    from trainer import datagen

    with tf.io.TFRecordWriter(str(path)) as w:
        for data, label in zip(images, labels, strict=True):
            w.write(datagen.encode_example(data, label, height=0, width=0, image_format=image_format))


def read_records(files: list[Path]) -> tuple[list[bytes], list[int]]:
    import tensorflow as tf

    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }
    images, labels = [], []
    for record in tf.data.TFRecordDataset([str(f) for f in files]):
        parsed = tf.io.parse_single_example(record, features)
        images.append(parsed["image/encoded"].numpy())
        labels.append(int(parsed["image/class/label"]))
    return images, labels


def png(pixels) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory) -> Run:
    """tiny-cnn trained on 1500 digits; the other 297, PNG-encoded, are held out."""
    from tests.shared import write_digits

    data = write_digits(tmp_path_factory.mktemp("digits-data"), train_shards=3)
    base = tmp_path_factory.mktemp("digits-run")
    # Crops hurt 8x8 digits: no augmentation, whole image at eval (as tests/trainer does).
    train(
        data,
        base,
        num_classes=10,
        image_size=8,  # the digits' own size (the odd-shapes and synth cases resize)
        epochs=4,  # 240 steps of 25: eval accuracy 0.985-0.996 in eight runs (3 epochs: 0.96-0.975)
        batch_size=25,
        base_batch_size=25,
        learning_rate=0.1,
        warmup_epochs=1,
        augment="none",
        eval_crop_fraction=1.0,
        weight_decay=0,
    )
    images, labels = read_records(sorted(data.glob("validation-*")))
    return Run(base, data, images, labels)


@pytest.fixture(scope="session")
def synth_run(tmp_path_factory) -> Run:
    """tiny-cnn on random 24x24 JPEGs (4 classes), eval crop 0.875, mixed_bfloat16, 2 replicas."""
    from trainer import datagen

    data = tmp_path_factory.mktemp("synth-data")
    datagen.synthesize(
        str(data), examples=128, shards=2, image_size=24, num_classes=4, seed=1, eval_examples=32
    )
    base = tmp_path_factory.mktemp("synth-run")
    # Two replicas: the model's variables are distributed when the signatures are saved.
    train(
        data,
        base,
        num_classes=4,
        image_size=16,
        epochs=1,
        batch_size=16,
        base_batch_size=16,
        learning_rate=0.1,
        warmup_epochs=0,
        precision="mixed_bfloat16",
        eval_crop_fraction=0.875,
        cpu_replicas=2,
    )
    images, labels = read_records(sorted(data.glob("validation-*")))
    return Run(base, data, images, labels)


@dataclasses.dataclass
class Server:
    """A running `python -m trainer.serve`."""

    url: str
    health_route: str
    predict_route: str
    deployed_model_id: str
    process: subprocess.Popen
    output: list[str]


# Routes as Vertex AI sets them (AIP_PREDICT_ROUTE names the endpoint and deployed model).
VERTEX_ENV = {
    "AIP_HEALTH_ROUTE": "/v1/endpoints/123/deployedModels/456",
    "AIP_PREDICT_ROUTE": "/v1/endpoints/123/deployedModels/456:predict",
    "AIP_DEPLOYED_MODEL_ID": "456",
}


@pytest.fixture(scope="session")
def digits_server(digits_run) -> Server:
    """The container's entrypoint on the digits export, configured by Vertex AI's variables only."""
    env = tf_env(AIP_STORAGE_URI=str(digits_run.model_dir), AIP_HTTP_PORT="0", **VERTEX_ENV)
    proc = subprocess.Popen(
        [PYTHON, "-m", "trainer.serve", "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        for line in proc.stdout:
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        url = wait_for_url(lines, output)
        server = Server(
            url,
            VERTEX_ENV["AIP_HEALTH_ROUTE"],
            VERTEX_ENV["AIP_PREDICT_ROUTE"],
            VERTEX_ENV["AIP_DEPLOYED_MODEL_ID"],
            proc,
            output,
        )
        wait_healthy(server.url + server.health_route)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def wait_for_url(lines: queue.Queue, output: list[str]) -> str:
    """The URL from the server's "serving http://..." line (port 0: the kernel picked it)."""
    deadline = time.monotonic() + DEADLINE_SECS
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            pytest.fail("trainer.serve did not report its URL:\n" + "".join(output))
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            pytest.fail("trainer.serve exited:\n" + "".join(output))
        if " serving http://" in line:
            return line.split(" serving ", 1)[1].split()[0]


def wait_healthy(url: str) -> None:
    """Poll the health route until 200, within the deadline."""
    deadline = time.monotonic() + DEADLINE_SECS
    status = None
    while time.monotonic() < deadline:
        status, _ = call("GET", url)
        if status == 200:
            return
        time.sleep(0.1)
    pytest.fail(f"{url} never answered 200 (last: {status})")


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy


def call(method: str, url: str, body=None, headers: dict | None = None) -> tuple[int | None, dict]:
    """(status, JSON answer) of one request; (None, {}) when nothing listens."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with _NO_PROXY.open(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except (urllib.error.URLError, ConnectionError):
        return None, {}
