"""Following a job: `logs --follow` and `submit/status --wait` show the job's lines as they come,
each once, late entries included, end by themselves when the job ends, and explain a failure."""

from __future__ import annotations

import json
import re
import time

import pytest

from vertex_trainer.contract import Failure, JobEvent, LogEntry
from vertex_trainer.vertex.custom_jobs import Job, JobsClient
from vertex_trainer.vertex.job_logs import LogsClient, to_ns

from .conftest import PROJECT, REGION, job_body

pytestmark = pytest.mark.wire
ERROR = "The replica workerpool1-0 exited with a non-zero status of 1. Termination reason: Error."


def _job(vertex_fake, script, **scheduling) -> tuple[dict, str]:
    """A job in the fake Vertex, advancing along `script` one step per GET; (job, numeric id)."""
    vertex_fake.set_script(script, error_message=ERROR)
    job = vertex_fake.add_job(job_body(**scheduling))
    return job, job["name"].rsplit("/", 1)[1]


def _upper_bound(request: dict) -> int | None:
    m = re.search(r'timestamp<"([^"]+)"', request.get("filter", ""))
    return to_ns(m[1]) if m else None


def _replica_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if " | " in line]


def test_follow_ends_with_the_job_and_keeps_late_entries(vertex_fake, logging_fake, settings):
    """In process: the iterator the CLI uses, over both fakes."""
    job_data, job_id = _job(vertex_fake, ["JOB_STATE_RUNNING"])
    job = Job(job_data, JobsClient(PROJECT, REGION, settings=settings))
    items = LogsClient(PROJECT, settings=settings).follow(job)
    assert isinstance(next(items), JobEvent)
    t0 = time.time()
    logging_fake.add(job_id, "early, visible late", at=t0, late=0.01)  # lag: 0.02 s here
    logging_fake.add(job_id, "later, visible at once", at=t0 + 0.001)
    seen = []
    for item in items:
        if isinstance(item, LogEntry):
            seen.append(item.message)
            if len(seen) == 2:
                logging_fake.add(job_id, "last words", at=time.time())
                vertex_fake.set_state(job.name, "JOB_STATE_SUCCEEDED")
    assert seen == ["early, visible late", "later, visible at once", "last words"]
    assert job.succeeded


def test_submit_wait_shows_the_lines_of_a_job_that_runs_and_ends_while_it_waits(
    vertex_fake, logging_fake, popen_cli, spec_file
):
    vertex_fake.set_script(["JOB_STATE_QUEUED", "JOB_STATE_RUNNING"])  # RUNNING at the first GET
    # A 0.25 s poll makes the lag window 0.25 s against the emulator (5 s against the service).
    proc = popen_cli("submit", spec_file, "--wait", env={"VERTEX_TRAINER_POLL_INTERVAL": "0.25"})
    assert logging_fake.wait_until(lambda f: f.reads >= 1, timeout=30), proc.stderr
    job_id = re.search(r'job_id="(\d+)"', logging_fake.requests[0]["filter"])[1]
    (name,) = vertex_fake.jobs
    t0 = time.time()
    # Written first, but visible only 0.2 s later; a reader without a lag window would read B
    # (and move its cursor past A) before A exists for it.
    logging_fake.add(job_id, "A: first, arrives late", at=t0, late=0.2)
    logging_fake.add(job_id, "B: second", at=t0 + 0.001)
    c = logging_fake.add(job_id, "C: the worker", replica="workerpool1-0", at=t0 + 0.002)
    c_ns = to_ns(c["timestamp"])
    assert logging_fake.wait_until(
        lambda f: any((_upper_bound(r) or 0) > c_ns for r in f.requests), timeout=30
    )
    logging_fake.add(job_id, "D: as the job ends", at=time.time())
    vertex_fake.set_state(name, "JOB_STATE_SUCCEEDED")
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 0, err
    assert out.startswith(f"created  {name}") and "final    SUCCEEDED" in out
    assert _replica_lines(err) == [
        "workerpool0-0 | A: first, arrives late",
        "workerpool0-0 | B: second",
        "workerpool1-0 | C: the worker",
        "workerpool0-0 | D: as the job ends",
    ]
    lines = err.splitlines()
    running = next(i for i, line in enumerate(lines) if line.endswith("  RUNNING"))
    assert running < lines.index("workerpool0-0 | A: first, arrives late")


def test_submit_wait_output_json_keeps_the_log_lines_on_stderr(
    vertex_fake, logging_fake, popen_cli, spec_file
):
    """README: with --output json stdout stays the one JSON object; the lines still show (stderr)."""
    vertex_fake.set_script(["JOB_STATE_QUEUED", "JOB_STATE_RUNNING"])
    proc = popen_cli(
        "submit", spec_file, "--wait", "--output", "json", env={"VERTEX_TRAINER_POLL_INTERVAL": "0.25"}
    )
    assert logging_fake.wait_until(lambda f: f.reads >= 1, timeout=30), proc.stderr
    job_id = re.search(r'job_id="(\d+)"', logging_fake.requests[0]["filter"])[1]
    (name,) = vertex_fake.jobs
    line = logging_fake.add(job_id, "epoch 1/1 loss=0.5", at=time.time())
    assert logging_fake.wait_until(
        lambda f: any((_upper_bound(r) or 0) > to_ns(line["timestamp"]) for r in f.requests), timeout=30
    )
    vertex_fake.set_state(name, "JOB_STATE_SUCCEEDED")
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 0, err
    assert json.loads(out)["name"] == name and json.loads(out)["state"] == "JOB_STATE_SUCCEEDED"
    assert _replica_lines(err) == ["workerpool0-0 | epoch 1/1 loss=0.5"]


