"""The same key on Vertex AI and then here, into one gs:// output_dir (HB, hunting).

`submit SPEC --idempotency-key ci-7` trains on Vertex AI in `<output_dir>/digits-ci-7/`; the job
writes its model and checkpoints there and no record of the tool's. `submit SPEC --local
--idempotency-key ci-7` (to look at it here, the same key) found no record of a local run, took
the folder for a fresh one and trained into it, over the cloud job's model. Now a local
submission whose gs:// folder holds objects but no record of a run made here is exit 2, naming
the ways on (--resume RUN, another key); an empty folder runs as before.
"""

from __future__ import annotations

import json

import requests

from tests.hostile.resume_support import GS_TASK, cloud_job, gs_cli
from tests.shared import script_job

RUN = "digits-ci-7"


def _put(url: str, bucket: str, name: str, data: bytes) -> None:
    assert requests.post(
        f"{url}/upload/storage/v1/b/{bucket}/o", params={"uploadType": "media", "name": name}, data=data
    ).ok


def test_a_local_run_into_a_cloud_jobs_folder_is_refused(fake, tmp_path, emulator, bucket):
    run = gs_cli(fake, tmp_path, emulator, bucket)
    cloud = cloud_job(tmp_path, bucket)
    made = run("submit", cloud, "--idempotency-key", "ci-7", "--no-wait", "--output", "json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["output_dir"] == f"gs://{bucket}/runs/{RUN}"
    _put(emulator.endpoint, bucket, f"runs/{RUN}/model/saved_model.pb", b"the cloud job's")  # as it writes

    here = script_job(tmp_path, GS_TASK, f"gs://{bucket}/runs")
    refused = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"gs://{bucket}/runs/{RUN} holds what no run here made" in refused.stderr
    assert f"--resume {RUN}" in refused.stderr and "Running digits locally" not in refused.stderr
    assert emulator.read_object(bucket, f"runs/{RUN}/model/saved_model.pb") == b"the cloud job's"

    fresh = run("submit", here, "--local", "--idempotency-key", "ci-8", "--output", "json")
    assert fresh.returncode == 0, fresh.stderr  # its own, empty folder: it runs
    assert json.loads(fresh.stdout)["adopted"] is False
