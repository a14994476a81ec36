"""Two submits with one idempotency key at the same instant (issue 42, H2 round 2): a CI job and
its retry, a script started twice, `submit --idempotency-key $GIT_SHA` from two terminals.

Both look for a job with the key, both find none, both create one: a CustomJob (or a tuning job)
takes no client-chosen id, so the service makes two. Both ran, both billed, and both wrote into
the key's one folder (`<output_dir>/<name>-<key>/`), each over the other's model and checkpoints.
Now each looks again after its create: the newer job is cancelled (it is still queued: nothing ran)
and its submit adopts the oldest; the oldest's submit goes on. A retry adopts the oldest too.

The race is made here as it happens: the other process's create lands between this client's look
and its own create (or just after it), against the fake Vertex AI.
"""

from __future__ import annotations

from tests.shared import PROJECT, REGION, job_body
from vertex_trainer.vertex.custom_jobs import JobsClient, create_idempotent

KEY = "ci-4711"
CANCELLED = ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


class _OtherFirst(JobsClient):
    """Another submit's create lands after this one's look and before its own create."""

    other: JobsClient

    def create_once(self, job):
        self.other.create_once(job)
        return super().create_once(job)


class _OtherJustAfter(JobsClient):
    """Another submit's create lands just after this one's create, before its look after."""

    other: JobsClient

    def create_once(self, job):
        made = super().create_once(job)
        self.other.create_once(job)
        return made


def _client(cls, settings, said):
    client = cls(PROJECT, REGION, settings=settings, log=said.append)
    client.other = JobsClient(PROJECT, REGION, settings=settings)
    return client


def _state(fake, name: str) -> str:
    return fake.jobs[name]["state"]


def test_the_newer_job_is_cancelled_and_its_submit_adopts_the_oldest(fake, settings):
    said: list[str] = []
    data, adopted = create_idempotent(_client(_OtherFirst, settings, said), job_body(KEY), KEY)
    assert len(fake.jobs) == 2 and len(fake.calls("create")) == 2  # the race happened
    oldest, newer = sorted(fake.jobs, key=lambda n: (fake.jobs[n]["createTime"], n))
    assert adopted and data["name"] == oldest  # this submit goes on with the other's job
    assert _state(fake, newer) in CANCELLED  # its own, cancelled while queued
    assert _state(fake, oldest) not in CANCELLED
    assert any(f"cancelling this one, {newer}" in line and oldest in line for line in said), said

    # a retry with the key (a third submit) adopts the job that runs, not the cancelled one
    again, adopted_again = create_idempotent(
        JobsClient(PROJECT, REGION, settings=settings), job_body(KEY), KEY
    )
    assert adopted_again and again["name"] == oldest and len(fake.calls("create")) == 2


def test_the_oldest_job_is_kept_by_its_own_submit(fake, settings):
    said: list[str] = []
    data, adopted = create_idempotent(_client(_OtherJustAfter, settings, said), job_body(KEY), KEY)
    assert len(fake.jobs) == 2
    oldest, newer = sorted(fake.jobs, key=lambda n: (fake.jobs[n]["createTime"], n))
    assert not adopted and data["name"] == oldest  # this one was first: it goes on
    assert _state(fake, oldest) not in CANCELLED
    assert _state(fake, newer) not in CANCELLED  # the other's job: its own submit's to cancel
    assert not any("cancelling" in line for line in said)


def test_a_create_without_a_race_is_one_job_as_before(fake, settings):
    data, adopted = create_idempotent(JobsClient(PROJECT, REGION, settings=settings), job_body(KEY), KEY)
    assert not adopted and list(fake.jobs) == [data["name"]]
    assert _state(fake, data["name"]) not in CANCELLED and not fake.calls("cancel")
