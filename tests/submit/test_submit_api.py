"""The Python API (vertex_trainer.load_spec / submit / Job) in-process, against the fake server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import vertex_trainer as vt
from vertex_trainer import api, render
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.spec import spec_hash

pytestmark = pytest.mark.wire


@pytest.fixture
def endpoint(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("VERTEX_TRAINER_API_ENDPOINT", fake.url)
    monkeypatch.setenv("VERTEX_TRAINER_POLL_INTERVAL", "0.01")
    monkeypatch.setenv("VERTEX_TRAINER_RETRY", "initial=0.01,maximum=0.05,attempts=4")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    return fake


def test_create_body_is_the_render_output_and_a_valid_customjob(endpoint, spec_file):
    from google.cloud import aiplatform_v1

    spec = vt.load_spec(spec_file, set=["trainer.epochs=3"])
    job = vt.submit(spec, idempotency_key="nb-1")
    sent = endpoint.calls("create")[0].body
    assert sent == render.custom_job(spec, idempotency_key="nb-1")
    assert sent["labels"] == {
        "team": "vision",
        "vertex-trainer-spec": spec_hash(spec),
        "vertex-trainer-key": "nb-1",
    }
    assert "--epochs=3" in sent["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    parsed = aiplatform_v1.CustomJob.from_json(json.dumps(sent))
    assert parsed.display_name == "tiny-cnn-test"
    assert parsed.job_spec.scheduling.timeout.total_seconds() == 7200
    assert isinstance(job, vt.Job) and job.name in endpoint.jobs and not job.adopted


def test_submit_wait_and_job_methods(endpoint, spec_file):
    job = vt.submit(vt.load_spec(spec_file), wait=True)
    assert job.state == "JOB_STATE_SUCCEEDED" and job.done
    assert "SUCCEEDED" in repr(job) and job.console_url in job._repr_html_()
    same = vt.Job.get(job.name)
    assert same.name == job.name and same.refresh().succeeded
    assert vt.status(job.id, project="test-project", region="us-central1").name == job.name


def test_submit_wait_failure_raises(endpoint, spec_file):
    endpoint.set_script(["JOB_STATE_RUNNING", "JOB_STATE_FAILED"], error_message="bad data")
    with pytest.raises(JobFailed, match="bad data"):
        vt.submit(vt.load_spec(spec_file), wait=True)


def test_cancel_and_list(endpoint, spec_file):
    endpoint.set_script(["JOB_STATE_RUNNING"])
    job = vt.submit(vt.load_spec(spec_file), idempotency_key="nb-2")
    assert [j.name for j in vt.list_jobs("test-project", "us-central1")] == [job.name]
    assert vt.list_jobs("test-project", "us-central1", labels={"team": "other"}) == []
    assert job.cancel().state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


def test_dry_run_sends_nothing(endpoint, spec_file):
    plan = vt.submit(vt.load_spec(spec_file), dry_run=True, idempotency_key="nb-3")
    assert isinstance(plan, api.DryRun)
    assert plan.requests[1]["body"] == plan.job  # between the look for the key and the look after
    assert plan.requests[2] == plan.requests[0]
    assert plan.requests[0]["params"] == {"filter": 'labels.vertex-trainer-key="nb-3"'}
    assert endpoint.requests == [] and endpoint.connections == 0


def test_local_dry_run_is_the_same_job(endpoint, spec_file):
    spec = vt.load_spec(spec_file)
    cloud = vt.submit(spec, dry_run=True, idempotency_key="same")
    local = vt.submit(spec, dry_run=True, local=True, idempotency_key="same")
    assert local.local and local.job == cloud.job


def test_build_spec_dry_run_plans_the_image(endpoint, spec_file):
    text = spec_file.read_text().replace(
        "  uri: us-docker.pkg.dev/test-project/training/trainer:v1",
        "  repository: us-central1-docker.pkg.dev/test-project/training/trainer",
    )
    spec_file.write_text(text)
    plan = vt.submit(vt.load_spec(spec_file), dry_run=True)
    assert plan.image.startswith("us-central1-docker.pkg.dev/test-project/training/trainer:")
    image_uri = plan.job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    assert image_uri == plan.image and endpoint.connections == 0


def test_bad_key_is_refused_before_anything(endpoint, spec_file):
    with pytest.raises(UserError):
        vt.submit(vt.load_spec(spec_file), idempotency_key="UPPER")
    assert endpoint.connections == 0


def test_import_is_light_and_submit_never_loads_the_generated_client(endpoint, spec_file, tmp_path):
    """`import vertex_trainer` loads nothing heavy; a whole submit never imports aiplatform."""
    code = (
        "import sys, json\n"
        "import vertex_trainer\n"
        "light = sorted(m for m in sys.modules if m.startswith(('google.', 'requests', 'pydantic'))\n"
        "               and m != 'google.cloud')  # namespace packages from .pth files\n"
        "from vertex_trainer.cli import main\n"
        f"sys.argv = ['vertex-trainer', 'submit', {str(spec_file)!r}, '-o', 'json']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('google.cloud.', 'tensorflow', 'grpc')))\n"
        "print(json.dumps({'light': light, 'heavy': heavy}))\n"
    )
    env = {
        "VERTEX_TRAINER_API_ENDPOINT": endpoint.url,
        "CLOUDSDK_CONFIG": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["light"] == [] and report["heavy"] == []
