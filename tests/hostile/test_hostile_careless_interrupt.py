"""A careless user presses Ctrl-C while `submit` creates the job (issue 42, A1).

The create may have reached Vertex AI (the answer in flight, or a retry after a lost answer): the
job then exists and bills, yet nothing named it, and the key, random unless given, was nowhere on
the screen: the CLI said only "interrupted", and submitting again made a second job. Now the
interruption says that a job may exist, the key that finds it, and that submitting again with it
adopts the job instead of creating another (checked here: the second submit adopts it).
"""

from __future__ import annotations

import pytest

from tests.shared import FAST_RETRY, PROJECT, REGION, job_body
from vertex_trainer.settings import Settings
from vertex_trainer.vertex import pipelines
from vertex_trainer.vertex.custom_jobs import JobsClient, create_idempotent
from vertex_trainer.vertex.pipelines import PipelinesClient


class _CtrlCAfterSend(JobsClient):
    """The service commits the create; Ctrl-C arrives before its answer is read."""

    def create_once(self, job):
        super().create_once(job)
        raise KeyboardInterrupt


def test_ctrl_c_during_the_create_names_the_key_that_adopts_the_job(fake):
    said: list[str] = []
    settings = Settings(vertex_endpoint=fake.url, retry=FAST_RETRY)
    interrupted = _CtrlCAfterSend(PROJECT, REGION, settings=settings, log=said.append)
    body = job_body("vt-20261204-050000-abc123", "hash-a", args=["--epochs=1"])
    with pytest.raises(KeyboardInterrupt):
        create_idempotent(interrupted, body, "vt-20261204-050000-abc123")
    assert len(fake.jobs) == 1  # it was created, and nothing printed its name
    (line,) = [s for s in said if s.startswith("interrupted")]
    assert "it may have been created" in line
    assert "--idempotency-key vt-20261204-050000-abc123 to adopt it" in line
    assert "vertex-trainer list --label vertex-trainer-key=vt-20261204-050000-abc123" in line
    # what the line says to do: the job is adopted, never made twice
    again = JobsClient(PROJECT, REGION, settings=settings, log=said.append)
    data, adopted = create_idempotent(again, body, "vt-20261204-050000-abc123")
    assert adopted and data["name"] in fake.jobs and len(fake.jobs) == 1


class _PipelineCtrlCAfterSend(PipelinesClient):
    """The service commits the PipelineJob; Ctrl-C arrives before its answer is read."""

    def create_once(self, body, job_id):
        super().create_once(body, job_id)
        raise KeyboardInterrupt


def test_ctrl_c_during_a_pipeline_create_names_the_run_and_the_key(fake):
    said: list[str] = []
    settings = Settings(vertex_endpoint=fake.url, retry=FAST_RETRY)
    key = "vt-20261204-050000-def456"
    body = {
        "displayName": "digits",
        "labels": {"vertex-trainer-key": key},
        "pipelineSpec": {"pipelineInfo": {"name": "digits"}, "root": {"dag": {"tasks": {}}}},
        "runtimeConfig": {"gcsOutputDirectory": "gs://out-bucket/pipeline-root"},
    }
    interrupted = _PipelineCtrlCAfterSend(PROJECT, REGION, settings=settings, log=said.append)
    with pytest.raises(KeyboardInterrupt):
        pipelines.create_idempotent(interrupted, body, pipelines.pipeline_job_id(key), key)
    (name,) = fake.pipelines.runs  # created
    (line,) = [s for s in said if s.startswith("interrupted")]
    assert f"it may have been created ({name})" in line
    assert f"--idempotency-key {key} to adopt it" in line and f"vertex-trainer pipeline status {name}" in line
    again = PipelinesClient(PROJECT, REGION, settings=settings, log=said.append)
    data, adopted = pipelines.create_idempotent(again, body, pipelines.pipeline_job_id(key), key)
    assert adopted and data["name"] == name and len(fake.pipelines.runs) == 1


def test_a_tuning_jobs_line_names_no_list_command_that_would_not_show_it(fake):
    """`list` lists CustomJobs: for a HyperparameterTuningJob the key alone is the way back."""
    from vertex_trainer.vertex.hptuning import TuningClient

    class _Interrupted(TuningClient):
        def create_once(self, job):
            raise KeyboardInterrupt

    said: list[str] = []
    client = _Interrupted(PROJECT, REGION, settings=Settings(vertex_endpoint=fake.url, retry=FAST_RETRY))
    client.log = said.append
    with pytest.raises(KeyboardInterrupt):
        create_idempotent(client, job_body("vt-k", "hash-a", args=["--epochs=1"]), "vt-k")
    (line,) = [s for s in said if s.startswith("interrupted")]
    assert "--idempotency-key vt-k to adopt it" in line and "vertex-trainer list" not in line
