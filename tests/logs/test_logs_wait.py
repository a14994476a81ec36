"""`job.wait()` in a notebook shows what `submit --wait` shows in a terminal (issue 40 item 6):
the state changes, the job's log lines prefixed by replica as they come from Cloud Logging, and,
for a job that failed, the failing replica's last lines before JobFailed (its advice as the
hint). Against the fake Vertex AI and the fake Cloud Logging, over the real client code."""

from __future__ import annotations

import copy
import dataclasses
import io
import re
import time

import pytest

from vertex_trainer import api
from vertex_trainer.errors import JobFailed
from vertex_trainer.vertex.custom_jobs import JobsClient

from .conftest import PROJECT, REGION, job_body

pytestmark = pytest.mark.wire
ERROR = "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."


def _job(vertex_fake, settings, states: list[str]) -> api.Job:
    """A job moving one state along `states` per GET, as the API's handle."""
    vertex_fake.set_script(states, error_message=ERROR)
    data = copy.deepcopy(vertex_fake.add_job(job_body()))  # (the fake's own dict moves with each GET)
    return api.Job(data, JobsClient(PROJECT, REGION, settings=settings))


def _lines(text: str) -> list[str]:
    return [re.sub(r"^\d\d:\d\d:\d\d  ", "", line) for line in text.splitlines()]


def test_wait_shows_the_states_and_the_log_lines_as_they_come(vertex_fake, logging_fake, settings):
    job = _job(vertex_fake, settings, ["JOB_STATE_RUNNING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    t0 = time.time() - 30
    logging_fake.add(job.id, "epoch 1/2 loss=0.7", at=t0)
    logging_fake.add(job.id, "worker up", replica="workerpool1-0", at=t0 + 1)
    logging_fake.add(job.id, "epoch 2/2 loss=0.4\nsaved", at=t0 + 2)
    shown = io.StringIO()
    assert job.wait(stream=shown) is job and job.succeeded
    assert _lines(shown.getvalue()) == [
        f"RUNNING  job {job.name}",
        "workerpool0-0 | epoch 1/2 loss=0.7",
        "workerpool1-0 | worker up",
        "workerpool0-0 | epoch 2/2 loss=0.4",
        "workerpool0-0 | saved",
        "SUCCEEDED",
    ]


def test_a_failed_job_ends_with_its_last_lines_and_jobfailed_with_the_advice(
    vertex_fake, logging_fake, settings
):
    job = _job(vertex_fake, settings, ["JOB_STATE_RUNNING", "JOB_STATE_FAILED"])
    logging_fake.add(job.id, "Traceback (most recent call last):", at=time.time() - 20, severity="ERROR")
    logging_fake.add(job.id, "ModuleNotFoundError: No module named 'trainer'", at=time.time() - 19)
    shown = io.StringIO()
    with pytest.raises(JobFailed) as failed:
        job.wait(stream=shown)
    assert failed.value.exit_code == 1 and ERROR in failed.value.message
    lines = _lines(shown.getvalue())
    assert lines[:3] == [
        f"RUNNING  job {job.name}",
        "workerpool0-0 | Traceback (most recent call last):",
        "workerpool0-0 | ModuleNotFoundError: No module named 'trainer'",
    ]
    assert lines[3:] == [
        "FAILED",
        "workerpool0-0: its last lines:",
        "  Traceback (most recent call last):",
        "  ModuleNotFoundError: No module named 'trainer'",
    ]
    unchecked = _job(vertex_fake, settings, ["JOB_STATE_FAILED"])
    assert unchecked.wait(stream=io.StringIO(), check=False).state == "JOB_STATE_FAILED"


def test_wait_without_logs_reads_no_log(vertex_fake, logging_fake, settings):
    job = _job(vertex_fake, settings, ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    logging_fake.add(job.id, "a line nobody reads", at=time.time() - 30)
    shown = io.StringIO()
    job.wait(stream=shown, logs=False)
    assert _lines(shown.getvalue()) == [f"RUNNING  job {job.name}", "SUCCEEDED"]
    assert logging_fake.reads == 0


def test_offline_wait_says_it_follows_the_state_only(vertex_fake, settings):
    offline = dataclasses.replace(settings, logging_endpoint=None)  # Vertex AI emulated, Logging not
    job = _job(vertex_fake, offline, ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    shown = io.StringIO()
    job.wait(stream=shown)
    lines = _lines(shown.getvalue())
    assert lines[0].startswith("note: Vertex AI is an emulator and Cloud Logging is not")
    assert lines[1:] == [f"RUNNING  job {job.name}", "SUCCEEDED"]


def test_submit_wait_from_the_api_shows_the_same(vertex_fake, logging_fake, settings, spec_file, capsys):
    vertex_fake.set_script(["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    spec = api.load_spec(spec_file, settings=settings)
    job = api.submit(spec, wait=True, idempotency_key="nb-1", settings=settings, log=lambda _: None)
    assert job.succeeded
    out, err = capsys.readouterr()
    assert out == "" and _lines(err)[-1] == "SUCCEEDED"
    assert f"PENDING  job {job.name}" in _lines(err)
