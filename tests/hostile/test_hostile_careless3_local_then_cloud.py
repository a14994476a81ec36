"""The same key for a run here and then on Vertex AI, into one gs:// output_dir (HB, hunting).

`submit --local --idempotency-key ci-7` with a gs:// output_dir trains in `<output_dir>/digits-ci-7/`
and keeps its result.json beside it. `submit SPEC --idempotency-key ci-7` (the CI's next step,
the same key) found no Vertex AI job with that key and created one into the same folder: it wrote
over the local run's model and checkpoints, and the key ci-7 again here then adopted the job's
work as the local run's SUCCEEDED result. Now the cloud submit is exit 2 before anything is built
or created, naming the local run and the two ways on (--resume, another key).
"""

from __future__ import annotations

import json

from tests.hostile.resume_support import GS_TASK as TASK
from tests.hostile.resume_support import cloud_job, gs_cli, modules_of_submit
from tests.shared import script_job

RUN = "digits-ci-7"


def test_a_cloud_submit_into_a_local_runs_folder_is_refused(fake, tmp_path, emulator, bucket):
    run = gs_cli(fake, tmp_path, emulator, bucket)
    here = script_job(tmp_path, TASK, f"gs://{bucket}/runs")
    first = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    trained = json.loads(first.stdout)["metrics"]["job"]
    cloud = cloud_job(tmp_path, bucket)

    refused = run("submit", cloud, "--idempotency-key", "ci-7", "--no-wait")
    assert refused.returncode == 2, refused.stderr
    assert (
        f"gs://{bucket}/runs/{RUN}, the folder of the idempotency key ci-7, holds a run made with "
        "submit --local (SUCCEEDED)" in refused.stderr
    )
    assert f"--resume {RUN}" in refused.stderr and "nothing was sent" in refused.stderr
    assert list(fake.jobs) == []
    assert emulator.read_object(bucket, f"runs/{RUN}/model/saved_model.pb").decode() == trained

    other = run("submit", cloud, "--idempotency-key", "ci-8", "--no-wait", "--output", "json")
    assert other.returncode == 0, other.stderr  # a key of its own: its own folder
    assert json.loads(other.stdout)["output_dir"] == f"gs://{bucket}/runs/digits-ci-8"

    # The look reads the record through the JSON API's client: a cloud submit does not load
    # google-cloud-storage (~0.25 s) for it (a process of its own; its modules read at the end)
    loaded = modules_of_submit(fake, tmp_path, emulator, cloud, "ci-9")
    assert "vertex_trainer.api.execute" in loaded and "google.cloud.storage" not in loaded


def test_a_cloud_submit_into_another_specs_local_run_names_that_job(fake, tmp_path, emulator, bucket):
    """digits-v2 with the key ci-7 ran here; digits with the key v2-ci-7 names the same folder."""
    run = gs_cli(fake, tmp_path, emulator, bucket)
    here = script_job(tmp_path, TASK, f"gs://{bucket}/runs")
    here.write_text(here.read_text().replace("name: digits", "name: digits-v2"))
    assert run("submit", here, "--local", "--idempotency-key", "ci-7").returncode == 0
    cloud = cloud_job(tmp_path, bucket)
    refused = run("submit", cloud, "--idempotency-key", "v2-ci-7", "--no-wait")
    assert refused.returncode == 2, refused.stderr
    assert "holds a run of the job 'digits-v2' made with submit --local (SUCCEEDED)" in refused.stderr
    # not --resume: that would train this spec in the other job's folder
    assert "--resume" not in refused.stderr and "an output_dir of this spec's own" in refused.stderr
    assert list(fake.jobs) == []


def test_a_look_that_keeps_failing_stops_the_submit_with_nothing_sent(
    fake, tmp_path, emulator, bucket, monkeypatch
):
    """A failure of the look other than a refusal to read (the bucket answering 503 past the
    retries): exit 3 and no job, not a create into a folder that may hold a run made here (the
    look once skipped on any error: HG's review). A refusal to read (403) still skips the look
    (test_hostile_careless3_fixed_folder.py)."""
    from vertex_trainer.errors import ServiceError
    from vertex_trainer.gcp import storage

    def unavailable(*args, **kwargs):  # (the service's answer after the retries, not the code under test)
        raise ServiceError("read object: 503 Service Unavailable")

    run = gs_cli(fake, tmp_path, emulator, bucket)
    monkeypatch.setattr(storage, "object_json", unavailable)
    failed = run("submit", cloud_job(tmp_path, bucket), "--idempotency-key", "ci-7", "--no-wait")
    assert failed.returncode == 3, failed.stderr
    assert f"could not look for a run made here in gs://{bucket}/runs/{RUN}" in failed.stderr
    assert "nothing was sent" in failed.stderr and list(fake.jobs) == []
