"""What the `--resume` tests share: a CPU job whose output_dir is a folder of the GCS emulator's
bucket, the emulator holding the job's data (and, with `wrote`, the checkpoint its first run wrote
in digits-ci-1/), and the CLI, in this process, pointed at it and at the fake Vertex AI."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import requests

from tests.cli_support import edge_env
from tests.shared import GS_BASE, GS_JOB, MODULES_PROBE, cli_runner, spec_yaml, storage_emulator, write_spec

BASE, JOB = GS_BASE, GS_JOB

# The start of a local run's script that writes to the GCS emulator (the replica has the route in
# its environment): its job id, its model folder, and put(gs://..., text).
TASK_HEAD = """host = os.environ["STORAGE_EMULATOR_HOST"]
job = os.environ["CLOUD_ML_JOB_ID"]
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
send = urllib.request.build_opener(urllib.request.ProxyHandler({})).open
def put(uri, data):
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    send(urllib.request.Request(f"{host}/upload/storage/v1/b/{bucket}/o?{query}", data.encode()))
"""

# A whole such script: it writes its job id as its model and as metrics.json's "job".
GS_TASK = (
    """
import json, os, urllib.parse, urllib.request
"""
    + TASK_HEAD
    + """put(f"{model}/saved_model.pb", job)
put(f"{model.rsplit('/', 1)[0]}/metrics.json", json.dumps({"job": job}))
"""
)


def put(url: str, bucket: str, name: str) -> None:
    """One small object into the emulator at `url`."""
    r = requests.post(
        f"{url}/upload/storage/v1/b/{bucket}/o", params={"uploadType": "media", "name": name}, data=b"x"
    )
    assert r.ok, r.text


@contextlib.contextmanager
def buckets(*, wrote: bool = True) -> Iterator[str]:
    """The emulator's URL, its two buckets filled as the docstring above says."""
    with storage_emulator("out-bucket", "data-bucket") as url:
        put(url, "data-bucket", "d/train-00000")
        if wrote:
            put(url, "out-bucket", "runs/digits/digits-ci-1/checkpoints/ckpt-1.index")
        yield url


def cli(fake, tmp_path: Path, url: str):
    """The CLI runner for the fake Vertex AI and the emulator at `url`."""
    return cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url, STORAGE_EMULATOR_HOST=url))


def gs_cli(fake, tmp_path: Path, emulator, bucket: str):
    """The CLI runner (in this process, in tmp_path) for the fake Vertex AI and the module's GCS
    emulator (tests/hostile/conftest.py), with a job's data in `bucket`: d/train-00000."""
    put(emulator.endpoint, bucket, "d/train-00000")
    return cli_runner(
        edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url, **emulator.env()), cwd=tmp_path
    )


def cloud_job(tmp_path: Path, bucket: str, output_dir: str | None = None, **fields) -> Path:
    """The CPU job digits for Vertex AI (the bundled trainer) on `bucket`'s d/train-*, into
    gs://BUCKET/runs (or `output_dir`); `fields` add to the spec. Returns the spec's path."""
    trainer = {"train_data": f"gs://{bucket}/d/train-*", "eval_data": None}
    folder = output_dir or f"gs://{bucket}/runs"
    return write_spec(
        tmp_path,
        spec_yaml(
            None, name="digits", hardware="cpu", scheduling=None, output_dir=folder, trainer=trainer, **fields
        ),
    )


def modules_of_submit(fake, tmp_path: Path, emulator, spec: Path, key: str) -> set[str]:
    """`submit SPEC --idempotency-key KEY --no-wait` to the fake and the emulator in a process of
    its own (tests/shared.MODULES_PROBE): the modules it loaded (it must succeed)."""
    env = edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url, **emulator.env())
    line = [sys.executable, "-c", MODULES_PROBE, "submit", str(spec), "--idempotency-key", key, "--no-wait"]
    alone = subprocess.run(line, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    loaded = json.loads(alone.stderr.strip().splitlines()[-1])
    assert loaded["code"] in (0, None), alone.stderr
    return set(loaded["modules"])
