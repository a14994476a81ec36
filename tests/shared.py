"""What the test folders share, in one place: the project and region the fakes serve, retry and
poll policies fast enough for loopback servers, settings pointed at a fake, a CLI runner, the job
spec most folders start from, and the CustomJob body the fake is fed directly.

The fixtures built on these (`fake`, `cli_env`, `run_cli`, `run_cli_process`, `popen_cli`) are in
tests/conftest.py, so every folder has them; a folder's conftest.py keeps only what is its own (its
spec, its other fakes) and overrides a shared fixture only where it needs something else.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.cli_support import cli_command, edge_env, invoke
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings

ROOT = Path(__file__).resolve().parents[1]
PROJECT, REGION = "test-project", "us-central1"
IMAGE = "us-docker.pkg.dev/test-project/training/trainer:v1"

# Loopback servers answer in milliseconds: retry fast, but still more than once.
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.05, deadline=10, read_timeout=5)
QUICK_RETRY = RetryPolicy(attempts=3, initial=0.01, maximum=0.02, deadline=5)
FAST_POLL = PollPolicy(initial=0.01, maximum=0.02)

# What every bundled-trainer run writes about its speed in metrics.json (trainer/task.py
# collect_metrics; docs/trainer.md "The throughput fields"), which bench and cost read: a built-in
# model's run has them (tests/trainer test_tiny_cnn_end_to_end) and so does a model factory's
# (tests/owncode test_the_example_factory_trains_through_the_bundled_trainer).
THROUGHPUT_FIELDS = (
    "train_examples_per_sec",
    "steady_examples_per_sec",
    "wall_examples_per_sec",
    "epoch_examples_per_sec",
    "step_time_ms",
    "compile_seconds",
    "train_seconds",
    "checkpoint_seconds",
    "input_wait_fraction",
    "host_cpu_busy_fraction",
)

# The CPU job the run-folder tests submit (tests/runs, the --resume hostile tests), with T4_JOB:
# its output_dir is out-bucket's folder of the GCS emulator, its data in data-bucket.
GS_BASE = "gs://out-bucket/runs/digits"
GS_JOB: dict[str, Any] = {
    "name": "digits",
    "hardware": "cpu",
    "scheduling": None,
    "output_dir": GS_BASE,
    "trainer": {"train_data": "gs://data-bucket/d/train-*", "eval_data": None},
}

# The T4 Spot job most folders submit (docs/contract.md section 1), as data: a folder's spec is
# this with its own changes (`spec_yaml`).
T4_JOB: dict[str, Any] = {
    "name": "tiny-cnn-test",
    "project": PROJECT,
    "region": REGION,
    "hardware": "t4x1",
    "image": {"uri": IMAGE},
    "scheduling": {"strategy": "spot", "timeout": "2h"},
    "output_dir": "gs://test-bucket/runs/tiny",
    "trainer": {
        "model": "tiny-cnn",
        "train_data": "gs://test-bucket/data/train-*",
        "num_classes": 10,
        "image_size": 32,
        "epochs": 2,
        "batch_size": 64,
    },
}

# The bundled trainer's tiny CNN on one CPU machine in test-project, into runs/digits: a spec's
# fields less its trainer block (the bounded-read attack tests add theirs).
DIGITS_CPU_JOB: dict[str, Any] = {
    "name": "digits",
    "project": "test-project",
    "region": "us-central1",
    "hardware": "cpu",
    "output_dir": "runs/digits",
}

# T4_JOB on one A100 at the standard strategy (priced in the shipped snapshot) for at most 2 h,
# with eval data: the job the tuning-cost tests price a search of.
A100_STANDARD_JOB: dict[str, Any] = {
    **T4_JOB,
    "hardware": "a100x1",
    "scheduling": {"strategy": "standard", "timeout": "2h"},
    "trainer": {**T4_JOB["trainer"], "eval_data": "gs://test-bucket/data/eval-*"},
}


def latest_run(output_dir: Path | str) -> Path:
    """The folder of the newest local run below `output_dir` (its `latest` link, docs/contract.md
    section 15), as the runner spelt it (the link is relative, so no symlink of the path is resolved)."""
    base = Path(output_dir)
    return base / os.readlink(base / "latest")


def records(run_dir: Path | str) -> Path:
    """The tool's records of the run in `run_dir`: <base>/.vertex-trainer/<run> (beside it)."""
    run = Path(run_dir)
    return run.parent / ".vertex-trainer" / run.name


