"""The sandbox in this process, driven by the real clients: a created CustomJob runs (replicas are
`python -c` stand-ins, no TensorFlow), its state follows the processes, its lines are its Cloud
Logging entries, a cancel stops it, a failure carries the replica's error, and a deployed model's
serving container answers the endpoint's :predict."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.process_support import pid_alive
from vertex_trainer import api
from vertex_trainer.errors import ServiceError
from vertex_trainer.vertex.custom_jobs import Job, JobsClient

from .conftest import PROJECT, REGION, echo_deploy_request, python_job

pytestmark = pytest.mark.wire
# One sandbox for the module (conftest.py): each test looks at its own job, by name or id.
SHARED_SANDBOX = True


def _client(settings) -> JobsClient:
    return JobsClient(PROJECT, REGION, settings=settings)


def test_a_created_job_runs_with_vertex_environment_and_its_lines_are_its_log(sandbox, settings):
    script = textwrap.dedent("""\
        import json, os
        cluster = json.loads(os.environ["CLUSTER_SPEC"])
        task = cluster["task"]
        print("task", task["type"], task["index"], "of", sorted(cluster["cluster"]))
        print("job id", os.environ["CLOUD_ML_JOB_ID"], "project", os.environ["CLOUD_ML_PROJECT_ID"])
        print("model dir", os.environ["AIP_MODEL_DIR"])
        print("tf task", json.loads(os.environ["TF_CONFIG"])["task"]["type"])
        print("gcs route", bool(os.environ.get("STORAGE_EMULATOR_HOST") and os.environ.get("https_proxy")))
        print("tool endpoint", os.environ.get("VERTEX_TRAINER_API_ENDPOINT", "none"))
        """)
    client = _client(settings)
    data = client.create_once(python_job(script, replicas=2))
    assert data["state"] == "JOB_STATE_PENDING"  # as created: nothing runs before the answer
    job = Job(data, client)
    states = []
    job.wait(timeout=60, on_state=lambda j: states.append(j.state))
    assert job.state == "JOB_STATE_SUCCEEDED" and job.data.get("endTime")
    assert "JOB_STATE_RUNNING" in states or states[0] == "JOB_STATE_SUCCEEDED"

    job_id = job.name.rsplit("/", 1)[1]
    assert job_id.isdigit()
    lines = [(e.replica, e.message) for e in api.logs(job.name, settings=settings)]
    for replica, kind in (("workerpool0-0", "chief"), ("workerpool1-0", "worker")):
        mine = [m for r, m in lines if r == replica]
        assert f"task workerpool{replica[10]} 0 of ['workerpool0', 'workerpool1']" in mine
        assert f"job id {job_id} project {PROJECT}" in mine
        assert "model dir gs://sandbox-test/runs/stand-in/model/" in mine
        assert f"tf task {kind}" in mine
        assert "gcs route True" in mine
        assert "tool endpoint none" in mine  # the tool's own variables stay out of replicas
    service = [m for r, m in lines if r == "service"]
    assert service[0] == "Waiting for job to be provisioned." and service[-1] == "Job completed successfully."

    raw = [e for e in sandbox.logging.entries if e["resource"]["labels"]["job_id"] == job_id]
    assert {e["resource"]["type"] for e in raw} == {"ml_job"}
    assert {e["resource"]["labels"]["task_name"] for e in raw} == {
        "workerpool0-0",
        "workerpool1-0",
        "service",
    }


def test_a_failing_replica_fails_the_job_with_its_error(sandbox, settings):
    script = (
        "import sys; print('trainer: reading gs://sandbox-test/none/train-*');"
        "print('ValueError: no files match gs://sandbox-test/none/train-*'); sys.exit(3)"
    )
    client = _client(settings)
    job = Job(client.create_once(python_job(script)), client)
    job.wait(timeout=60, check=False)
    assert job.state == "JOB_STATE_FAILED"
    assert job.error.startswith("The replica workerpool0-0 exited with a non-zero status of 3.")
    assert "ValueError: no files match gs://sandbox-test/none/train-*" in job.error
    messages = [e.message for e in api.logs(job.name, settings=settings)]
    assert "ValueError: no files match gs://sandbox-test/none/train-*" in messages
    assert messages[-1].startswith("Job failed. The replica workerpool0-0")


def test_a_job_that_cannot_start_here_fails_with_the_reason(sandbox, settings):
    body = python_job("")
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    del pool["containerSpec"]
    pool["pythonPackageSpec"] = {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
        "packageUris": ["gs://sandbox-test/pkg.tar.gz"],
        "pythonModule": "no_such_module_for_the_sandbox",
    }
    client = _client(settings)
    job = Job(client.create_once(body), client)
    job.wait(timeout=60, check=False)
    assert job.state == "JOB_STATE_FAILED"
    assert "no_such_module_for_the_sandbox" in job.error


def test_cancel_stops_every_process_of_a_running_job(sandbox, settings):
    script = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(600)"
    client = _client(settings)
    job = Job(client.create_once(python_job(script, replicas=2)), client)
    job_id = job.name.rsplit("/", 1)[1]

    def pids(fake) -> list[int]:
        return [
            int(e["jsonPayload"]["message"].split()[1])
            for e in fake.entries
            if e["resource"]["labels"]["job_id"] == job_id and e["jsonPayload"]["message"].startswith("pid ")
        ]

    assert sandbox.logging.wait_until(lambda fake: len(pids(fake)) == 2, timeout=30)
    running = pids(sandbox.logging)
    assert all(pid_alive(p) for p in running)
    assert job.refresh().state == "JOB_STATE_RUNNING"

    job.cancel()
    assert job.state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    assert sandbox.jobs.wait(job.name, timeout=30)
    assert job.refresh().state == "JOB_STATE_CANCELLED"
    assert [p for p in running if pid_alive(p)] == []
    assert [e.message for e in api.logs(job.name, settings=settings)][-1] == "Job was cancelled."


def test_a_scripted_capacity_refusal_plays_out_instead_of_running(sandbox, settings):
    """Capacity faults are the fake's (vertex_capacity.py): a job of a strategy scripted to get
    no capacity ends FAILED with code 8 and never starts a process."""
    sandbox.vertex.no_capacity("FLEX_START")
    body = python_job("print('must not run')")
    body["jobSpec"]["scheduling"] = {"strategy": "FLEX_START", "maxWaitDuration": "60s"}
    client = _client(settings)
    job = Job(client.create_once(body), client)
    job.wait(timeout=30, check=False)
    assert job.state == "JOB_STATE_FAILED" and job.data["error"]["code"] == 8
    assert "Resources are insufficient in region: us-central1" in job.error
    assert not sandbox.jobs.wait(job.name, timeout=0)  # never handed to the runner
    assert list(api.logs(job.name, settings=settings)) == []


def test_a_deployed_model_answers_the_endpoints_predict(sandbox, settings):
    """The serving container's command runs with Vertex AI's AIP_* variables (a stand-in server
    here; the TensorFlow one is test_sandbox_trainer's), and :predict reaches it."""
    from vertex_trainer.vertex.model_deploy import deploy
    from vertex_trainer.vertex.models import RegistryClient

    request = echo_deploy_request()
    registry = RegistryClient(PROJECT, REGION, settings=settings)
    deployment = deploy(registry, request, poll=settings.poll)

    predictions = deployment.predict([{"a": 1}, {"b": 2}])
    assert predictions == [
        {"echo": {"a": 1}, "model": "gs://sandbox-test/runs/echo/model"},
        {"echo": {"b": 2}, "model": "gs://sandbox-test/runs/echo/model"},
    ]
    answer = registry.predict(deployment.endpoint, [{"c": 3}])
    assert answer["deployedModelId"] == deployment.deployed_model_id
    assert answer["model"] == deployment.model and answer["modelVersionId"] == deployment.model_version
    with pytest.raises(ServiceError, match="instance 0: not a JPEG or PNG image"):
        deployment.predict([{"bad": True}])
    assert list(sandbox.models.servers) == [deployment.deployed_model_id]


def test_the_plain_fake_still_scripts_its_jobs_and_serves_no_predictions():
    """Without the sandbox's hooks FakeVertex behaves as before: states advance per GET."""
    import urllib.error
    import urllib.request

    from vertex_trainer.emulators.vertex import FakeVertex

    def call(url: str, body=None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}  # a JSON method's body is JSON, as clients send it
        with urllib.request.urlopen(
            urllib.request.Request(url, data=data, headers=headers), timeout=10
        ) as resp:
            return json.loads(resp.read())

    with FakeVertex(validate=False) as fake:
        created = call(f"{fake.url}/v1/projects/p/locations/l/customJobs", python_job("print(1)"))
        assert created["state"] == "JOB_STATE_QUEUED"
        states = [call(f"{fake.url}/v1/{created['name']}")["state"] for _ in range(3)]
        assert states == ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]
        with pytest.raises(urllib.error.HTTPError) as err:
            call(f"{fake.url}/v1/projects/p/locations/l/endpoints/e:predict", {"instances": [1]})
        assert err.value.code == 404  # no such endpoint; with one deployed and no predictor: 501


def test_the_demo_spec_is_a_valid_cloud_spec():
    """examples/sandbox/digits.yaml (make sandbox-demo) passes validation as a cloud job: it builds
    the bundled trainer with Cloud Build, its paths are in the bucket the demo creates."""
    from vertex_trainer.spec import cloud_problems

    from .conftest import ROOT

    spec = api.load_spec(ROOT / "examples/sandbox/digits.yaml", project="sandbox")
    cloud_problems(spec)
    assert spec.image.repository and spec.image.builder == "cloud-build"
    assert spec.output_dir.startswith("gs://sandbox-demo/")
    assert spec.trainer.train_data.startswith("gs://sandbox-demo/digits/")
    assert spec.deploy is not None and spec.deploy.endpoint == "digits"
