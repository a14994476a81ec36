"""Register and deploy against the fake Vertex AI (models, endpoints, operations) over the wire."""

from __future__ import annotations

import json

import pytest

from tests.shared import PROJECT, REGION, fake_settings
from vertex_trainer.errors import ServiceError
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.model_deploy import DeployRequest, ServingContainer, deploy, split_traffic
from vertex_trainer.vertex.models import RegistryClient

pytestmark = pytest.mark.wire

FAST = dict(poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)


@pytest.fixture
def client(fake):
    return RegistryClient(PROJECT, REGION, settings=fake_settings(fake))


def request(job_id: str = "111", traffic: int = 100, **over) -> DeployRequest:
    values = dict(
        model_display_name="digits",
        artifact_uri=f"gs://b/runs/{job_id}/model",
        container=ServingContainer(
            "us-docker.pkg.dev/p/r/trainer:abc", command=("python", "-m", "trainer.serve")
        ),
        job_id=job_id,
        endpoint="digits-endpoint",
        machine_type="n1-standard-4",
        min_replicas=1,
        max_replicas=2,
        traffic=traffic,
        labels={"team": "vision"},
    )
    values.update(over)
    return DeployRequest(**values)


def ops(fake, name):
    return [r for r in fake.requests if r.op == name]


def test_first_deploy_uploads_creates_and_deploys_once(fake, client):
    d = deploy(client, request(), **FAST)
    assert d.model_version == "1" and not d.adopted
    assert d.endpoint == f"projects/{PROJECT}/locations/{REGION}/endpoints/digits-endpoint"
    assert d.traffic_split == {d.deployed_model_id: 100}
    (upload,) = ops(fake, "upload")
    assert upload.body["model"]["artifactUri"] == "gs://b/runs/111/model"
    assert upload.body["model"]["labels"] == {"team": "vision", "vertex-trainer-job": "111"}
    assert upload.body["model"]["containerSpec"]["command"] == ["python", "-m", "trainer.serve"]
    assert "parentModel" not in upload.body
    (dep,) = ops(fake, "deploy")
    assert dep.body["trafficSplit"] == {"0": 100}
    assert dep.body["deployedModel"]["model"] == f"{d.model}@1"
    assert dep.body["deployedModel"]["dedicatedResources"]["maxReplicaCount"] == 2
    assert len(ops(fake, "operation")) >= 3  # upload, endpoint create and deploy were polled


def test_the_same_job_again_uploads_and_deploys_nothing(fake, client):
    first = deploy(client, request(), **FAST)
    again = deploy(client, request(), **FAST)
    assert again.adopted and again.to_dict() == {**first.to_dict(), "adopted": True}
    assert len(ops(fake, "upload")) == 1 and len(ops(fake, "deploy")) == 1
    assert len(ops(fake, "endpoint-create")) == 1


def test_a_second_job_adds_version_2_and_splits_traffic(fake, client):
    first = deploy(client, request("111"), **FAST)
    second = deploy(client, request("222", traffic=30), **FAST)
    assert second.model == first.model and second.model_version == "2"
    assert ops(fake, "upload")[1].body["parentModel"] == first.model
    assert second.traffic_split == {first.deployed_model_id: 70, second.deployed_model_id: 30}
    assert sum(second.traffic_split.values()) == 100
    versions = fake.models.versions(first.model)
    assert [v["labels"]["vertex-trainer-job"] for v in versions] == ["111", "222"]


def test_an_upload_committed_but_answered_503_is_adopted(fake, client):
    fake.fail("upload", 503, commit=True)
    d = deploy(client, request(), **FAST)
    assert len(ops(fake, "upload")) == 1  # never repeated
    assert len(fake.models.versions(d.model)) == 1


def test_a_deploy_committed_then_dropped_is_not_repeated(fake, client):
    fake.fail("deploy", 0, commit=True)
    deploy(client, request(), **FAST)
    assert len(ops(fake, "deploy")) == 1


def test_an_endpoint_created_before_is_reused_by_name(fake, client):
    deploy(client, request("111", endpoint="shared"), **FAST)
    deploy(client, request("222", endpoint="shared", model_display_name="other"), **FAST)
    assert len(ops(fake, "endpoint-create")) == 1


def test_a_failed_operation_is_a_service_error_with_its_message(fake, client):
    fake.models.fail_operation("deploy", "Machine type n1-standard-4 is not available in us-central1.")
    with pytest.raises(ServiceError) as err:
        deploy(client, request(), **FAST)
    assert err.value.exit_code == 3 and "not available in us-central1" in str(err.value)


def test_an_operation_that_outlives_the_timeout_names_it(fake, client):
    with pytest.raises(ServiceError) as err:
        deploy(client, request(), poll=PollPolicy(initial=0.05, maximum=0.05), timeout=0.0)
    assert "did not finish within" in str(err.value) and "/operations/" in str(err.value)


@pytest.mark.parametrize(
    "current,share,expected",
    [
        ({}, 30, {"0": 100}),
        ({"a": 100}, 100, {"0": 100}),
        ({"a": 100}, 30, {"0": 30, "a": 70}),
        ({"a": 50, "b": 50}, 25, {"0": 25, "a": 38, "b": 37}),
        ({"a": 60, "b": 30, "c": 10}, 10, {"0": 10, "a": 54, "b": 27, "c": 9}),
        ({"a": 1, "b": 1, "c": 1}, 0, {"a": 34, "b": 33, "c": 33}),
    ],
)
def test_split_traffic_keeps_the_old_ratios_and_sums_to_100(current, share, expected):
    split = split_traffic(current, share)
    assert split == expected and sum(split.values()) == 100


def test_the_generated_model_service_client_speaks_to_the_fake(fake):
    """The fake answers aiplatform_v1's own REST transport: upload, operation, get."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    opts = ClientOptions(api_endpoint=fake.url)
    models = aiplatform_v1.ModelServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options=opts
    )
    parent = f"projects/{PROJECT}/locations/{REGION}"
    model = aiplatform_v1.Model.from_json(json.dumps(request().model_body()))
    operation = models.upload_model(parent=parent, model=model)
    result = operation.result(timeout=30)
    assert result.model_version_id == "1"
    got = models.get_model(name=result.model)
    assert got.artifact_uri == "gs://b/runs/111/model" and got.labels["vertex-trainer-job"] == "111"