def merged(base: dict, changes: dict) -> dict:
    """`base` with `changes` applied: a dict value merges into a dict, None removes the key."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def spec_yaml(base: dict | None = None, **changes: Any) -> str:
    """The YAML of `base` (default: T4_JOB) with `changes` merged in (see `merged`)."""
    return yaml.safe_dump(merged(T4_JOB if base is None else base, changes), sort_keys=False)


def write_spec(tmp_path: Path, text: str, name: str | None = None) -> Path:
    """Write a spec into `tmp_path`: as `name`, or the next free job-N.yaml."""
    path = tmp_path / (name or f"job-{len(list(tmp_path.glob('job-*.yaml')))}.yaml")
    path.write_text(text)
    return path


# A script job's task.py that trains nothing and leaves what a run leaves: its job id in
# model/saved_model.pb and in metrics.json beside it (which run wrote the folder, for the run
# ownership tests).
JOB_ID_TASK = """
import json, os
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
job = os.environ["CLOUD_ML_JOB_ID"]
os.makedirs(model, exist_ok=True)
open(os.path.join(model, "saved_model.pb"), "w").write(job)
json.dump({"job": job}, open(os.path.join(os.path.dirname(model), "metrics.json"), "w"))
"""


# `python -c MODULES_PROBE ARGS` runs `vertex-trainer ARGS` (as `python -m vertex_trainer`)
# and prints, as the last line of stderr, {"code": its exit code, "modules": what it loaded}.
MODULES_PROBE = """
import json, runpy, sys
sys.argv[0] = "vertex_trainer"
try:
    runpy.run_module("vertex_trainer", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def empty_folder(folder: Path) -> None:
    """`rm -rf folder/*`: everything below `folder` goes, the folder itself stays."""
    for path in sorted(folder.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    assert folder.is_dir() and not any(folder.iterdir())


def retry_after_emptying(tmp_path: Path, spec: Path, folder: Path) -> tuple[dict, dict, str]:
    """`submit SPEC --local --idempotency-key ci-7`, `rm -rf FOLDER/*`, the same submit again (the
    careless user's "train it afresh"), both exit 0: (the first's JSON, the second's, its stderr)."""
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    empty_folder(folder)
    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    return json.loads(first.stdout), json.loads(again.stdout), again.stderr


def script_job(tmp_path: Path, task: str, output_dir: Path | None = None, **image: str) -> Path:
    """A `hardware: cpu` script job named digits, its code folder tmp_path/code holding task.py =
    `task`; `image` adds to the image block. Returns the spec's path (tmp_path/spec.yaml)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(task)
    job: dict[str, Any] = {
        "name": "digits",
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", **image},
    }
    if output_dir is not None:
        job["output_dir"] = str(output_dir)
    return write_spec(tmp_path, yaml.safe_dump(job), "spec.yaml")


def fake_settings(
    fake: Any, *, retry: RetryPolicy = FAST_RETRY, poll: PollPolicy = FAST_POLL, **endpoints: Any
) -> Settings:
    """Settings for the client code against the fake Vertex AI `fake` (and other `endpoints`)."""
    return Settings(vertex_endpoint=fake.url, retry=retry, poll=poll, **endpoints)


def job_body(
    key: str = "key-1",
    spec_hash: str = "abc123",
    *,
    name: str = "plain-job",
    image: str = "us-docker.pkg.dev/p/r/t:v1",
    args: list[str] | None = None,
    **scheduling: Any,
) -> dict:
    """A CustomJob REST body as render produces it (enum names, int64 as strings), for jobs sent
    or added straight to the fake: one T4 replica, `scheduling` (default: SPOT, one hour)."""
    container: dict[str, Any] = {"imageUri": image}
    if args is not None:
        container["args"] = list(args)
    return {
        "displayName": name,
        "labels": {"vertex-trainer-key": key, "vertex-trainer-spec": spec_hash},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "n1-standard-8",
                        "acceleratorType": "NVIDIA_TESLA_T4",
                        "acceleratorCount": 1,
                    },
                    "replicaCount": "1",
                    "containerSpec": container,
                }
            ],
            "scheduling": scheduling or {"strategy": "SPOT", "timeout": "3600s"},
        },
    }


def cli_runner(
    base_env: dict[str, str], *, timeout: float = 60, cwd: Path = ROOT, process: bool = False
) -> Callable[..., subprocess.CompletedProcess]:
    """`run(*args, env=None, timeout=...)`: vertex-trainer ARGS with `base_env` (and `env` on top)
    in `cwd`; returns the CompletedProcess (text).

    In this process by default (tests/cli_support.py `invoke`: the same environment, directory,
    output and exit code, without a new interpreter's start-up and imports). `process=True` runs
    the console script in a subprocess, for the tests whose subject is the process: the exit code a
    shell sees, start-up. In this process `timeout` is not enforced: pytest-timeout (300 s a test)
    fails a call that hangs."""
    default_timeout = timeout

    def run(
        *args: Any, env: dict[str, str] | None = None, timeout: float = default_timeout
    ) -> subprocess.CompletedProcess:
        if not process:
            return invoke(args, env={**base_env, **(env or {})}, cwd=cwd)
        return subprocess.run(
            [*cli_command(), *map(str, args)],
            capture_output=True,
            text=True,
            env={**base_env, **(env or {})},
            timeout=timeout,
            cwd=cwd,
        )

    return run


class CliStarter:
    """`start(*args, env=None)`: vertex-trainer ARGS started without waiting (the test awaits
    events, then communicates); `stop()` kills whatever is still running."""

    def __init__(self, base_env: dict[str, str], cwd: Path = ROOT):
        self.base_env, self.cwd, self.started = base_env, cwd, []

    def __call__(self, *args: Any, env: dict[str, str] | None = None) -> subprocess.Popen:
        proc = subprocess.Popen(
            [*cli_command(), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.base_env, **(env or {})},
            cwd=self.cwd,
        )
        self.started.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def write_digits(out: Path, *, train_shards: int = 3) -> Path:
    """scikit-learn's bundled 8x8 digits as PNG TFRecords in `out` (the trainer's layout): the
    first 1500 of a seeded shuffle as `train_shards` train shards, the other 297 as validation.
    Real images a tiny model learns in seconds (eval accuracy about 0.98). Returns `out`.
    Written by vertex_trainer.dataprep.records: no TensorFlow in the process that calls it."""
    import io

    import numpy as np
    from PIL import Image

    from vertex_trainer.dataprep import records

    pixels, target = load_digits()
    images = np.clip(pixels * 16, 0, 255).astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(images))
    for split, idx, shards in (("train", order[:1500], train_shards), ("validation", order[1500:], 1)):
        for s in range(shards):
            with open(out / records.shard_name(split, s, shards), "wb") as handle:
                for i in idx[s::shards]:
                    buf = io.BytesIO()
                    Image.fromarray(images[i]).convert("RGB").save(buf, format="PNG")
                    example = records.image_example(
                        buf.getvalue(), int(target[i]), image_format="PNG", height=8, width=8, channels=3
                    )
                    records.write_record(handle, example)
    return out


def load_digits() -> tuple[Any, Any]:
    """The 1,797 8x8 digits (pixels 0-16, N x 8 x 8) and their labels, from the copy the sandbox
    example ships (examples/sandbox/data/digits.csv.gz: 64 pixel columns, then the label)."""
    import numpy as np

    table = np.loadtxt(ROOT / "examples" / "sandbox" / "data" / "digits.csv.gz", delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)


@contextmanager
def storage_emulator(*buckets: str) -> Iterator[str]:
    """gcp-storage-emulator in this process, on a free loopback port, with `buckets` made; yields
    its URL (for Settings.storage_emulator or STORAGE_EMULATOR_HOST)."""
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{server._api._httpd.server_address[1]}"
        for name in buckets:
            make_bucket(url, name)
        yield url
    finally:
        server.stop()


def make_bucket(url: str, name: str) -> None:
    """Create the bucket `name` in the storage emulator at `url`."""
    import requests

    assert requests.post(f"{url}/storage/v1/b", params={"project": "p"}, json={"name": name}).ok


def put_object(url: str, uri: str, data: bytes = b"x") -> None:
    """Upload `data` as the object gs://BUCKET/NAME (`uri`) to the storage emulator at `url`."""
    import requests

    bucket, _, name = uri.removeprefix("gs://").partition("/")
    response = requests.post(
        f"{url}/upload/storage/v1/b/{bucket}/o", params={"uploadType": "media", "name": name}, data=data
    )
    assert response.ok, response.text


def server_fixture(name: str, factory: Callable[[], Any], *, scope: str = "function"):
    """A pytest fixture called `name` that runs the stand-in `factory()` (a context manager, e.g.
    FakeLogging) around each test (or `scope`) and yields it: `billing = server_fixture(
    "billing", FakeBilling)` in a conftest."""
    import pytest

    @pytest.fixture(scope=scope, name=name)
    def serve():
        with factory() as server:
            yield server

    return serve
