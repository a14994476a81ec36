"""The Vertex client against the fake server: idempotent create, retries, errors, polling."""

from __future__ import annotations

import json

import pytest

from vertex_trainer.emulators.vertex import FakeVertex
from vertex_trainer.errors import JobFailed, ServiceError, UserError
from vertex_trainer.settings import PollPolicy, RetryPolicy, Settings
from vertex_trainer.vertex.custom_jobs import (
    Job,
    JobsClient,
    check_key,
    console_url,
    create_idempotent,
    job_name,
    new_key,
)

pytestmark = pytest.mark.wire

FAST_POLL = PollPolicy(initial=0.01, maximum=0.05)


def test_create_then_get(fake, client, job_body):
    data, adopted = create_idempotent(client, job_body("k1"), "k1")
    assert not adopted
    assert data["name"].startswith("projects/test-project/locations/us-central1/customJobs/")
    assert data["state"] == "JOB_STATE_QUEUED" and data["createTime"]
    # the look before, the create, the look after (two creates of one key at once: the newer
    # cancels itself, tests/hostile/test_hostile_careless_same_key_race.py)
    assert [r.op for r in fake.requests] == ["list", "create", "list"]
    assert fake.calls("create")[0].body == job_body("k1")  # sent as rendered, byte for byte
    assert client.get(data["name"])["state"] == "JOB_STATE_PENDING"


def test_create_committed_but_answered_503_is_adopted(fake, client, job_body):
    fake.fail("create", 503, commit=True)
    data, adopted = create_idempotent(client, job_body("k2"), "k2")
    assert adopted
    assert len(fake.jobs) == 1 and data["name"] in fake.jobs
    assert len(fake.calls("create")) == 1  # never repeated


def test_create_committed_then_connection_dropped_is_adopted(fake, client, job_body):
    fake.fail("create", 0, commit=True)
    _data, adopted = create_idempotent(client, job_body("k3"), "k3")
    assert adopted and len(fake.jobs) == 1 and len(fake.calls("create")) == 1


def test_create_timeout_after_commit_is_adopted(fake, job_body):
    slow = JobsClient(
        "test-project",
        "us-central1",
        settings=Settings(
            vertex_endpoint=fake.url, retry=RetryPolicy(attempts=3, initial=0.01, read_timeout=0.3)
        ),
    )
    fake.fail("create", 503, commit=True, delay=1.0)  # the answer comes after the client gave up
    _data, adopted = create_idempotent(slow, job_body("k4"), "k4")
    assert adopted and len(fake.jobs) == 1


def test_create_still_committing_after_the_timeout_is_adopted_not_sent_again(fake, job_body):
    # A loaded service works on the create past the client's read timeout and commits it after
    # the client's first look: the client keeps looking for a read timeout's worth before it
    # would send the create again, so one job results.
    slow = JobsClient(
        "test-project",
        "us-central1",
        settings=Settings(
            vertex_endpoint=fake.url, retry=RetryPolicy(attempts=3, initial=0.01, read_timeout=0.5)
        ),
    )
    fake.fail("create", 503, commit=True, late=True, delay=0.8)
    _data, adopted = create_idempotent(slow, job_body("k4b"), "k4b")
    assert adopted and len(fake.jobs) == 1 and len(fake.calls("create")) == 1
    assert len(fake.calls("list")) >= 2  # looked again while the create was still in flight


def test_503_before_commit_is_retried(fake, client, job_body):
    fake.fail("create", 503, times=2)
    messages = []
    client.log = messages.append
    _data, adopted = create_idempotent(client, job_body("k5"), "k5")
    assert not adopted and len(fake.jobs) == 1
    assert len(fake.calls("create")) == 3
    assert any("retrying" in m for m in messages)


@pytest.mark.parametrize("status", [429, 500, 502, 504])
def test_transient_statuses_are_retried(fake, client, job_body, status):
    fake.fail("create", status)
    create_idempotent(client, job_body("k6"), "k6")
    assert len(fake.calls("create")) == 2 and len(fake.jobs) == 1


def test_persistent_503_gives_up_bounded(fake, client, job_body):
    fake.fail("any", 503, times=100)
    with pytest.raises(ServiceError) as err:
        create_idempotent(client, job_body("k7"), "k7")
    assert err.value.exit_code == 3
    assert "after 4 attempts" in str(err.value)
    assert len(fake.requests) <= 4
    assert fake.jobs == {}


