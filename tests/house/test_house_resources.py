"""The house (issue 25 items 1 and 2, issue 24 item 10): one resource base for everything that
ends, one pager for every list call, and the google-cloud-aiplatform SDK on the same resources."""

from __future__ import annotations

import pytest

from tests.shared import PROJECT, QUICK_RETRY, REGION, fake_settings, job_body
from vertex_trainer.contract import KEY_LABEL, PIPELINE_STATES, short_state
from vertex_trainer.errors import JobFailed
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import Job, JobsClient, create_idempotent
from vertex_trainer.vertex.hptuning import TuningJob
from vertex_trainer.vertex.model_deploy import Deployment
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.vertex.pipelines import PipelineRun, PipelinesClient
from vertex_trainer.vertex.stateful import StatefulResource

pytestmark = pytest.mark.wire
BODY = job_body("house-1", name="house")
PIPELINE = {
    "displayName": "house",
    "labels": {KEY_LABEL: "house-run"},
    "pipelineSpec": {"root": {"dag": {"tasks": {}}}, "defaultPipelineRoot": "gs://b/root"},
}


@pytest.fixture
def settings(fake) -> Settings:  # `fake`: the shared fake Vertex AI (tests/conftest.py)
    return fake_settings(fake, retry=QUICK_RETRY)


def test_every_resource_that_ends_is_one_stateful_resource():
    for kind in (Job, TuningJob, PipelineRun):
        assert issubclass(kind, StatefulResource)
        # refresh, cancel, wait and the fields are written once, in the base (a tuning job's
        # wait adds on_trial and calls the base's; its describe adds the trials).
        for method in ("refresh", "cancel", "failure_message", "to_sdk", "state", "done", "console_url"):
            assert method not in vars(kind), f"{kind.__name__}.{method} repeats the base"
    assert "wait" not in vars(Job) and "wait" not in vars(PipelineRun)


def test_a_pipeline_run_follows_the_pipeline_state_family(fake, settings):
    fake.pipelines.set_script(["PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"])
    client = PipelinesClient(PROJECT, REGION, settings=settings)
    run = PipelineRun(client.create_once(PIPELINE, "house-run"), client)
    assert run.state == "PIPELINE_STATE_RUNNING" and not run.done
    seen: list[str] = []
    with pytest.raises(JobFailed, match=r"^pipeline run projects/.*/house-run ended FAILED"):
        run.wait(on_state=lambda r: seen.append(short_state(r.state)))
    assert seen == ["RUNNING", "FAILED"] and run.done and not run.succeeded
    assert run.state in PIPELINE_STATES.terminal
    assert run.console_url.endswith(f"/locations/{REGION}/pipelines/runs/house-run?project={PROJECT}")
    assert run.describe()["idempotency_key"] == "house-run" and run.to_dict()["adopted"] is False
    again = PipelineRun.get("house-run", project=PROJECT, region=REGION, settings=settings)
    assert again.name == run.name and again.state == "PIPELINE_STATE_FAILED"


def test_one_pager_reads_every_page_with_the_token_it_was_given(fake, settings):
    for n in range(5):
        fake.add_job({**BODY, "displayName": f"house-{n}"})
    client = JobsClient(PROJECT, REGION, settings=settings)
    found = client.list(f'labels.{KEY_LABEL}="house-1"', page_size=2)
    assert sorted(j["displayName"] for j in found) == [f"house-{n}" for n in range(5)]
    tokens = [call.query.get("pageToken") for call in fake.calls("list")]
    assert tokens == [None, "2", "4"]  # three pages, each token once
    assert {call.query["pageSize"] for call in fake.calls("list")} == {"2"}


def test_the_pager_stops_at_its_bound_and_says_so(fake, settings):
    for n in range(5):
        fake.add_job({**BODY, "displayName": f"house-{n}"})
    client = JobsClient(PROJECT, REGION, settings=settings)
    messages: list[str] = []
    client.log = messages.append
    pages = list(
        client.api.pages(
            "list", "GET", f"v1/{client.parent}/customJobs", items="customJobs", page_size=2, max_pages=2
        )
    )
    assert [len(p) for p in pages] == [2, 2] and len(fake.calls("list")) == 2
    assert messages == ["list: stopped after 2 pages; the list goes on (narrow the filter)"]


def test_to_sdk_and_back_name_the_same_custom_job(fake, settings):
    from google.cloud import aiplatform  # 5 s to import: not while collecting

    client = JobsClient(PROJECT, REGION, settings=settings)
    data, _ = create_idempotent(client, BODY, "house-1")
    job = Job(data, client)
    sdk = job.to_sdk()
    assert isinstance(sdk, aiplatform.CustomJob) and sdk.resource_name == job.name
    back = Job.get(sdk, settings=settings)  # an SDK object is a name too
    assert back.name == job.name and back.display_name == "house"  # (each GET moves the fake's script on)
    from vertex_trainer import api

    assert api.Job.get(sdk, settings=settings).name == job.name  # vt.Job, the API's entry


def test_to_sdk_gives_the_tuning_job(fake, settings):
    from google.cloud import aiplatform  # 5 s to import: not while collecting

    study = {
        "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
        "parameters": [
            {"parameterId": "learning-rate", "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1}}
        ],
    }
    data = fake.tuning.add_job(
        {
            "displayName": "house",
            "maxTrialCount": 1,
            "parallelTrialCount": 1,
            "studySpec": study,
            "trialJobSpec": BODY["jobSpec"],
        }
    )
    job = TuningJob.get(data["name"], settings=settings)
    sdk = job.to_sdk()
    assert isinstance(sdk, aiplatform.HyperparameterTuningJob) and sdk.resource_name == job.name


def test_to_sdk_gives_the_pipeline_job_and_the_endpoint(fake, settings):
    from google.cloud import aiplatform  # 5 s to import: not while collecting

    pipelines = PipelinesClient(PROJECT, REGION, settings=settings)
    run = PipelineRun(pipelines.create_once(PIPELINE, "house-run"), pipelines)
    sdk_run = run.to_sdk()
    assert isinstance(sdk_run, aiplatform.PipelineJob) and sdk_run.resource_name == run.name
    registry = RegistryClient(PROJECT, REGION, settings=settings)
    registry.create_endpoint({"displayName": "house"}, "house")
    endpoint = f"projects/{PROJECT}/locations/{REGION}/endpoints/house"
    deployment = Deployment(
        model="",
        model_version="",
        endpoint=endpoint,
        deployed_model_id="",
        traffic_split={},
        adopted=False,
        client=registry,
    )
    sdk_endpoint = deployment.to_sdk()
    assert isinstance(sdk_endpoint, aiplatform.Endpoint) and sdk_endpoint.resource_name == endpoint
