"""Reading a job's logs: the entries:list wire, paging, 429 backoff, the read pace, and
`vertex-trainer logs JOB` (each entry once, in order, none of another job's)."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import datetime, timezone

import pytest
import requests

from vertex_trainer.contract import LogEntry
from vertex_trainer.errors import UserError
from vertex_trainer.settings import RetryPolicy, Settings
from vertex_trainer.vertex.advice import advice, registry_region
from vertex_trainer.vertex.custom_jobs import Job
from vertex_trainer.vertex.job_logs import (
    FollowPolicy,
    LogsClient,
    _Cursor,
    parse_entry,
    parse_since,
    queue_note,
    rfc3339,
    to_ns,
)

from .conftest import PROJECT, job_body

NAME = "projects/test-project/locations/us-central1/customJobs/{}"


# -- pure pieces ----------------------------------------------------------------------------------


def test_timestamps_round_trip_at_every_precision():
    secs = int(datetime(2026, 11, 29, 18, 46, 51, tzinfo=timezone.utc).timestamp())
    assert to_ns("2026-11-29T18:46:51Z") == secs * 10**9
    assert to_ns("2026-11-29T18:46:51.5Z") == secs * 10**9 + 500_000_000
    assert to_ns("2026-11-29T18:46:51.123456789Z") == secs * 10**9 + 123_456_789
    assert to_ns("2026-11-29T19:46:51.000001+01:00") == secs * 10**9 + 1_000
    assert rfc3339(secs * 10**9 + 7) == "2026-11-29T18:46:51.000000007Z"
    # "…51Z" and "…51.5Z" do not sort as strings ('Z' > '.'); as times they do.
    assert to_ns("2026-11-29T18:46:51Z") < to_ns("2026-11-29T18:46:51.5Z")
    with pytest.raises(ValueError):
        to_ns("yesterday")


def test_since_takes_a_duration_or_a_time():
    now = 1795891611.0
    assert parse_since("30m", now) == int((now - 1800) * 10**9)
    assert parse_since("1h30m", now) == int((now - 5400) * 10**9)
    assert parse_since("2026-11-29T18:00:00Z", now) == to_ns("2026-11-29T18:00:00Z")
    assert parse_since(None) is None
    with pytest.raises(UserError, match="--since 'soon'"):
        parse_since("soon")


def test_entries_read_text_replica_and_severity_from_either_payload():
    entry = parse_entry(
        {
            "timestamp": "2026-11-29T18:46:51Z",
            "severity": "ERROR",
            "insertId": "a",
            "resource": {"type": "ml_job", "labels": {"task_name": "workerpool1-0"}},
            "jsonPayload": {"message": "boom\n", "levelname": "ERROR"},
        }
    )
    assert entry == LogEntry("2026-11-29T18:46:51Z", "workerpool1-0", "boom", "ERROR", "a")
    text = parse_entry(
        {
            "timestamp": "2026-11-29T18:46:51Z",
            "textPayload": "hi",
            "logName": "projects/p/logs/workerpool0-0",
            "resource": {"labels": {}},
        }
    )
    assert (text.replica, text.message, text.severity) == ("workerpool0-0", "hi", "DEFAULT")
    service = parse_entry(
        {
            "timestamp": "2026-11-29T18:46:51Z",
            "textPayload": "Job started",
            "logName": "projects/p/logs/ml.googleapis.com%2F123",
        }
    )
    assert service.replica == "service"
    assert entry.to_dict() == {
        "timestamp": "2026-11-29T18:46:51Z",
        "replica": "workerpool1-0",
        "severity": "ERROR",
        "message": "boom",
    }


def test_the_cursor_admits_each_entry_once_and_nothing_older():
    cursor = _Cursor(None)
    a = LogEntry("2026-11-29T18:46:51.1Z", "w", "a", insert_id="1")
    b = LogEntry("2026-11-29T18:46:51.100Z", "w", "b", insert_id="2")  # same time, other id
    c = LogEntry("2026-11-29T18:46:52Z", "w", "c", insert_id="3")
    assert [cursor.admit(e) for e in (a, b, a, c, b, a)] == [True, True, False, True, False, False]


def test_a_flex_start_job_says_how_long_it_has_queued_out_of_max_wait():
    data = {
        **job_body(strategy="FLEX_START", maxWaitDuration="14400s"),
        "name": NAME.format(1),
        "state": "JOB_STATE_PENDING",
        "createTime": "2026-11-29T18:00:00Z",
    }
    now = to_ns("2026-11-29T18:12:05Z") / 10**9
    assert queue_note(Job(data, None), now) == "Flex Start: queued 12m5s of max_wait 4h"
    data["jobSpec"]["scheduling"]["maxWaitDuration"] = "0s"
    assert "indefinitely" in queue_note(Job(data, None), now)
    assert queue_note(Job({**data, "state": "JOB_STATE_RUNNING"}, None), now) is None
    spot = {**job_body(strategy="SPOT"), "state": "JOB_STATE_PENDING", "createTime": data["createTime"]}
    assert queue_note(Job(spot, None), now) is None


@pytest.mark.parametrize(
    "error,lines,expected",
    [
        (
            {"code": 8, "message": "Resources are insufficient in region: us-central1."},
            [],
            "scheduling.fallback",
        ),
        (
            {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."},
            [
                "google.api_core.exceptions.Forbidden: 403 POST ...: caller does not have "
                "storage.objects.create access"
            ],
            "grant it the role",
        ),
        (
            {
                "code": 3,
                "message": "Unable to pull the image us-docker.pkg.dev/test-project/training/"
                "trainer:v1: manifest unknown",
            },
            [],
            "gcloud artifacts docker images list",
        ),
        (
            {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."},
            ["ZeroDivisionError: division by zero"],
            None,
        ),
    ],
)
def test_advice_for_the_usual_causes(error, lines, expected):
    job = {**job_body(), "name": NAME.format(1), "state": "JOB_STATE_FAILED", "error": error}
    found = advice(job, lines)
    assert (found is None) if expected is None else (expected in found)


def test_image_advice_names_a_registry_in_another_region():
    job = {
        **job_body(),
        "name": "projects/p/locations/europe-west4/customJobs/1",
        "error": {"code": 3, "message": "Failed to pull image"},
    }
    job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = "us-central1-docker.pkg.dev/p/r/t:v1"
    assert "the registry is in us-central1, the job in europe-west4" in advice(job)
    assert registry_region("eu.gcr.io/p/t") == "eu" and registry_region("gcr.io/p/t") == "us"


def test_the_real_service_gets_the_quota_pace_and_an_emulator_a_fast_one():
    assert FollowPolicy.for_settings(Settings()) == FollowPolicy(lag=5.0, read_interval=1.0)
    fast = FollowPolicy.for_settings(
        Settings(logging_endpoint="http://127.0.0.1:1", poll=Settings().poll.parse("0.5"))
    )
    assert fast.lag == pytest.approx(0.5) and fast.read_interval == pytest.approx(0.1)


# -- the wire -------------------------------------------------------------------------------------


@pytest.mark.wire
def test_a_2000_entry_job_pages_correctly(logging_fake, settings):
    logging_fake.add_many("111", [f"line {i}" for i in range(2000)], step=0.0005)
    logging_fake.add_many("222", [f"other {i}" for i in range(50)])
    client = LogsClient(PROJECT, settings=settings)
    got = list(client.entries("111"))
    assert [e.message for e in got] == [f"line {i}" for i in range(2000)]
    assert client.reads == 2
    first, second = logging_fake.requests
    assert first == {
        "resourceNames": ["projects/test-project"],
        "orderBy": "timestamp asc",
        "pageSize": 1000,
        "filter": 'resource.type="ml_job" AND resource.labels.job_id="111"',
    }
    assert second["pageToken"] and {k: v for k, v in second.items() if k != "pageToken"} == first


@pytest.mark.wire
def test_a_logging_429_backs_off_and_continues(logging_fake, settings):
    logging_fake.add_many("111", [f"line {i}" for i in range(1500)])
    logging_fake.fail(429, times=2)
    logs: list[str] = []
    client = LogsClient(PROJECT, settings=settings, log=logs.append)
    assert len(list(client.entries("111"))) == 1500
    assert logging_fake.answers == [429, 429, 200, 200]
    assert any(
        line.startswith("Cloud Logging: HTTP 429 RESOURCE_EXHAUSTED") and "retrying" in line for line in logs
    )


@pytest.mark.wire
def test_reads_keep_the_pace_of_the_read_quota(logging_fake, settings):
    # Independent of the machine's speed (issue 24 item 9): the pace counts from the end of a read,
    # so the fake sees paced reads at least read_interval apart however slow each one is.
    logging_fake.add_many("111", [f"line {i}" for i in range(10)])
    logging_fake.min_read_interval = 0.05  # the fake answers 429 to reads closer than this
    paced = LogsClient(PROJECT, settings=settings, policy=FollowPolicy(read_interval=0.06, page_size=2))
    assert len(list(paced.entries("111"))) == 10
    assert logging_fake.answers == [200] * 5
    # Without the pace, the quota answers 429 and the reads back off through ApiClient. The quota
    # interval is long next to the unpaced gap (a read right after another, even on a busy
    # machine) and the backoff gets many attempts, each with an even chance of a long enough
    # jittered wait: then neither a fast nor a slow machine runs out of attempts (with 5 fast
    # ones, every retry on a fast machine came back within the interval: "429 after 5 attempts").
    logging_fake.min_read_interval = 0.25
    patient = dataclasses.replace(
        settings, retry=RetryPolicy(attempts=40, initial=0.5, maximum=0.5, deadline=60, read_timeout=5)
    )
    pauses: list[float] = []
    recorder = LogsClient(
        PROJECT, settings=patient, sleep=pauses.append, policy=FollowPolicy(read_interval=1.0, page_size=4)
    )
    assert len(list(recorder.entries("111"))) == 10 and len(pauses) == 2
    assert 429 in logging_fake.answers[5:] and logging_fake.answers[-1] == 200
    assert logging_fake.answers[5:].count(200) == 3  # each of the 3 pages read once
    # It asked for (up to) one quota interval between reads, and none before the first.
    assert all(0.5 < p <= 1.0 for p in pauses)


@pytest.mark.wire
def test_tail_reads_the_last_lines_in_one_read(logging_fake, settings):
    logging_fake.add_many("111", [f"line {i}" for i in range(100)])
    client = LogsClient(PROJECT, settings=settings)
    assert [e.message for e in client.tail("111", n=3)] == ["line 97", "line 98", "line 99"]
    assert client.reads == 1 and logging_fake.requests[0]["orderBy"] == "timestamp desc"


@pytest.mark.wire
def test_the_fake_is_strict_like_the_service(logging_fake):
    url = f"{logging_fake.url}/v2/entries:list"
    base = {"resourceNames": ["projects/p"], "filter": 'resource.type="ml_job"'}
    for bad in (
        {**base, "pageSize": 1001},
        {**base, "orderBy": "severity"},
        {**base, "unknown": 1},
        {**base, "pageToken": "nope"},
        {**base, "filter": "resource.type~ml_job"},
    ):
        answer = requests.post(url, json=bad, timeout=5)
        assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert requests.post(url, json=base, timeout=5).json() == {}


# -- the command ----------------------------------------------------------------------------------


def _two_replica_job(vertex_fake) -> tuple[str, str]:
    """A job on the fake Vertex AI with a chief and one worker (workerpool0-0, workerpool1-0):
    (its name, its numeric id)."""
    body = job_body()
    pools = body["jobSpec"]["workerPoolSpecs"]
    pools.append(dict(pools[0]))
    name = vertex_fake.add_job(body)["name"]
    return name, name.rsplit("/", 1)[1]


def _job_with_mixed_entries(fake, job_id: str, other: str = "222") -> list[str]:
    """The job's entries (two replicas, the service, equal times, both payloads) among another's."""
    t0 = time.time() - 60
    fake.add(job_id, "Waiting for job to be provisioned.", replica="service", at=t0, text=True)
    fake.add(other, "not mine", at=t0 + 0.5)
    fake.add(job_id, "chief starts", at=t0 + 1)
    fake.add(job_id, "worker starts", replica="workerpool1-0", at=t0 + 1)  # same time
    fake.add(other, "not mine either", replica="workerpool1-0", at=t0 + 1.5)
    fake.add(job_id, "epoch 1 loss=0.5", at=t0 + 2, text=True)
    fake.add(
        job_id,
        "Traceback (most recent call last):\n  File x",
        replica="workerpool1-0",
        at=t0 + 3,
        severity="ERROR",
    )
    return [
        "[service] Waiting for job to be provisioned.",
        "[workerpool0-0] chief starts",
        "[workerpool1-0] worker starts",
        "[workerpool0-0] epoch 1 loss=0.5",
        "[workerpool1-0] Traceback (most recent call last):",
        "[workerpool1-0]   File x",
    ]


@pytest.mark.wire
def test_logs_prints_each_entry_of_the_job_once_in_order_and_none_of_another(
    logging_fake, vertex_fake, run_cli
):
    name, job_id = _two_replica_job(vertex_fake)
    expected = _job_with_mixed_entries(logging_fake, job_id)
    result = run_cli("logs", name)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected

    by_id = run_cli(
        "logs", job_id, "--project", "test-project", "--region", "us-central1",
        "--replica", "workerpool1-0", "-o", "json",
    )  # fmt: skip
    assert by_id.returncode == 0, by_id.stderr
    objects = [json.loads(line) for line in by_id.stdout.splitlines()]
    assert [o["message"] for o in objects] == [
        "worker starts",
        "Traceback (most recent call last):\n  File x",
    ]
    assert set(objects[0]) == {"timestamp", "replica", "severity", "message"}
    assert objects[1]["severity"] == "ERROR"

    recent = run_cli("logs", name, "--since", "1h")
    assert recent.stdout.splitlines() == expected
    assert run_cli("logs", name, "--since", "10s").stdout == ""


@pytest.mark.wire
def test_logs_errors_exit_2_or_3(logging_fake, vertex_fake, run_cli):
    assert run_cli("logs", "111").returncode == 2  # an id needs --project and --region
    assert (
        run_cli("logs", "111", "--project", "p", "--region", "us-central1", "--since", "later").returncode
        == 2
    )
    name, _ = _two_replica_job(vertex_fake)
    logging_fake.fail(403, times=10, message="Permission 'logging.logEntries.list' denied")
    denied = run_cli("logs", name)
    # a denied permission is exit 2 (issue 33: the project's setup; `vertex-trainer check`)
    assert denied.returncode == 2 and "roles/logging.viewer" in denied.stderr
