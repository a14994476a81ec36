"""Capacity in the sandbox (docs/contract.md section 11): its fake Vertex AI refuses by region (a job
there ends FAILED with code 8 and never starts a process, one in another region really runs), and
a running job with web access carries a shell URI per replica, as the service does."""

from __future__ import annotations

import textwrap

import pytest

from vertex_trainer import api
from vertex_trainer.vertex.custom_jobs import Job, JobsClient

from .conftest import PROJECT, python_job

pytestmark = pytest.mark.wire
# One sandbox for the module (conftest.py: the region refused in one test is not refused in the next).
SHARED_SANDBOX = True


def test_no_capacity_in_one_region_and_the_job_elsewhere_runs(sandbox, settings):
    sandbox.vertex.no_capacity(region="us-central1")
    refused_client = JobsClient(PROJECT, "us-central1", settings=settings)
    refused = Job(refused_client.create_once(python_job("print('must not run')")), refused_client)
    refused.wait(timeout=30, check=False)
    assert refused.state == "JOB_STATE_FAILED" and refused.data["error"]["code"] == 8
    assert not sandbox.jobs.wait(refused.name, timeout=0)  # never handed to the runner

    client = JobsClient(PROJECT, "europe-west4", settings=settings)
    job = Job(client.create_once(python_job("print('ran in europe')")), client)
    job.wait(timeout=60)
    assert job.succeeded and "/locations/europe-west4/" in job.name
    assert "ran in europe" in [e.message for e in api.logs(job.name, settings=settings)]


def test_a_running_job_with_web_access_has_a_shell_uri_per_replica(sandbox, settings):
    body = python_job(
        textwrap.dedent("""\
        import time
        print("up", flush=True)
        time.sleep(120)
        """),
        replicas=2,
    )
    body["jobSpec"]["enableWebAccess"] = True
    client = JobsClient(PROJECT, "us-central1", settings=settings)
    job = Job(client.create_once(body), client)
    uri = api.web_access(job, "workerpool1-0", timeout=60)
    assert job.state == "JOB_STATE_RUNNING"
    assert set(job.web_access_uris) == {"workerpool0-0", "workerpool1-0"}
    assert uri == job.web_access_uris["workerpool1-0"] and uri.startswith("https://")
    job.cancel()
    assert sandbox.jobs.wait(job.name, timeout=30)
    assert job.refresh().state == "JOB_STATE_CANCELLED" and job.web_access_uris == {}
