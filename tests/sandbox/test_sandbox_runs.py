"""Issue 40's "done when", in the sandbox: two submits of one spec run in two folders, and each
job's report, status and deploy see its own model and metrics; the same key twice is one job and
one folder (docs/contract.md section 15). The job is a container command of our own (a `python
-c` stand-in writing a model and metrics.json to Cloud Storage, no TensorFlow)."""

from __future__ import annotations

import textwrap

import pytest

from vertex_trainer import api
from vertex_trainer.api.report import report_data
from vertex_trainer.deployment import deploy_request as deployment
from vertex_trainer.spec import build_spec

from .conftest import BUCKET, PROJECT, REGION

pytestmark = pytest.mark.wire

# Writes <its folder>/model/saved_model.pb and <its folder>/metrics.json, each naming its job.
WRITER = textwrap.dedent("""\
    import json, os
    from google.cloud import storage
    from google.oauth2.credentials import Credentials
    folder = os.path.dirname(os.environ["AIP_MODEL_DIR"].rstrip("/"))
    bucket, _, prefix = folder[len("gs://"):].partition("/")
    job = os.environ["CLOUD_ML_JOB_ID"]
    # The sandbox's token, as TensorFlow sends it (docs/sandbox.md, "Only you can drive it").
    token = Credentials(token=os.environ["GOOGLE_AUTH_TOKEN_FOR_TESTING"])
    client = storage.Client(project="sandbox", credentials=token)
    client.bucket(bucket).blob(prefix + "/model/saved_model.pb").upload_from_string(job)
    metrics = {"job": job, "eval_accuracy": 0.9, "final_train_loss": 0.1}
    client.bucket(bucket).blob(prefix + "/metrics.json").upload_from_string(json.dumps(metrics))
    print("wrote", folder)
    """)


def _spec():
    return build_spec(
        {
            "name": "digits",
            "project": PROJECT,
            "region": REGION,
            "hardware": "cpu",
            "image": {"uri": "us-docker.pkg.dev/p/r/trainer:v1"},
            "command": ["python", "-c", WRITER],
            "output_dir": f"gs://{BUCKET}/runs/digits",
            "deploy": {"endpoint": "digits", "serving_image": "us-docker.pkg.dev/p/r/serve:v1"},
        }
    )


def test_two_submits_two_folders_each_job_sees_its_own_model_and_metrics(sandbox, settings):
    spec = _spec()
    first, second = (api.submit(spec, wait=True, settings=settings, log=lambda _: None) for _ in "ab")
    assert first.succeeded and second.succeeded
    base = f"gs://{BUCKET}/runs/digits"
    assert first.output_dir != second.output_dir
    for job in (first, second):
        assert job.output_dir is not None and job.output_dir.startswith(f"{base}/digits-")
        # report: its own metrics (issue 40: a job's report showed the next job's accuracy)
        assert report_data(job.name, settings=settings).metrics["job"] == job.id
        # status: its own folder
        assert api.status(job.name, settings=settings).output_dir == job.output_dir
        # deploy: its own model
        artifact, label, _image = deployment.from_job(spec, job.data)
        assert artifact == f"{job.output_dir}/model" and label == job.id

    keyed = [
        api.submit(spec, idempotency_key="ci-1", wait=True, settings=settings, log=lambda _: None)
        for _ in "ab"
    ]
    assert keyed[0].name == keyed[1].name and keyed[1].adopted
    assert keyed[0].output_dir == keyed[1].output_dir == f"{base}/digits-ci-1"
    names = {j.name for j in api.list_jobs(PROJECT, REGION, settings=settings)}
    assert names == {first.name, second.name, keyed[0].name}
