"""Persistent resources and a shell on a replica (docs/contract.md section 11), end to end against the
fake Vertex AI through the real clients: resources create (idempotent by id, the operation
followed) / list / delete, a job that runs on a resource, the fit check before a create (exit 2
naming the mismatch, nothing created), and `shell JOB` printing a running replica's URI."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import PROJECT, REGION
from vertex_trainer import api
from vertex_trainer.errors import UserError

pytestmark = pytest.mark.wire
STANDARD = {"strategy": "standard"}
PARENT = f"projects/{PROJECT}/locations/{REGION}"


def test_create_is_idempotent_by_id_lists_and_deletes(fake, run_cli, spec_file):
    path = spec_file(scheduling=STANDARD, replicas=2)
    dry = run_cli("resources", "create", path, "--id", "team-h100", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "persistentResourceId=team-h100" in dry.stdout and not fake.calls("resource-create")

    first = run_cli("resources", "create", path, "--id", "team-h100", "-o", "json")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["name"] == f"{PARENT}/persistentResources/team-h100"
    assert out["state"] == "RUNNING" and out["adopted"] is False  # the operation was followed
    (pool,) = out["resource"]["resourcePools"]  # one shape: one pool of 2
    assert pool["machineSpec"]["machineType"] == "a3-highgpu-8g" and pool["replicaCount"] == "2"
    assert pool["diskSpec"] == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}

    again = run_cli("resources", "create", path, "--id", "team-h100", "-o", "json")
    assert again.returncode == 0 and json.loads(again.stdout)["adopted"] is True
    assert len(fake.calls("resource-create")) == 1

    listed = run_cli("resources", "list", "--project", PROJECT, "--region", REGION)
    assert "team-h100  RUNNING" in listed.stdout
    assert "pool-0: a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas" in listed.stdout

    gone = run_cli("resources", "delete", "team-h100", "--project", PROJECT, "--region", REGION)
    assert gone.returncode == 0 and "deleted" in gone.stdout and not fake.resources.resources
    twice = run_cli("resources", "delete", f"{PARENT}/persistentResources/team-h100")
    assert twice.returncode == 0 and "nothing to delete" in twice.stdout


def test_a_job_runs_on_a_resource_that_fits(fake, settings, spec_file):
    spec = api.load_spec(
        spec_file(scheduling=STANDARD, replicas=2, persistent_resource="team-h100"), settings=settings
    )
    api.create_resource(spec, settings=settings)  # the id: persistent_resource
    job = api.submit(spec, wait=True, settings=settings, log=lambda _: None)
    assert job.succeeded and job.data["jobSpec"]["persistentResourceId"] == "team-h100"
    assert [c.op for c in fake.requests].count("resource-get") >= 1  # read before the create


@pytest.mark.parametrize(
    "pool,state,fragment",
    [
        (
            {"machineType": "a2-ultragpu-8g", "acceleratorType": "NVIDIA_A100_80GB", "acceleratorCount": 8},
            "RUNNING",
            "has no pool of a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB",
        ),
        (
            {"machineType": "a3-highgpu-8g", "acceleratorType": "NVIDIA_H100_80GB", "acceleratorCount": 8},
            "PROVISIONING",
            "is PROVISIONING, not RUNNING",
        ),
        (
            {
                "machineType": "a3-highgpu-8g",
                "acceleratorType": "NVIDIA_H100_80GB",
                "acceleratorCount": 8,
                "replicas": "1",
            },
            "RUNNING",
            "holds 1 replica, the job needs 2",
        ),
    ],
)
def test_a_resource_that_does_not_fit_is_exit_2_before_any_create(
    fake, settings, spec_file, pool, state, fragment
):
    replicas = pool.pop("replicas", "4")
    fake.resources.add(
        PARENT,
        "team",
        {
            "resourcePools": [
                {
                    "id": "p0",
                    "machineSpec": pool,
                    "replicaCount": replicas,
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                }
            ]
        },
        state=state,
    )
    spec = api.load_spec(
        spec_file(scheduling=STANDARD, replicas=2, persistent_resource="team"), settings=settings
    )
    with pytest.raises(UserError) as err:
        api.submit(spec, settings=settings, log=lambda _: None)
    assert err.value.exit_code == 2 and fragment in err.value.message
    assert "resources create" in err.value.hint
    assert not fake.calls("create")


def test_a_missing_resource_is_exit_2(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file(scheduling=STANDARD, persistent_resource="nowhere"))
    assert result.returncode == 2, result.stderr
    assert "persistentResources/nowhere" in result.stderr and "resources create" in result.stderr
    assert not fake.calls("create")


def test_shell_waits_for_running_and_prints_the_replicas_uri(fake, run_cli, spec_file, settings):
    fake.set_script(["JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING"])  # then runs on
    path = spec_file(scheduling=STANDARD, replicas=2, enable_web_access=True)
    created = run_cli("submit", path, "-o", "json")
    assert created.returncode == 0, created.stderr
    name = json.loads(created.stdout)["name"]
    assert fake.jobs[name]["state"] == "JOB_STATE_QUEUED"  # not running yet: shell waits

    shell = run_cli("shell", name, "--replica", "workerpool1-0", "-o", "json")
    assert shell.returncode == 0, shell.stderr
    out = json.loads(shell.stdout)
    assert out["replica"] == "workerpool1-0"
    assert out["uri"] == fake.jobs[name]["webAccessUris"]["workerpool1-0"]
    assert out["uri"].startswith("https://") and "-dot-us-central1.aiplatform-training" in out["uri"]
    text = run_cli("shell", name)  # the chief by default
    assert text.returncode == 0 and text.stdout.strip() == fake.jobs[name]["webAccessUris"]["workerpool0-0"]
    job = api.status(name, settings=settings)
    assert set(job.web_access_uris) == {"workerpool0-0", "workerpool1-0"}
    wrong = run_cli("shell", name, "--replica", "workerpool3-0")
    assert wrong.returncode == 2 and "workerpool0-0, workerpool1-0" in wrong.stderr


def test_shell_on_a_job_without_web_access_says_how_to_get_it(fake, run_cli, spec_file):
    created = run_cli("submit", spec_file(scheduling=STANDARD), "-o", "json")
    name = json.loads(created.stdout)["name"]
    result = run_cli("shell", name)
    assert result.returncode == 2 and "enable_web_access: true" in result.stderr


def test_web_access_in_python_and_a_bad_replica_names_the_ones_there(fake, settings, spec_file):
    fake.set_script(["JOB_STATE_QUEUED", "JOB_STATE_RUNNING"])  # stays running
    spec = api.load_spec(
        spec_file(scheduling=STANDARD, replicas=2, enable_web_access=True), settings=settings
    )
    job = api.submit(spec, settings=settings, log=lambda _: None)
    assert job.web_access_uris == {}  # queued: no shell yet
    uri = api.web_access(job, "workerpool0-0")
    assert job.web_access_uris["workerpool0-0"] == uri and set(job.web_access_uris) == {
        "workerpool0-0",
        "workerpool1-0",
    }
    with pytest.raises(UserError) as err:
        api.web_access(job, "workerpool2-0")
    assert "workerpool0-0, workerpool1-0" in err.value.hint
