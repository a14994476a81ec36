"""A real client finds the sandbox real: the official google-cloud-aiplatform SDK over REST lists
the CustomJobs, reads a PipelineJob that ran (its task details parsed by the SDK's own types) and
gets predictions from an endpoint; the fake Cloud Logging takes every timestamp form clients put
in a filter (google-cloud-logging appends `timestamp>="...+0000"`, the `%z` form)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from vertex_trainer.automation import compile_ir, pipeline_job
from vertex_trainer.vertex.custom_jobs import Job, JobsClient
from vertex_trainer.vertex.model_deploy import deploy
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.vertex.pipelines import PipelinesClient

from .conftest import BUCKET, PROJECT, REGION, echo_deploy_request, python_job

# One sandbox for the module (conftest.py): each test looks at its own jobs, run and log lines.
SHARED_SANDBOX = True


@pytest.mark.wire
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_aiplatform_sdk_lists_jobs_reads_a_pipeline_run_and_predicts(sandbox, settings):
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    jobs = JobsClient(PROJECT, REGION, settings=settings)
    job = Job(jobs.create_once(python_job("print('hello')", name="sdk-job")), jobs)
    job.wait(timeout=60)
    ir = compile_ir(
        python_job("print('trained')", name="sdk-pipeline-job"),
        name="sdk-pipeline",
        project=PROJECT,
        location=REGION,
        key=None,
    )
    run = PipelinesClient(PROJECT, REGION, settings=settings).create_once(
        pipeline_job(display_name="sdk-pipeline", ir=ir, labels={}, root=f"gs://{BUCKET}/pipeline-root"),
        f"sdk-{uuid.uuid4().hex[:8]}",
    )
    deployment = deploy(
        RegistryClient(PROJECT, REGION, settings=settings), echo_deploy_request("sdk"), poll=settings.poll
    )
    assert sandbox.pipelines.wait(run["name"], timeout=200)

    aiplatform.init(
        project=PROJECT,
        location=REGION,
        credentials=Credentials(token=sandbox.token),  # the sandbox's token (docs/sandbox.md)
        api_endpoint=sandbox.vertex.url,
        api_transport="rest",
    )
    listed = {j.display_name: j for j in aiplatform.CustomJob.list()}
    assert listed["sdk-job"].resource_name == job.name
    assert listed["sdk-job"].state.name == "JOB_STATE_SUCCEEDED"
    assert "sdk-pipeline-job" in listed  # the one the pipeline's task created

    pipeline = aiplatform.PipelineJob.get(run["name"])
    assert pipeline.state.name == "PIPELINE_STATE_SUCCEEDED"
    tasks = {t.task_name: t for t in pipeline.task_details}
    assert set(tasks) == {"sdk-pipeline", "train"}
    assert tasks["train"].state.name == "SUCCEEDED"
    assert tasks["train"].executor_detail.custom_job_detail.job == listed["sdk-pipeline-job"].resource_name

    endpoint = aiplatform.Endpoint(deployment.endpoint)
    answer = endpoint.predict(instances=[{"x": 1}, {"x": 2}])
    assert [p["echo"] for p in answer.predictions] == [{"x": 1}, {"x": 2}]
    assert answer.deployed_model_id == deployment.deployed_model_id


@pytest.mark.wire
@pytest.mark.parametrize(
    "form",
    [
        "%Y-%m-%dT%H:%M:%S.%f%z",  # google-cloud-logging's own (+0000)
        "%Y-%m-%dT%H:%M:%S.%fZ",  # RFC 3339, Z
        "%Y-%m-%dT%H:%M:%S+00:00",  # RFC 3339, an offset, no fraction
        "%Y-%m-%dT%H:%M:%S",  # no zone: UTC
    ],
)
def test_fake_logging_takes_every_timestamp_form(sandbox, form):
    job_id = str(uuid.uuid4().int % 10**12)  # this test's own lines in the module's sandbox
    sandbox.logging.add(
        job_id, "an old line", at=(datetime.now(timezone.utc) - timedelta(hours=2)).timestamp()
    )
    sandbox.logging.add(
        job_id, "a new line", at=(datetime.now(timezone.utc) - timedelta(minutes=5)).timestamp()
    )
    since = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime(form)
    body = {
        "resourceNames": [f"projects/{PROJECT}"],
        "filter": f'resource.labels.job_id="{job_id}" AND timestamp>="{since}"',
    }
    request = urllib.request.Request(
        f"{sandbox.logging.url}/v2/entries:list",
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {sandbox.token}"},
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as resp:
        entries = json.loads(resp.read()).get("entries", [])
    assert [e["jsonPayload"]["message"] for e in entries] == ["a new line"]
