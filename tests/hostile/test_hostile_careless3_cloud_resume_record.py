"""A cloud `--resume` of a gs:// run a local run made left that run's SUCCEEDED record (HB, item 2).

`submit --local --idempotency-key ci-7` into a gs:// output_dir keeps
`<output_dir>/.vertex-trainer/digits-ci-7/result.json`, SUCCEEDED, which a retry with the same key
adopts. A Vertex AI job can continue that folder (`submit SPEC --resume digits-ci-7`) and writes
no such record: the local run's SUCCEEDED stayed, and the key ci-7 again said 'already SUCCEEDED
here, nothing ran again', exit 0, handing over what the cloud job left (a model still being
written, or one from a job that failed) as the local run's result, with the local run's numbers.
Now the record is replaced, before the job is created, by one naming the job's key, and the
key ci-7 is refused (exit 2): neither adopted nor trained over.
"""

from __future__ import annotations

import json

from tests.hostile.resume_support import GS_TASK, cloud_job, gs_cli
from tests.shared import script_job

RUN = "digits-ci-7"


def test_a_cloud_resume_of_a_local_gs_run_is_not_adopted_by_the_local_key(fake, tmp_path, emulator, bucket):
    run = gs_cli(fake, tmp_path, emulator, bucket)
    here = script_job(tmp_path, GS_TASK, f"gs://{bucket}/runs")
    first = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    trained = json.loads(first.stdout)["metrics"]["job"]

    cloud = cloud_job(tmp_path, bucket)
    resumed = run("submit", cloud, "--resume", RUN, "--no-wait", "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    job = json.loads(resumed.stdout)
    assert job["output_dir"] == f"gs://{bucket}/runs/{RUN}"

    again = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 2, again.stdout + again.stderr
    assert "already SUCCEEDED" not in again.stderr and "Running digits locally" not in again.stderr
    key = job["idempotency_key"]
    assert f"was continued on Vertex AI by the job with idempotency key {key}" in again.stderr
    assert f"--resume {RUN}" in again.stderr
    model = emulator.read_object(bucket, f"runs/{RUN}/model/saved_model.pb").decode()
    assert model == trained  # nothing ran over it
    record = json.loads(emulator.read_object(bucket, f"runs/.vertex-trainer/{RUN}/result.json"))
    assert record["state"] == "JOB_STATE_RUNNING" and record["continued_by_key"] == key
