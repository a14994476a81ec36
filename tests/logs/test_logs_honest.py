"""`logs` answers for what is not there (issue 40 item 4): a job Vertex AI does not have is not
found exactly as `status` says it (exit 2, the 404 and its hint), never an empty log; a
`--replica` the job or the local run does not have is exit 2 naming those it has. Nothing is read
from Cloud Logging before either answer."""

from __future__ import annotations

import io
import os

import pytest

from vertex_trainer import api
from vertex_trainer.api.jobs import job_replicas
from vertex_trainer.errors import UserError
from vertex_trainer.local import run_local
from vertex_trainer.settings import Settings

from .conftest import job_body

MISSING = "projects/test-project/locations/us-central1/customJobs/99"


@pytest.mark.wire
@pytest.mark.parametrize("follow", [(), ("--follow",)], ids=["read", "follow"])
def test_logs_of_a_missing_job_is_not_found_as_status_says(logging_fake, vertex_fake, run_cli, follow):
    status = run_cli("status", MISSING)
    logs = run_cli("logs", MISSING, *follow)
    assert status.returncode == logs.returncode == 2
    assert logs.stdout == ""
    assert logs.stderr == status.stderr  # the same message and hint, word for word
    assert "HTTP 404 NOT_FOUND" in logs.stderr and "vertex-trainer list" in logs.stderr
    assert logging_fake.reads == 0  # nothing read from Cloud Logging


@pytest.mark.wire
def test_logs_of_a_missing_job_id_needs_the_region_as_status_does(logging_fake, vertex_fake, run_cli):
    status = run_cli("status", "99", "--project", "test-project")
    logs = run_cli("logs", "99", "--project", "test-project")
    assert status.returncode == logs.returncode == 2 and logs.stderr == status.stderr
    assert "needs --region" in logs.stderr
    by_id = run_cli("logs", "99", "--project", "test-project", "--region", "us-central1")
    assert by_id.returncode == 2 and by_id.stderr == run_cli("status", MISSING).stderr
    assert logging_fake.reads == 0


@pytest.mark.wire
def test_a_replica_the_job_does_not_have_is_exit_2_naming_those_it_has(logging_fake, vertex_fake, run_cli):
    name = vertex_fake.add_job(job_body())["name"]  # one replica: workerpool0-0
    logging_fake.add(name.rsplit("/", 1)[1], "chief starts")
    for follow in ((), ("--follow",)):
        result = run_cli("logs", name, "--replica", "workerpool1-0", *follow)
        assert result.returncode == 2 and result.stdout == ""
        first, hint = result.stderr.splitlines()
        assert first == (
            f"error: --replica workerpool1-0: job {name} has no such replica; its replicas: workerpool0-0"
        )
        assert "--replica workerpool0-0" in hint
    assert logging_fake.reads == 0
    chief = run_cli("logs", name, "--replica", "workerpool0-0")
    assert chief.returncode == 0 and chief.stdout == "[workerpool0-0] chief starts\n"


def test_the_replicas_of_a_job_are_its_pools_replica_counts():
    body = job_body()
    chief = body["jobSpec"]["workerPoolSpecs"][0]
    # A Reduction Server job: pool 1 empty ({}), pool 2 two reducers; an int64 is a string on the wire.
    body["jobSpec"]["workerPoolSpecs"] = [chief, {}, {**chief, "replicaCount": "2"}]
    assert job_replicas(body) == ["workerpool0-0", "workerpool2-0", "workerpool2-1"]
    body["jobSpec"]["workerPoolSpecs"] = [chief, {**chief, "replicaCount": 3}]
    assert job_replicas(body) == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2"]


@pytest.mark.wire
def test_the_api_refuses_before_anything_is_iterated(logging_fake, vertex_fake, settings):
    with pytest.raises(UserError, match="404") as missing:
        api.logs(MISSING, settings=settings)  # not a lazy iterator that fails later
    assert missing.value.exit_code == 2
    name = vertex_fake.add_job(job_body())["name"]
    with pytest.raises(UserError, match="its replicas: workerpool0-0"):
        api.logs(name, replica="workerpool0-1", settings=settings)
    job = api.status(name, settings=settings)
    gets = len(vertex_fake.calls("get"))
    with pytest.raises(UserError, match="its replicas: workerpool0-0"):
        api.logs(job, replica="workerpool3-0", settings=settings)  # a Job: no second GET
    assert len(vertex_fake.calls("get")) == gets and logging_fake.reads == 0


def _local_run(out) -> None:
    """A one-replica local run writing to `out` (a process, as `submit --local` starts it)."""
    from rich.console import Console

    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "local/trainer:x", "command": ["python", "-c", "print('hello')"]},
    }
    job = {
        "displayName": "one-replica",
        "labels": {"vertex-trainer-key": "k"},
        "jobSpec": {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": str(out)}},
    }
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    result = run_local(job, None, settings=Settings(environ=dict(os.environ)), console=console)
    assert result.succeeded


def test_a_replica_a_local_run_did_not_run_is_exit_2_naming_those_it_ran(tmp_path, run_cli):
    out = tmp_path / "out"
    _local_run(out)
    for follow in ((), ("--follow",)):
        result = run_cli("logs", out, "--replica", "workerpool1-0", *follow)
        assert result.returncode == 2 and result.stdout == ""
        assert f"error: --replica workerpool1-0: local run {out} has no such replica; its replicas: " in (
            result.stderr
        )
        assert result.stderr.splitlines()[0].endswith("its replicas: workerpool0-0")
    chief = run_cli("logs", out, "--replica", "workerpool0-0")
    assert chief.returncode == 0 and chief.stdout == "[workerpool0-0] hello\n"
