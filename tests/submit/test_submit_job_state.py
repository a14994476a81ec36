"""The Python API's handles (issue 40 item 6): `job.state` is current when read (a GET when the
answer held is older than `max_age`, none once the job has ended), summaries are one answer,
and `job.wait()` shows in a notebook what `--wait` shows in a terminal. Against the fake Vertex
AI, counting its GETs; each test sets `max_age` itself (0: every read asks; an hour: none does),
so nothing here depends on how fast the machine is."""

from __future__ import annotations

import copy
import io
import re

import pytest

from tests.shared import FAST_POLL, PROJECT, REGION, job_body
from vertex_trainer import api
from vertex_trainer.errors import JobFailed
from vertex_trainer.vertex.custom_jobs import JobsClient
from vertex_trainer.vertex.stateful import StatefulResource

pytestmark = pytest.mark.wire
HOUR = 3600.0


def _gets(fake) -> int:
    return len(fake.calls("get"))


def _held_job(fake, settings, state: str = "JOB_STATE_PENDING"):
    """A job in `state` on the fake, and its handle as `vt.status` returns it (one GET)."""
    name = fake.add_job(job_body(), state=state)["name"]
    return name, api.status(name, settings=settings)


def test_state_is_asked_again_once_the_answer_is_older_than_max_age(fake, settings):
    name, job = _held_job(fake, settings)
    fake.set_state(name, "JOB_STATE_RUNNING")  # it moved on after the handle was made
    before = _gets(fake)

    job.max_age = HOUR  # a fresh answer: reused, whatever reads it
    assert job.state == "JOB_STATE_PENDING" and not job.done
    assert job.to_dict()["state"] == job.describe()["state"] == "JOB_STATE_PENDING"
    assert "PENDING" in repr(job) and _gets(fake) == before

    job.max_age = 0  # an old answer: the read asks Vertex AI
    assert job.state == "JOB_STATE_RUNNING" and _gets(fake) == before + 1
    assert job.held_state == "JOB_STATE_RUNNING" and _gets(fake) == before + 1  # held: no GET


def test_an_ended_job_is_never_asked_again(fake, settings):
    name, job = _held_job(fake, settings, "JOB_STATE_RUNNING")
    fake.set_state(name, "JOB_STATE_FAILED", error_message="The replica workerpool0-0 exited with 1")
    job.max_age = 0
    assert job.state == "JOB_STATE_FAILED"  # the one read that finds the end
    asked = _gets(fake)
    for _ in range(3):
        assert job.done and not job.succeeded and job.state == "JOB_STATE_FAILED"
        assert job.error == "The replica workerpool0-0 exited with 1"
        assert job.describe()["error"] == job.error and job.to_dict()["state"] == "JOB_STATE_FAILED"
        assert "ended FAILED: The replica" in job.failure_message()
    assert _gets(fake) == asked


def test_a_summary_is_one_answer(fake, settings):
    name, job = _held_job(fake, settings, "JOB_STATE_RUNNING")
    fake.set_state(name, "JOB_STATE_SUCCEEDED")
    job.max_age = 0
    before = _gets(fake)
    shown = job.describe()
    assert _gets(fake) == before + 1  # one GET, however many fields read it
    assert shown["state"] == "JOB_STATE_SUCCEEDED" and shown["end_time"]  # from the same answer


def test_max_age_none_is_a_snapshot_until_refresh(fake, settings):
    name, job = _held_job(fake, settings)
    fake.set_state(name, "JOB_STATE_RUNNING")
    job.max_age = None
    before = _gets(fake)
    assert job.state == "JOB_STATE_PENDING" and _gets(fake) == before
    assert job.refresh().state == "JOB_STATE_RUNNING" and _gets(fake) == before + 1


def test_the_default_reuses_an_answer_for_about_a_second():
    assert api.Job.max_age == StatefulResource.max_age == 1.0


def _stepping_job(fake, settings, states: list[str]):
    """A job that moves one state along `states` per GET (the fake's script), fast polls."""
    fake.set_script(states, error_message="The replica workerpool0-0 exited with a non-zero status of 1.")
    data = copy.deepcopy(fake.add_job(job_body()))  # (the fake's own dict moves with each GET)
    return api.Job(data, JobsClient(PROJECT, REGION, settings=settings))


def _lines(text: str) -> list[str]:
    """The lines without their HH:MM:SS stamp."""
    return [re.sub(r"^\d\d:\d\d:\d\d  ", "", line) for line in text.splitlines()]


def test_wait_shows_each_state_change_by_default(fake, settings):
    job = _stepping_job(fake, settings, ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    shown = io.StringIO()
    job.wait(stream=shown, poll=FAST_POLL, logs=False)
    assert _lines(shown.getvalue()) == [f"PENDING  job {job.name}", "RUNNING", "SUCCEEDED"]
    assert all(re.match(r"\d\d:\d\d:\d\d  [A-Z]", line) for line in shown.getvalue().splitlines())


def test_wait_quiet_or_with_on_state_shows_nothing(fake, settings):
    quiet = _stepping_job(fake, settings, ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    shown = io.StringIO()
    quiet.wait(stream=shown, poll=FAST_POLL, quiet=True)
    assert quiet.succeeded and shown.getvalue() == ""
    told = _stepping_job(fake, settings, ["JOB_STATE_RUNNING", "JOB_STATE_FAILED"])
    states: list[str] = []
    with pytest.raises(JobFailed, match="ended FAILED"):
        told.wait(stream=shown, poll=FAST_POLL, on_state=lambda j: states.append(j.state))
    assert states == ["JOB_STATE_RUNNING", "JOB_STATE_FAILED"] and shown.getvalue() == ""


def test_wait_goes_to_stderr_when_no_stream_is_given(fake, settings, capsys):
    job = _stepping_job(fake, settings, ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    job.wait(poll=FAST_POLL, logs=False)
    out, err = capsys.readouterr()
    assert out == "" and _lines(err) == [f"RUNNING  job {job.name}", "SUCCEEDED"]
