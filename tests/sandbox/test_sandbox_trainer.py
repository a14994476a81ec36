"""The issue's "done when", as a user does it: with `vertex-trainer dev sandbox`'s exports, upload
the digits to the emulated bucket, `submit SPEC --deploy` (the image built by the fake Cloud Build
and pushed to the fake registry, the job really training the bundled trainer on gs:// data, its
log streaming), `logs JOB`, metrics.json from the bucket, predictions from the endpoint; then
SIGTERM leaves no process and no port."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.process_support import processes_with_env
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.logs import to_ns  # RFC 3339 (nanoseconds) -> ns

from .conftest import ROOT, SandboxProcess, cli, ports_of, refused

SPEC = "examples/sandbox/digits.yaml"
BUCKET = "sandbox-demo"  # the spec's


def _run(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


@pytest.mark.trainer
@pytest.mark.slow
@pytest.mark.timeout(360)
def test_submit_trains_in_the_sandbox_and_the_model_answers_offline(base_env, marker):
    box = SandboxProcess("--bucket", BUCKET, env=base_env)
    try:
        env = box.env(base_env)
        _run([sys.executable, "examples/sandbox/digits.py", "upload", f"gs://{BUCKET}/digits"], env)

        submit = _run([*cli(), "submit", SPEC, "--deploy"], env)
        job = re.search(r"^created\s+(\S+)", submit.stdout, re.M)[1]
        assert re.search(r"^final\s+SUCCEEDED", submit.stdout, re.M)
        assert re.search(
            r"^endpoint\s+projects/sandbox/locations/us-central1/endpoints/digits", submit.stdout, re.M
        )
        assert "(built and pushed with cloud-build)" in submit.stderr
        assert "workerpool0-0 | trainer: eval: loss=" in submit.stderr  # the log, as it came

        logs = _run([*cli(), "logs", job], env).stdout
        # The job ends when its replicas do: the runner reads metrics.json and sets the state at
        # once (a stall in that read once left every sandbox job 110 s behind its replicas, and
        # every test still passed). The bound is far above a read's time on a busy machine.
        entries = _run([*cli(), "logs", job, "--output", "json"], env).stdout.splitlines()
        last_line = max(to_ns(json.loads(e)["timestamp"]) for e in entries)
        described = json.loads(_run([*cli(), "status", job, "--output", "json"], env).stdout)
        assert to_ns(described["end_time"]) - last_line < 30 * 10**9, described
        assert "[workerpool0-0] trainer: exported model to gs://sandbox-demo/runs/digits/model/" in logs
        assert re.search(r"^\[workerpool0-0\] progress epoch=10/10 step=30/30 ", logs, re.M)

        metrics = storage.read_json(Settings.from_environ(env), f"gs://{BUCKET}/runs/digits/metrics.json")
        # A local run of these digits reaches 0.98-0.99 (tests/serving, docs/serving.md).
        assert metrics["eval_accuracy"] >= 0.95, metrics
        assert metrics["epochs"] == 10 and metrics["steps"] == 300

        package = json.loads(_run([*cli(), "package", SPEC, "--output", "json"], env).stdout)
        assert package["built"] is False  # the tag is in the sandbox's registry: nothing to build

        answer = _run([sys.executable, "examples/sandbox/digits.py", "predict", SPEC, job], env).stdout
        right, total = map(int, re.search(r"(\d+)/(\d+) held-out digits right", answer).groups())
        assert total == 297 and abs(right / total - metrics["eval_accuracy"]) <= 0.03, answer

        # A replica that fails: the job ends FAILED with its exit status and its own last line.
        storage.client(Settings.from_environ(env)).bucket(BUCKET).blob(
            "bad/train-00000-of-00001"
        ).upload_from_string(b"not a TFRecord file" * 100)
        failed = subprocess.run(
            [
                *cli(),
                "submit",
                SPEC,
                "--wait",
                "--output",
                "json",
                "--set",
                f"trainer.train_data=gs://{BUCKET}/bad/train-*",
                "--set",
                f"output_dir=gs://{BUCKET}/runs/bad",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert failed.returncode == 1, failed.stderr[-3000:]
        failed_job = json.loads(failed.stdout)
        assert failed_job["state"] == "JOB_STATE_FAILED"
        error = json.loads(_run([*cli(), "status", failed_job["name"], "--output", "json"], env).stdout)[
            "error"
        ]
        assert error.startswith("The replica workerpool0-0 exited with a non-zero status of 2."), error
        assert f"error: corrupt record in gs://{BUCKET}/bad/train-00000-of-00001" in error

        code, err = box.terminate()
        assert code == 0, err[-3000:]
        assert processes_with_env(marker) == []
        assert [p for p in ports_of(box.exports) if not refused(p)] == []
    finally:
        box.kill()
