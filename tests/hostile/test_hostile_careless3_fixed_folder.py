"""fixed_output_dir: a cloud job writes the one gs:// folder a local run's record is in (HB, hunting).

With `fixed_output_dir: true` every submission writes output_dir itself, by choice: a local run
there (`submit --local --idempotency-key ci-7`) keeps its result.json beside it, SUCCEEDED. A
cloud submit of the same folder (another key) wrote its model over it and left that record, so
the key ci-7 again here said 'already SUCCEEDED here, nothing ran again' and handed over the
cloud job's model with the local run's metrics. Now the cloud job's create replaces the record
(as for --resume, 6e18058): the key ci-7 runs again, as a second submission into one fixed folder
does.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.hostile.resume_support import GS_TASK, cloud_job, gs_cli, modules_of_submit, put
from tests.shared import script_job


def test_a_cloud_job_in_the_fixed_folder_leaves_no_local_success_to_adopt(fake, tmp_path, emulator, bucket):
    run = gs_cli(fake, tmp_path, emulator, bucket)
    folder = f"gs://{bucket}/runs/digits"
    here = script_job(tmp_path, GS_TASK, folder)
    here.write_text(yaml.safe_dump({**yaml.safe_load(here.read_text()), "fixed_output_dir": True}))
    first = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["output_dir"] == folder
    cloud = cloud_job(tmp_path, bucket, output_dir=folder, fixed_output_dir=True)
    made = run("submit", cloud, "--idempotency-key", "ci-8", "--no-wait", "--output", "json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["output_dir"] == folder

    again = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    done = json.loads(again.stdout)
    assert done["adopted"] is False and "already SUCCEEDED" not in again.stderr
    assert done["metrics"]["job"] != json.loads(first.stdout)["metrics"]["job"]


def test_a_local_run_in_the_fixed_folder_a_cloud_job_wrote_runs(fake, tmp_path, emulator, bucket):
    """The other way round: a cloud job (ci-8) wrote the one folder and left no record (there was
    none to hand over); a local submission there (ci-7) trains over it, as any second submission
    into a fixed folder does. It was exit 2 'a Vertex AI job with the same idempotency key writes
    there', naming --resume (which fixed_output_dir refuses) and another key (refused the same)."""
    run = gs_cli(fake, tmp_path, emulator, bucket)
    folder = f"gs://{bucket}/runs/digits"
    cloud = cloud_job(tmp_path, bucket, output_dir=folder, fixed_output_dir=True)
    made = run("submit", cloud, "--idempotency-key", "ci-8", "--no-wait", "--output", "json")
    assert made.returncode == 0, made.stderr
    put(emulator.endpoint, bucket, "runs/digits/model/saved_model.pb")  # as the job writes
    here = script_job(tmp_path, GS_TASK, folder)
    here.write_text(yaml.safe_dump({**yaml.safe_load(here.read_text()), "fixed_output_dir": True}))

    local = run("submit", here, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert local.returncode == 0, local.stderr
    done = json.loads(local.stdout)
    assert done["output_dir"] == folder and done["adopted"] is False
    assert done["state"] == "JOB_STATE_SUCCEEDED"


def test_a_local_run_in_the_fixed_folder_with_the_cloud_jobs_key_runs(fake, tmp_path, emulator, bucket):
    """The cloud job's hand-over names its key (ci-8); a local submission there with that key was
    exit 2 'continued on Vertex AI by the job with idempotency key ci-8 (submit --resume) after
    this submission's run here' (neither happened) naming --resume, which fixed_output_dir
    refuses. It runs, as any second submission into the one folder does."""
    run = gs_cli(fake, tmp_path, emulator, bucket)
    folder = f"gs://{bucket}/runs/digits"
    here = script_job(tmp_path, GS_TASK, folder)
    here.write_text(yaml.safe_dump({**yaml.safe_load(here.read_text()), "fixed_output_dir": True}))
    assert run("submit", here, "--local", "--idempotency-key", "ci-7").returncode == 0
    cloud = cloud_job(tmp_path, bucket, output_dir=folder, fixed_output_dir=True)
    made = run("submit", cloud, "--idempotency-key", "ci-8", "--no-wait", "--output", "json")
    assert made.returncode == 0, made.stderr

    local = run("submit", here, "--local", "--idempotency-key", "ci-8", "--output", "json")
    assert local.returncode == 0, local.stderr
    done = json.loads(local.stdout)
    assert done["adopted"] is False and done["state"] == "JOB_STATE_SUCCEEDED"


def test_a_cloud_submit_into_the_fixed_folder_does_not_load_google_cloud_storage(
    fake, tmp_path, emulator, bucket
):
    """The look for a local run's record to hand over goes through the JSON API's client, as the
    other looks before a create do: google-cloud-storage (~0.25 s) loads only when there is one
    to replace (a process of its own; its modules read at the end)."""
    gs_cli(fake, tmp_path, emulator, bucket)
    cloud = cloud_job(tmp_path, bucket, output_dir=f"gs://{bucket}/runs/digits", fixed_output_dir=True)
    loaded = modules_of_submit(fake, tmp_path, emulator, cloud, "ci-9")
    assert "vertex_trainer.api.execute" in loaded and "google.cloud.storage" not in loaded
    assert [job["baseOutputDirectory"] for job in (j["jobSpec"] for j in fake.jobs.values())] == [
        {"outputUriPrefix": f"gs://{bucket}/runs/digits"}
    ]


@pytest.mark.parametrize("fixed", [True, False])
def test_a_record_this_account_may_not_read_does_not_stop_a_cloud_submit(
    fake, tmp_path, emulator, bucket, monkeypatch, fixed
):
    """The look for a local run's record is Cloud Storage's read: an account that may create jobs
    but not read the bucket's objects (its jobs' service account writes there) still submits."""
    from google.api_core.exceptions import Forbidden

    from tests.shared import fake_settings
    from vertex_trainer import api
    from vertex_trainer.gcp import storage
    from vertex_trainer.gcp.http import Denied

    url = emulator.endpoint
    put(url, bucket, "d/train-00000")
    spec = cloud_job(tmp_path, bucket, output_dir=f"gs://{bucket}/runs/digits", fixed_output_dir=fixed)

    looked = []

    def forbidden(*args, **kwargs):
        looked.append("client")
        raise Forbidden("storage.objects.get denied")

    def denied(*args, **kwargs):  # the JSON API's client on a 403 (gcp/http.ApiClient)
        looked.append("api")
        raise Denied("read object: 403 storage.objects.get denied", permission="storage.objects.get")

    # (the service's answers, not the code under test: google-cloud-storage's and the JSON API's)
    monkeypatch.setattr(storage, "read_bytes", forbidden)
    monkeypatch.setattr(storage, "object_json", denied)
    settings = fake_settings(fake, storage_emulator=url)
    job = api.submit(api.load_spec(str(spec), settings=settings), idempotency_key="ci-8", settings=settings)
    folder = f"gs://{bucket}/runs/digits" + ("" if fixed else "/digits-ci-8")
    assert job.output_dir == folder and list(fake.jobs) == [job.name]
    assert looked  # the look was taken, and denied