def test_logs_follow_on_a_finished_job_prints_and_returns_by_itself(vertex_fake, logging_fake, run_cli):
    done, done_id = _job(vertex_fake, ["JOB_STATE_SUCCEEDED"])
    logging_fake.add_many(done_id, ["one", "two", "three"], start=time.time() - 10)
    result = run_cli("logs", done["name"], "--follow", timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[workerpool0-0] one",
        "[workerpool0-0] two",
        "[workerpool0-0] three",
    ]
    assert "SUCCEEDED" in result.stderr

    failed, failed_id = _job(vertex_fake, ["JOB_STATE_FAILED"])
    logging_fake.add(failed_id, "ValueError: bad", replica="workerpool1-0", severity="ERROR")
    result = run_cli("logs", failed["name"], "--follow", "-o", "json", timeout=30)
    assert result.returncode == 1
    *entries, last = result.stdout.splitlines()  # the stream, then the error's one line
    assert [json.loads(x)["message"] for x in entries] == ["ValueError: bad"]
    assert json.loads(last)["error"]["kind"] == "job_failed"
    assert "ended FAILED: The replica workerpool1-0" in result.stderr


def test_a_failed_job_ends_with_its_error_the_failing_replicas_last_lines_and_advice(
    vertex_fake, logging_fake, run_cli
):
    job, job_id = _job(vertex_fake, ["JOB_STATE_RUNNING", "JOB_STATE_RUNNING", "JOB_STATE_FAILED"])
    t0 = time.time() - 30
    logging_fake.add_many(job_id, [f"chief {i}" for i in range(5)], start=t0)
    denied = (
        "google.api_core.exceptions.Forbidden: 403 GET gs://b/data: trainer@p.iam does not "
        "have storage.objects.get access"
    )
    worker = [f"worker {i}" for i in range(30)] + [denied]
    logging_fake.add_many(job_id, worker, start=t0 + 1, replica="workerpool1-0", severity="ERROR")

    result = run_cli("status", job["name"], "--wait")
    assert result.returncode == 1
    err = result.stderr
    assert len(_replica_lines(err)) == 36  # every line once, as it came
    block = err.split("workerpool1-0: its last lines:\n", 1)[1].splitlines()
    assert [line.strip() for line in block[:20]] == worker[-20:]
    assert f"error: job {job['name']} ended FAILED: {ERROR}" in err
    assert "hint: the job runs as the Vertex AI Custom Code Service Agent" in err
    assert err.index("its last lines") < err.index("error: job")


def test_wait_in_json_or_without_logs_reads_no_lines_but_the_failures_tail(
    vertex_fake, logging_fake, run_cli, spec_file
):
    ok = run_cli("submit", spec_file, "--wait", "--no-logs")
    assert ok.returncode == 0, ok.stderr
    assert logging_fake.requests == [] and _replica_lines(ok.stderr) == []

    job, job_id = _job(vertex_fake, ["JOB_STATE_RUNNING", "JOB_STATE_RUNNING", "JOB_STATE_FAILED"])
    logging_fake.add_many(job_id, [f"worker {i}" for i in range(30)], replica="workerpool1-0")
    logging_fake.add(job_id, "the chief was fine", at=time.time() - 0.5)
    result = run_cli("status", job["name"], "--wait", "-o", "json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["state"] == "JOB_STATE_FAILED"  # stdout: one object
    assert _replica_lines(result.stderr) == []
    block = result.stderr.split("workerpool1-0: its last lines:\n", 1)[1].splitlines()
    assert [line.strip() for line in block[:20]] == [f"worker {i}" for i in range(10, 30)]
    (tail,) = logging_fake.requests  # one read: the failing replica's tail
    assert tail["orderBy"] == "timestamp desc" and 'task_name="workerpool1-0"' in tail["filter"]


def test_a_flex_start_job_shows_how_long_it_has_queued(vertex_fake, logging_fake, run_cli):
    job, _ = _job(
        vertex_fake,
        ["JOB_STATE_PENDING", "JOB_STATE_PENDING", "JOB_STATE_PENDING", "JOB_STATE_SUCCEEDED"],
        strategy="FLEX_START",
        maxWaitDuration="14400s",
    )
    result = run_cli("status", job["name"], "--wait")
    assert result.returncode == 0, result.stderr
    assert re.search(r"PENDING  \(Flex Start: queued \d+s of max_wait 4h\)", result.stderr)


def test_logs_that_cannot_be_read_do_not_stop_the_wait(vertex_fake, logging_fake, run_cli):
    job, _ = _job(vertex_fake, ["JOB_STATE_RUNNING"] * 8 + ["JOB_STATE_SUCCEEDED"])
    logging_fake.fail(403, times=100, message="Permission 'logging.logEntries.list' denied")
    result = run_cli("status", job["name"], "--wait")
    assert result.returncode == 0, result.stderr
    assert "could not read the job's logs" in result.stderr
    assert "following the job's state only" in result.stderr
    assert logging_fake.answers == [403] * 3  # three strikes, then no more reads


def test_the_iterator_yields_a_failure_last(vertex_fake, logging_fake, settings):
    job_data, job_id = _job(vertex_fake, ["JOB_STATE_FAILED"])
    logging_fake.add(job_id, "Resources are insufficient in region: us-central1.", replica="service")
    job = Job(job_data, JobsClient(PROJECT, REGION, settings=settings))
    items = list(LogsClient(PROJECT, settings=settings).follow(job))
    assert [type(i) for i in items] == [JobEvent, LogEntry, Failure]
    failure = items[-1]
    assert failure.replica == "workerpool1-0" and failure.message.endswith(ERROR)
