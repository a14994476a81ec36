"""A careless user's retry of a local run whose output_dir is in Cloud Storage (issue 42, G1):
`submit --local --idempotency-key K` run again, as test_hostile_careless_retry.py does for a local
folder, with `output_dir: gs://BUCKET/runs`.

A gs:// run folder had no records, so the retry of a run that SUCCEEDED ran again into the same
`gs://BUCKET/runs/<name>-<key>/` and wrote over the first run's model. Now a submission's run
keeps its result beside its folder in the bucket (`runs/.vertex-trainer/<run>/result.json`), and
the same key adopts it: nothing runs, the first run's model stays. `--resume RUN` still trains
again (and the result it keeps is its own); a run that FAILED, or whose folder was emptied, runs
again. A sandbox job's run (no submission) leaves no record objects in its bucket.

The job is a script of a few lines (no TensorFlow) that writes its model and metrics.json
straight to the storage emulator; the CLI runs in this process.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import urllib.parse
import urllib.request

from tests.cli_support import edge_env
from tests.hostile.resume_support import TASK_HEAD
from tests.shared import cli_runner, script_job
from vertex_trainer.local import layout

# The run's code: the model and metrics.json carry the job id, uploaded to the emulator (the
# replica has the route in its environment); --fail fails it after writing the model.
TASK = (
    """
import json, os, sys, urllib.parse, urllib.request
"""
    + TASK_HEAD
    + """put(f"{model}/saved_model.pb", job)
print("trained", job)
if "--fail" in sys.argv:
    raise SystemExit(3)
put(f"{model.rsplit('/', 1)[0]}/metrics.json", json.dumps({"job": job}))
"""
)

RUN = "digits-ci-7"


def _setup(tmp_path, emulator, bucket):
    spec = script_job(tmp_path, TASK, f"gs://{bucket}/runs")
    return cli_runner(edge_env(tmp_path, **emulator.env()), cwd=tmp_path), spec


def _model(emulator, bucket) -> str:
    return emulator.read_object(bucket, f"runs/{RUN}/model/saved_model.pb").decode()


def _result(emulator, bucket) -> dict:
    return json.loads(emulator.read_object(bucket, f"runs/.vertex-trainer/{RUN}/result.json"))


def _delete(emulator, bucket, name: str) -> None:
    url = f"{emulator.endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    opener.open(urllib.request.Request(url, method="DELETE"), timeout=30).close()


def test_a_retry_of_a_gs_run_that_succeeded_adopts_it_and_keeps_its_model(tmp_path, emulator, bucket):
    run, spec = _setup(tmp_path, emulator, bucket)
    folder = f"gs://{bucket}/runs/{RUN}"
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    assert made["adopted"] is False and made["output_dir"] == folder
    job = made["metrics"]["job"]
    assert _model(emulator, bucket) == job

    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    adopted = json.loads(again.stdout)
    assert adopted["adopted"] is True and adopted["state"] == "JOB_STATE_SUCCEEDED"
    assert adopted["output_dir"] == folder and adopted["metrics"]["job"] == job
    assert "already SUCCEEDED here" in again.stderr and f"--resume {RUN}" in again.stderr
    assert "Running digits locally" not in again.stderr  # nothing ran
    assert _model(emulator, bucket) == job  # the first run's model is the one kept
    kept = _result(emulator, bucket)  # the run's records, beside its folder in the bucket
    assert kept["run"] == RUN and kept["state"] == "JOB_STATE_SUCCEEDED" and kept["job_id"] == job

    # training it again is explicit: --resume runs again in the folder, and keeps its own result
    resumed = run("submit", spec, "--local", "--resume", RUN, "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    second = json.loads(resumed.stdout)
    assert second["adopted"] is False and second["output_dir"] == folder
    assert second["metrics"]["job"] != job and _model(emulator, bucket) == second["metrics"]["job"]
    assert _result(emulator, bucket)["job_id"] == second["metrics"]["job"]
    latest = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert latest.returncode == 0, latest.stderr
    assert json.loads(latest.stdout)["adopted"] is True and "Running digits" not in latest.stderr
    assert json.loads(latest.stdout)["metrics"]["job"] == second["metrics"]["job"]

    # the run's folder emptied by hand: nothing left to adopt, the key runs again
    for name in emulator.list_objects(bucket, f"runs/{RUN}/"):
        _delete(emulator, bucket, name)
    fresh = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["adopted"] is False, fresh.stderr
    assert _model(emulator, bucket) == json.loads(fresh.stdout)["metrics"]["job"]


def test_a_retry_of_a_gs_run_that_failed_runs_again(tmp_path, emulator, bucket):
    run, spec = _setup(tmp_path, emulator, bucket)
    failed = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--set", 'args=["--fail"]')
    assert failed.returncode == 1, failed.stderr
    first = _model(emulator, bucket)
    assert _result(emulator, bucket)["state"] == "JOB_STATE_FAILED"
    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    done = json.loads(again.stdout)
    assert done["adopted"] is False and done["output_dir"] == f"gs://{bucket}/runs/{RUN}"
    assert done["metrics"]["job"] != first and _model(emulator, bucket) == done["metrics"]["job"]
    assert _result(emulator, bucket)["state"] == "JOB_STATE_SUCCEEDED"


def test_a_run_that_is_no_submission_leaves_no_records_in_its_bucket(tmp_path, emulator, bucket):
    """The sandbox's cloud jobs (run_local without a run's name) write what the job writes, no
    more: a sandbox test may compare its bucket's listing."""
    from rich.console import Console

    from vertex_trainer.local import SUCCEEDED, run_local
    from vertex_trainer.settings import Settings

    base = f"gs://{bucket}/runs/{RUN}"
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "x", "command": [sys.executable, "-c", TASK]},
    }
    job = {"displayName": "digits", "jobSpec": {"workerPoolSpecs": [pool]}}
    job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": base}
    settings = Settings.from_environ(edge_env(tmp_path, **emulator.env()))
    result = run_local(job, None, settings=settings, console=Console(quiet=True))
    assert result.state == SUCCEEDED
    assert sorted(emulator.list_objects(bucket)) == [
        f"runs/{RUN}/metrics.json",
        f"runs/{RUN}/model/saved_model.pb",
    ]


def test_the_same_key_while_its_gs_run_runs_on_this_machine_is_refused(tmp_path, emulator, bucket):
    """A gs:// folder has no flock of its own: the runner holds one on this machine, below the
    user's private root, named by the folder (local/layout.gs_run_lock). A second runner of the key
    meanwhile (held here as the first runner would hold it) is exit 2 before anything starts."""
    run, spec = _setup(tmp_path, emulator, bucket)
    folder = f"gs://{bucket}/runs/{RUN}"
    lock = layout.gs_run_lock(folder)
    assert lock is not None
    os.makedirs(lock, exist_ok=True)
    fd = os.open(os.path.join(lock, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        second = run("submit", spec, "--local", "--idempotency-key", "ci-7")
        assert second.returncode == 2, second.stderr
        assert f"run {RUN} is already running on this machine" in second.stderr and folder in second.stderr
        assert "Running digits locally" not in second.stderr
        assert not emulator.list_objects(bucket, f"runs/{RUN}/")  # nothing written
    finally:
        os.close(fd)
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr  # the lock released: it runs
    assert _model(emulator, bucket) == json.loads(first.stdout)["metrics"]["job"]