def test_list_failure_is_retried_too(fake, client, job_body):
    fake.fail("list", 503)
    _data, adopted = create_idempotent(client, job_body("k8"), "k8")
    assert not adopted and len(fake.jobs) == 1


def test_same_key_twice_gives_one_job(fake, client, job_body):
    first, adopted1 = create_idempotent(client, job_body("ci-42"), "ci-42")
    second, adopted2 = create_idempotent(client, job_body("ci-42"), "ci-42")
    assert (adopted1, adopted2) == (False, True)
    assert first["name"] == second["name"] and len(fake.jobs) == 1


def test_adopting_a_job_from_another_spec_warns(fake, client, job_body):
    create_idempotent(client, job_body("ci-43", "hash-a"), "ci-43")
    messages = []
    client.log = messages.append
    _, adopted = create_idempotent(client, job_body("ci-43", "hash-b"), "ci-43")
    assert adopted and any("different spec" in m for m in messages)


def test_403_is_not_retried_and_names_the_permission(fake, client, job_body):
    fake.fail("create", 403)
    with pytest.raises(ServiceError) as err:
        create_idempotent(client, job_body(), "key-1")
    text = str(err.value)
    assert "PERMISSION_DENIED" in text and "aiplatform.customJobs.create" in text
    assert "roles/aiplatform.user" in text
    assert len(fake.calls("create")) == 1


def test_403_api_disabled_hint(fake, client, job_body):
    fake.fail(
        "list",
        403,
        message="Vertex AI API has not been used in project 123 before or it is "
        "disabled. Enable it by visiting https://console...",
    )
    with pytest.raises(ServiceError) as err:
        create_idempotent(client, job_body(), "key-1")
    assert "gcloud services enable aiplatform.googleapis.com --project test-project" in str(err.value)
    assert len(fake.requests) == 1


def test_404_names_the_job_and_how_to_find_it(fake, client):
    name = "projects/test-project/locations/us-central1/customJobs/99"
    with pytest.raises(UserError) as err:  # a job that does not exist is the caller's input: exit 2
        client.get(name)
    assert err.value.exit_code == 2
    assert "NOT_FOUND" in str(err.value) and "vertex-trainer list" in str(err.value)
    assert len(fake.requests) == 1


def test_400_from_the_service_is_reported(fake, client, job_body):
    body = job_body()
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorTyp"] = "X"
    with pytest.raises(ServiceError) as err:
        create_idempotent(client, body, "key-1")
    assert "INVALID_ARGUMENT" in str(err.value) and "acceleratorTyp" in str(err.value)


def test_list_filters_by_label_and_pages(fake, job_body):
    for i in range(5):
        fake.add_job(job_body(f"k{i}"))
    fake.add_job({**job_body("other"), "labels": {"team": "x"}})
    client = JobsClient("test-project", "us-central1", settings=Settings(vertex_endpoint=fake.url))
    assert len(client.list(page_size=2)) == 6
    assert len([r for r in fake.calls("list")]) == 3
    assert [j["labels"]["vertex-trainer-key"] for j in client.list('labels.vertex-trainer-key="k3"')] == [
        "k3"
    ]
    assert len(client.list("labels.vertex-trainer-spec:*")) == 5
    assert len(client.list(limit=2)) == 2


def test_jobs_in_other_regions_are_not_listed(fake, job_body):
    fake.add_job(job_body("k1"), location="europe-west4")
    client = JobsClient("test-project", "us-central1", settings=Settings(vertex_endpoint=fake.url))
    assert client.list() == []


@pytest.mark.parametrize("final", ["JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"])
def test_wait_raises_jobfailed_with_the_error(fake, client, job_body, final):
    fake.set_script(["JOB_STATE_PENDING", "JOB_STATE_RUNNING", final], error_message="OOM in replica 0")
    data, _ = create_idempotent(client, job_body(), "key-1")
    seen = []
    with pytest.raises(JobFailed) as err:
        Job(data, client).wait(poll=FAST_POLL, on_state=lambda j: seen.append(j.state))
    assert err.value.exit_code == 1
    assert seen == ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", final]
    if final == "JOB_STATE_FAILED":
        assert "OOM in replica 0" in str(err.value)


