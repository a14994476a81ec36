"""`pipeline submit`: one PipelineJob per idempotency key (the pipelineJobId is derived from it),
against the fake Vertex AI, which parses each body with the real aiplatform_v1.PipelineJob."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli_support import invoke
from vertex_trainer import api
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.vertex.pipelines import pipeline_job_id

pytestmark = pytest.mark.wire
ROOT = Path(__file__).resolve().parents[2]


def test_submit_twice_with_one_key_leaves_one_pipeline_job(fake, spec_file, tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "CLOUDSDK_"))},
        "VERTEX_TRAINER_API_ENDPOINT": fake.url,
        "CLOUDSDK_CONFIG": str(tmp_path),
        "VERTEX_TRAINER_RETRY": "attempts=3,initial=0.01,maximum=0.05,deadline=10",
    }
    outputs = []
    for _ in range(2):
        done = invoke(  # in this process (tests/cli_support.py)
            [
                "pipeline",
                "submit",
                str(spec_file),
                "--idempotency-key",
                "ci-run-7",
                "--output",
                "json",
            ],
            env=env,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))  # exactly one JSON object on stdout
    first, second = outputs
    assert set(first) == {"name", "state", "console_url", "idempotency_key", "adopted"}
    assert list(fake.pipelines.runs) == [first["name"]] == [second["name"]]
    assert first["name"].endswith("/pipelineJobs/ci-run-7")
    assert (first["adopted"], second["adopted"]) == (False, True)
    assert first["console_url"] == (
        "https://console.cloud.google.com/vertex-ai/locations/europe-west4/"
        "pipelines/runs/ci-run-7?project=test-project"
    )
    assert len(fake.calls("pipeline-create")) == 1  # the second submit compiled and sent nothing

    run = fake.pipelines.runs[first["name"]]
    assert run["labels"]["vertex-trainer-key"] == "ci-run-7" and run["labels"]["team"] == "vision"
    assert run["serviceAccount"] == "trainer@test-project.iam.gserviceaccount.com"
    assert run["runtimeConfig"]["gcsOutputDirectory"] == "gs://out-bucket/pipeline-root"


def test_a_create_committed_but_answered_503_is_sent_again_and_adopted(fake, spec, settings):
    fake.fail("pipeline-create", 503, commit=True)
    run = api.pipeline_submit(spec, idempotency_key="lost-answer", settings=settings, log=lambda _: None)
    assert run.adopted and len(fake.pipelines.runs) == 1
    assert len(fake.calls("pipeline-create")) == 2  # the id made the second create a 409


def test_wait_follows_the_run_to_its_end(fake, spec, settings):
    run = api.pipeline_submit(spec, wait=True, settings=settings, log=lambda _: None)
    assert run.state == "PIPELINE_STATE_SUCCEEDED" and run.succeeded
    fake.pipelines.set_script(["PIPELINE_STATE_PENDING", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"])
    with pytest.raises(JobFailed, match="ended FAILED: The DAG failed"):
        api.pipeline_submit(spec, wait=True, settings=settings, log=lambda _: None)


def test_dry_run_sends_nothing_and_shows_the_pipeline_job(fake, spec, settings):
    plan = api.pipeline_submit(spec, idempotency_key="dry-1", dry_run=True, settings=settings)
    assert fake.requests == []
    lookup, create = plan.requests
    assert lookup["url"].endswith("/v1/projects/test-project/locations/europe-west4/pipelineJobs/dry-1")
    assert create["params"] == {"pipelineJobId": "dry-1"}

    from google.cloud import aiplatform_v1

    parsed = aiplatform_v1.PipelineJob.from_json(json.dumps(create["body"]))  # strict
    assert parsed.runtime_config.gcs_output_directory == "gs://out-bucket/pipeline-root"
    assert "custom-training-job" in create["body"]["pipelineSpec"]["root"]["dag"]["tasks"]


def test_a_run_with_the_id_but_another_key_is_not_adopted(fake, spec, settings):
    fake.pipelines.runs["projects/test-project/locations/europe-west4/pipelineJobs/nightly"] = {
        "name": "projects/test-project/locations/europe-west4/pipelineJobs/nightly",
        "labels": {"owner": "someone-else"},
        "state": "PIPELINE_STATE_RUNNING",
    }
    fake.pipelines._pos["projects/test-project/locations/europe-west4/pipelineJobs/nightly"] = (
        ["PIPELINE_STATE_RUNNING"],
        0,
    )
    with pytest.raises(UserError, match="was not started with idempotency key 'nightly'"):
        api.pipeline_submit(spec, idempotency_key="nightly", settings=settings, log=lambda _: None)


def test_a_spec_without_a_cloud_output_dir_has_no_pipeline_root(spec):
    with pytest.raises(UserError, match="needs a Cloud Storage root"):
        api.pipeline_submit(spec.model_copy(update={"output_dir": None, "deploy": None}), dry_run=True)


@pytest.mark.parametrize(
    "key, expected",
    [
        ("ci-run-7", "ci-run-7"),
        ("ev-0123abcd", "ev-0123abcd"),
    ],
)
def test_a_key_that_is_a_valid_id_is_the_id(key, expected):
    assert pipeline_job_id(key) == expected


def test_other_keys_get_a_readable_id_with_a_hash_of_the_exact_key():
    ids = {pipeline_job_id(k) for k in ("run_7", "run-7-", "7", "Run_7")}
    assert len(ids) == 4
    for value in ids:
        assert value[0].isalpha() and value[-1].isalnum() and len(value) <= 128
        assert all(c.islower() or c.isdigit() or c == "-" for c in value)


def test_submit_looks_up_what_is_deployed_and_the_run_undeploys_it_the_dry_run_says_none_known(
    fake, spec, settings
):
    from vertex_trainer.deployment import deploy_request as deployment
    from vertex_trainer.vertex.model_deploy import deploy
    from vertex_trainer.vertex.models import RegistryClient

    client = RegistryClient("test-project", "europe-west4", settings=settings)
    image = "us-central1-docker.pkg.dev/test-project/training/trainer:v1"
    old = deploy(
        client, deployment.request(spec, "gs://out-bucket/old/model", "old", image), poll=settings.poll
    )
    full = spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"traffic": 100})})

    dry = api.pipeline_submit(full, idempotency_key="hygiene-1", dry_run=True, settings=settings)
    shown = dry.requests[1]["body"]["pipelineSpec"]
    assert "left at 0% are undeployed: none known at compile time" in shown["pipelineInfo"]["description"]

    api.pipeline_submit(full, idempotency_key="hygiene-1", settings=settings, log=lambda _: None)
    (create,) = fake.calls("pipeline-create")
    tasks = create.body["pipelineSpec"]["root"]["dag"]["tasks"]
    names = sorted(t["taskInfo"]["name"] for t in tasks.values())
    assert f"undeploy-{old.deployed_model_id}" in names and f"previous-model-{old.deployed_model_id}" in names
    assert f"{old.model}@{old.model_version}" in create.body["pipelineSpec"]["pipelineInfo"]["description"]
