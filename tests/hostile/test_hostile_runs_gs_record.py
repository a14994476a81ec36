"""A gs:// run's record while it runs (H1, item 3): a `--resume` that ends without writing its
result must not leave the SUCCEEDED record of the run it continued for the same key to adopt.

A submission's run into a gs:// output_dir keeps `<output_dir>/.vertex-trainer/<run>/result.json`,
written when it ends (test_hostile_careless_retry_gs.py). Before, nothing touched that record when
a run started: `submit --local --resume RUN` trained into the folder of a run that SUCCEEDED, and
when it ended without writing its own result (its runner killed: a laptop's lid, a CI timeout, the
OOM killer; or the write refused, one warning line) the first run's SUCCEEDED stayed. The same
key again then adopted it, "already SUCCEEDED here, nothing ran again", with the first run's
metrics, over the half-trained model the resume had left. Now the record says RUNNING before any
replica starts, so the same key runs again; when that record cannot be written nothing runs.

The job is a script of a few lines (no TensorFlow) that writes its model straight to the storage
emulator; with VT_HANG in its environment it then waits to be killed.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.cli_support import cli_command, edge_env
from tests.hostile.resume_support import TASK_HEAD
from tests.process_support import processes_with_env, wait_gone
from tests.shared import cli_runner, script_job

TASK = (
    """
import json, os, time, urllib.parse, urllib.request
"""
    + TASK_HEAD
    + """put(f"{model}/saved_model.pb", job)
if os.environ.get("VT_HANG"):
    print("READY", os.getpid(), job, flush=True)
    time.sleep(300)
put(f"{model.rsplit('/', 1)[0]}/metrics.json", json.dumps({"job": job}))
"""
)

RUN = "digits-ci-7"


def _model(emulator, bucket) -> str:
    return emulator.read_object(bucket, f"runs/{RUN}/model/saved_model.pb").decode()


def _record(emulator, bucket) -> dict:
    return json.loads(emulator.read_object(bucket, f"runs/.vertex-trainer/{RUN}/result.json"))


@pytest.mark.timeout(180)
def test_a_resume_killed_before_its_result_leaves_nothing_for_the_key_to_adopt(tmp_path, emulator, bucket):
    env = edge_env(tmp_path, **emulator.env())
    spec = script_job(tmp_path, TASK, f"gs://{bucket}/runs")
    run = cli_runner(env, cwd=tmp_path)
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    trained = json.loads(first.stdout)["metrics"]["job"]
    assert _record(emulator, bucket)["state"] == "JOB_STATE_SUCCEEDED"

    # --resume trains on in the folder; its runner is killed before it writes its result
    marker = f"VT_TEST_{uuid.uuid4().hex}"
    resume = subprocess.Popen(
        [*cli_command(), "submit", str(spec), "--local", "--resume", RUN],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "VT_HANG": marker},
        cwd=tmp_path,
    )
    try:
        seen = []
        for line in resume.stderr or ():
            seen.append(line)
            if "| READY " in line:
                break
        else:
            pytest.fail(f"the resume did not start (exit {resume.wait()}): {''.join(seen)}")
        replica, resumed = int(line.split()[-2]), line.split()[-1]
        while_running = _record(emulator, bucket)  # the record says so while it runs
        assert while_running["state"] == "JOB_STATE_RUNNING" and while_running["job_id"] == resumed
        resume.kill()  # SIGKILL: no clean-up code runs, no result is written
        resume.wait(timeout=30)
    finally:
        if resume.poll() is None:
            resume.kill()
            resume.wait(timeout=30)
        if resume.stderr is not None:
            resume.stderr.close()
    assert wait_gone([replica], timeout=30) == [] and processes_with_env(marker) == []
    assert _model(emulator, bucket) == resumed  # the half-trained model the resume left

    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    done = json.loads(again.stdout)
    assert done["adopted"] is False, again.stderr  # not the first run's SUCCEEDED, taken as this
    assert "already SUCCEEDED" not in again.stderr and "Running digits locally" in again.stderr
    assert done["metrics"]["job"] not in (trained, resumed)
    assert _model(emulator, bucket) == done["metrics"]["job"]
    assert _record(emulator, bucket)["state"] == "JOB_STATE_SUCCEEDED"


def test_a_gs_run_whose_record_cannot_be_written_does_not_start(tmp_path, emulator):
    """The bucket is missing: the record of the run cannot say it runs, so nothing runs (before:
    the run started, its code failed on its first write, and the result was one warning line)."""
    missing = f"gone-{uuid.uuid4().hex[:12]}"
    spec = script_job(tmp_path, TASK, f"gs://{missing}/runs")
    run = cli_runner(edge_env(tmp_path, **emulator.env()), cwd=tmp_path)
    refused = run("submit", spec, "--local", "--idempotency-key", "ci-7")
    assert refused.returncode == 2, refused.stderr
    assert f"the bucket gs://{missing} does not exist; nothing ran" in refused.stderr
    assert "output_dir" in refused.stderr and "Running digits locally" not in refused.stderr