def test_wait_success_and_check_false(fake, client, job_body):
    data, _ = create_idempotent(client, job_body(), "key-1")
    job = Job(data, client).wait(poll=FAST_POLL)
    assert job.succeeded and job.done and job.data["endTime"]
    fake.set_script(["JOB_STATE_RUNNING", "JOB_STATE_FAILED"])
    data, _ = create_idempotent(client, job_body("key-2"), "key-2")
    assert Job(data, client).wait(poll=FAST_POLL, check=False).state == "JOB_STATE_FAILED"


def test_wait_timeout(fake, client, job_body):
    fake.set_script(["JOB_STATE_RUNNING"])
    data, _ = create_idempotent(client, job_body(), "key-1")
    with pytest.raises(TimeoutError):
        Job(data, client).wait(timeout=0.1, poll=FAST_POLL)


def test_cancel(fake, client, job_body):
    fake.set_script(["JOB_STATE_RUNNING"])
    data, _ = create_idempotent(client, job_body(), "key-1")
    job = Job(data, client).cancel()
    assert job.state == "JOB_STATE_CANCELLED"
    assert [r.op for r in fake.requests][-2:] == ["cancel", "get"]
    job.cancel()  # already ended: no second cancel request
    assert len(fake.calls("cancel")) == 1


def test_job_fields_and_repr(fake, client, job_body):
    data, _ = create_idempotent(client, job_body(), "key-1")
    job = Job(data, client, image="img", idempotency_key="key-1")
    assert job.console_url == (
        f"https://console.cloud.google.com/vertex-ai/locations/us-central1/"
        f"training/{job.id}/cpu?project=test-project"
    )
    assert set(job.to_dict()) == {
        *("name", "state", "console_url", "image", "idempotency_key", "adopted", "output_dir")
    }
    base = job.data["jobSpec"].get("baseOutputDirectory")
    assert job.output_dir == (base["outputUriPrefix"].rstrip("/") if base else None)
    assert f"state={job.state!r}" in repr(job) and job.id in repr(job)  # one state vocabulary
    assert "<a href=" in job._repr_html_()
    json.dumps(job.describe())


def test_keys_and_names():
    key = new_key()
    assert check_key(key) == key and len(key) <= 63
    with pytest.raises(UserError) as err:
        check_key("Run 42!")
    assert err.value.exit_code == 2 and "run-42" in str(err.value)
    with pytest.raises(UserError):
        check_key("x" * 64)
    assert job_name("123", "p", "us-east1") == "projects/p/locations/us-east1/customJobs/123"
    with pytest.raises(UserError) as err:
        job_name("123")
    assert "--project and --region" in str(err.value)
    assert console_url("projects/p/locations/europe-west4/customJobs/7").endswith(
        "/locations/europe-west4/training/7/cpu?project=p"
    )


def test_generated_rest_client_speaks_to_the_fake(fake, job_body):
    """The fake answers the aiplatform_v1 REST transport (enum-encoding=int, int64 as strings)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    gapic = aiplatform_v1.JobServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url}
    )
    parent = "projects/test-project/locations/us-central1"
    created = gapic.create_custom_job(
        parent=parent, custom_job=aiplatform_v1.CustomJob.from_json(json.dumps(job_body("gapic")))
    )
    assert created.state == aiplatform_v1.JobState.JOB_STATE_QUEUED
    assert "enum-encoding=int" in fake.calls("create")[0].query.get("$alt", "")
    sent = fake.calls("create")[0].body
    assert sent["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == 5  # an int
    got = gapic.get_custom_job(name=created.name)
    assert got.state == aiplatform_v1.JobState.JOB_STATE_PENDING
    assert got.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    listed = list(
        gapic.list_custom_jobs(request={"parent": parent, "filter": 'labels.vertex-trainer-key="gapic"'})
    )
    assert [j.name for j in listed] == [created.name]
    from google.api_core import exceptions

    with pytest.raises(exceptions.NotFound):
        gapic.get_custom_job(name=parent + "/customJobs/404")


def test_fake_rejects_unknown_fields_like_the_service():
    with FakeVertex() as fake:
        client = JobsClient(
            "p", "us-central1", settings=Settings(vertex_endpoint=fake.url, retry=RetryPolicy(attempts=1))
        )
        with pytest.raises(ServiceError, match="INVALID_ARGUMENT"):
            client.create_once({"displayName": "x", "jobSpec": {"bogus": 1}})
