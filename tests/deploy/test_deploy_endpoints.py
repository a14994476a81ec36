"""Endpoint hygiene (issue 40 item 3): a new version that takes all the traffic undeploys the
versions left at 0% once it serves (unless kept), `endpoints` lists what is deployed with the
price of its nodes, and `undeploy` takes one off, moving its traffic as Vertex AI requires. All
against the fake Vertex AI's undeployModel (its trafficSplit rules), through the API and the CLI."""

from __future__ import annotations

import json

import pytest

from tests.cli_support import invoke
from tests.shared import PROJECT, QUICK_RETRY, REGION, fake_settings, storage_emulator
from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.model_deploy import deploy
from vertex_trainer.vertex.models import RegistryClient

from .test_deploy_api import ROOT, cli_setup, finished_job, put, sent, spec
from .test_deploy_vertex import request

pytestmark = pytest.mark.wire

FAST = dict(poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)
QUIET = dict(log=lambda _: None)
ENDPOINT = f"projects/{PROJECT}/locations/{REGION}/endpoints/digits"


@pytest.fixture
def storage():
    with storage_emulator("out-bucket") as url:
        yield url


@pytest.fixture
def settings(fake, storage):
    return fake_settings(fake, retry=QUICK_RETRY, storage_emulator=storage)


@pytest.fixture
def client(fake):
    return RegistryClient(PROJECT, REGION, settings=fake_settings(fake))


def two_jobs(fake, storage) -> tuple[str, str]:
    """Two SUCCEEDED jobs, each with its own exported model."""
    jobs = []
    for run in ("run-1", "run-2"):
        put(storage, f"runs/digits/{run}/model/saved_model.pb")
        jobs.append(finished_job(fake, base=f"gs://out-bucket/runs/digits/{run}"))
    return jobs[0], jobs[1]


def deployed(fake) -> dict[str, int]:
    """The endpoint's deployed model ids -> their traffic, as the fake holds them."""
    endpoint = fake.models.state.endpoints[ENDPOINT]
    split = endpoint.get("trafficSplit") or {}
    return {d["id"]: int(split.get(d["id"], 0)) for d in endpoint.get("deployedModels", [])}


def test_deploying_job_2_to_job_1s_endpoint_leaves_one_model_at_100(fake, storage, settings):
    """Issue 40's "done when": one deployed model at 100% and none at 0%; `endpoints` shows it."""
    job1, job2 = two_jobs(fake, storage)
    first = api.deploy(spec(), job=job1, settings=settings, **QUIET)
    second = api.deploy(spec(), job=job2, settings=settings, **QUIET)
    assert second.model_version == "2" and second.endpoint == ENDPOINT
    assert deployed(fake) == {second.deployed_model_id: 100}
    (undeploy_call,) = sent(fake, "undeploy")
    assert undeploy_call.body == {"deployedModelId": first.deployed_model_id}  # at 0%: no split
    assert [u.summary() for u in second.undeployed] == [
        {"deployed_model_id": first.deployed_model_id, "model": first.model, "model_version": "1"}
    ]
    assert second.to_dict()["undeployed"] == [u.summary() for u in second.undeployed]

    # Idempotent: the same job again deploys nothing twice and undeploys nothing twice.
    again = api.deploy(spec(), job=job2, settings=settings, **QUIET)
    assert again.adopted and again.to_dict()["undeployed"] == []
    assert len(sent(fake, "deploy")) == 2 and len(sent(fake, "undeploy")) == 1

    (shown,) = api.list_endpoints(PROJECT, REGION, settings=settings)
    (only,) = shown.deployed
    assert (only.id, only.model_display_name, only.model_version, only.traffic) == (
        second.deployed_model_id,
        "digits",
        "2",
        100,
    )
    assert (only.machine_type, only.min_replicas, only.max_replicas) == ("n1-standard-2", 1, 1)
    # The snapshot holds custom-training prices only: the price is unknown, and says why.
    assert only.hourly.hourly is None
    assert "prediction prices are not in the price snapshot" in (only.node.reason or "")


def test_keep_previous_keeps_the_old_version_at_0_and_endpoints_says_it_bills(
    fake, storage, settings, tmp_path
):
    job1, job2 = two_jobs(fake, storage)
    first = api.deploy(spec(), job=job1, settings=settings, **QUIET)
    second = api.deploy(spec(), job=job2, settings=settings, keep_previous=True, **QUIET)
    assert deployed(fake) == {first.deployed_model_id: 0, second.deployed_model_id: 100}
    assert sent(fake, "undeploy") == [] and second.undeployed == ()

    path, env = cli_setup(fake, storage, tmp_path)
    out = invoke(["endpoints", str(path)], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"endpoint digits  {ENDPOINT}" in out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.strip().startswith("20")]
    assert [r[:5] for r in rows] == [
        [second.deployed_model_id, "digits@2", "100%", "n1-standard-2", "1"],
        [first.deployed_model_id, "digits@1", "0%", "n1-standard-2", "1"],
    ]
    assert "hourly   unknown: Vertex AI prediction prices are not in the price snapshot" in out.stdout
    assert "1 deployed model(s) take no traffic and their nodes still bill" in out.stdout

    data = json.loads(invoke(["endpoints", str(path), "-o", "json"], env=env, cwd=ROOT).stdout)
    (endpoint,) = data["endpoints"]
    assert endpoint["endpoint"] == ENDPOINT and endpoint["hourly"] is None
    assert [(d["deployed_model_id"], d["traffic"]) for d in endpoint["deployed_models"]] == [
        (second.deployed_model_id, 100),
        (first.deployed_model_id, 0),
    ]

    # undeploy takes the idle one off; a second undeploy finds it gone and says so (exit 0).
    args = ["undeploy", "digits", first.deployed_model_id, "--project", PROJECT, "--region", REGION]
    out = invoke([*args, "-o", "json"], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["undeployed"] is True and result["model_version"] == "1" and result["moved"] is None
    assert result["traffic_split"] == {second.deployed_model_id: 100} and result["remaining"] == 1
    out = invoke(args, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "(already undeployed): nothing to undeploy" in out.stdout
    assert len(sent(fake, "undeploy")) == 1 and deployed(fake) == {second.deployed_model_id: 100}


def test_a_traffic_split_in_deploy_keeps_the_old_versions_serving(fake, client):
    first = deploy(client, request("111"), **FAST)
    second = deploy(client, request("222", traffic=30), **FAST)
    assert second.traffic_split == {first.deployed_model_id: 70, second.deployed_model_id: 30}
    assert second.undeployed == () and [r for r in fake.requests if r.op == "undeploy"] == []


def test_undeploying_a_model_with_traffic_gives_its_share_to_the_others_in_their_ratio(fake, client):
    v1 = deploy(client, request("1"), **FAST)
    v2 = deploy(client, request("2", traffic=50), **FAST)
    v3 = deploy(client, request("3", traffic=20), **FAST)
    assert v3.traffic_split == {v1.deployed_model_id: 40, v2.deployed_model_id: 40, v3.deployed_model_id: 20}
    from vertex_trainer.vertex.deployed import undeploy

    done = undeploy(client, v1.endpoint, v1.deployed_model_id, **FAST)
    moved = {v2.deployed_model_id: 67, v3.deployed_model_id: 33}
    assert done.moved == moved and done.traffic_split == moved and done.remaining == 2
    (call,) = [r for r in fake.requests if r.op == "undeploy"]
    assert call.body == {"deployedModelId": v1.deployed_model_id, "trafficSplit": moved}


def test_a_model_whose_traffic_has_nowhere_to_go_is_refused_before_anything_is_sent(fake, settings, client):
    v1 = deploy(client, request("1"), **FAST)
    v2 = deploy(client, request("2", traffic=0), **FAST)  # deployed, takes nothing
    assert v2.traffic_split == {v1.deployed_model_id: 100}
    with pytest.raises(UserError) as err:
        api.undeploy(v1.endpoint, v1.deployed_model_id, settings=settings, **QUIET)
    assert err.value.exit_code == 2 and "its traffic has nowhere to go" in str(err.value)
    assert f"--traffic-split={v2.deployed_model_id}=100" in (err.value.hint or "")
    assert [r for r in fake.requests if r.op == "undeploy"] == []


def test_undeploying_the_last_model_leaves_an_empty_endpoint_that_costs_nothing(fake, storage, tmp_path):
    client = RegistryClient(PROJECT, REGION, settings=fake_settings(fake))
    only = deploy(client, request("1", endpoint="digits"), **FAST)
    _path, env = cli_setup(fake, storage, tmp_path)
    out = invoke(["undeploy", only.endpoint, only.deployed_model_id], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "the endpoint stays, and costs nothing without them" in out.stdout
    assert ENDPOINT in fake.models.state.endpoints and deployed(fake) == {}
    out = invoke(["endpoints", "--project", PROJECT, "--region", REGION], env=env, cwd=ROOT)
    assert "no deployed models (an endpoint without models has no nodes and costs nothing)" in out.stdout


def test_an_undeploy_committed_but_answered_503_is_not_repeated(fake, client):
    v1 = deploy(client, request("1"), **FAST)
    fake.fail("undeploy", 503, commit=True)
    from vertex_trainer.vertex.deployed import undeploy

    done = undeploy(client, v1.endpoint, v1.deployed_model_id, **FAST)
    assert done.undeployed and done.remaining == 0
    assert len([r for r in fake.requests if r.op == "undeploy"]) == 1


def test_undeploy_refuses_bad_input_with_exit_2_and_sends_nothing(fake, storage, tmp_path):
    _path, env = cli_setup(fake, storage, tmp_path)
    where = ["--project", PROJECT, "--region", REGION]
    out = invoke(["undeploy", "digits", "digits-v1", *where], env=env, cwd=ROOT)
    assert out.returncode == 2 and "Vertex AI's are numbers" in out.stderr
    assert fake.connections == 0
    out = invoke(["undeploy", "no-such-endpoint", "123", *where], env=env, cwd=ROOT)
    assert (
        out.returncode == 2 and "no endpoint 'no-such-endpoint' in test-project / us-central1" in out.stderr
    )
    assert [r for r in fake.requests if r.op == "undeploy"] == []


def test_undeploy_dry_run_opens_no_connection(fake, storage, tmp_path):
    _path, env = cli_setup(fake, storage, tmp_path)
    out = invoke(["undeploy", ENDPOINT, "123", "--dry-run"], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# dry run: nothing was sent.")
    assert f"POST {fake.url}/v1/{ENDPOINT}:undeployModel" in out.stdout
    plan = json.loads(
        invoke(["undeploy", ENDPOINT, "123", "--dry-run", "-o", "json"], env=env, cwd=ROOT).stdout
    )
    assert plan["requests"][-1]["body"] == {"deployedModelId": "123"}
    assert fake.connections == 0


def test_deploy_dry_run_text_names_the_undeploys_or_why_there_are_none(fake, storage, tmp_path):
    path, env = cli_setup(fake, storage, tmp_path)
    job = f"projects/{PROJECT}/locations/{REGION}/customJobs/1"
    out = invoke(["deploy", str(path), "--job", job, "--dry-run"], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (
        "# once the new version serves with 100% of the traffic, for each other deployed model" in out.stdout
    )
    assert "/endpoints/ENDPOINT_ID:undeployModel" in out.stdout
    out = invoke(["deploy", str(path), "--job", job, "--dry-run", "--keep-previous"], env=env, cwd=ROOT)
    assert ":undeployModel" not in out.stdout
    assert "# undeploys: none: the other deployed models are kept (keep_previous)" in out.stdout
    out = invoke(
        ["deploy", str(path), "--job", job, "--dry-run", "--set", "deploy.traffic=30"], env=env, cwd=ROOT
    )
    assert "# undeploys: none: the new version takes 30% and the others keep the rest" in out.stdout
    assert fake.connections == 0


def test_the_generated_endpoint_client_undeploys_on_the_fake_with_the_services_rules(fake, client):
    """aiplatform_v1's own REST transport against the fake's undeployModel: a model that takes
    traffic needs a split that unassigns it; a split naming an unknown id is refused; with a
    good split the operation completes and the endpoint keeps the rest."""
    from google.api_core import exceptions
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    v1 = deploy(client, request("1"), **FAST)
    v2 = deploy(client, request("2", traffic=50), **FAST)
    endpoints = aiplatform_v1.EndpointServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=fake.url),
    )
    with pytest.raises(exceptions.BadRequest, match="needs a traffic_split"):
        endpoints.undeploy_model(endpoint=v1.endpoint, deployed_model_id=v1.deployed_model_id)
    with pytest.raises(exceptions.BadRequest, match=r"DeployedModel ID\(s\) \[42\] do not exist"):
        endpoints.undeploy_model(
            endpoint=v1.endpoint, deployed_model_id=v1.deployed_model_id, traffic_split={"42": 100}
        )
    operation = endpoints.undeploy_model(
        endpoint=v1.endpoint,
        deployed_model_id=v1.deployed_model_id,
        traffic_split={v1.deployed_model_id: 0, v2.deployed_model_id: 100},
    )
    operation.result(timeout=30)
    after = endpoints.get_endpoint(name=v1.endpoint)
    assert [d.id for d in after.deployed_models] == [v2.deployed_model_id]
    assert dict(after.traffic_split) == {v2.deployed_model_id: 100}
    with pytest.raises(exceptions.NotFound):
        endpoints.undeploy_model(endpoint=v1.endpoint, deployed_model_id=v1.deployed_model_id)


def test_node_prices_come_from_a_prediction_section_and_are_unknown_without_one():
    from vertex_trainer.pricing import PriceBook
    from vertex_trainer.pricing.serving import node_price

    shape = dict(machine_type="n1-standard-4", accelerator_type=None, accelerator_count=0, region=REGION)
    training_only = PriceBook(
        {"as_of": "2026-12-01", "families": {"n1": {REGION: {"standard": {"core": 1, "ram": 1}}}}}
    )
    price = node_price(training_only, **shape)
    assert price.hourly is None and "(it holds custom-training prices, as of 2026-12-01)" in (
        price.reason or ""
    )
    rates = {"n1": {REGION: {"standard": {"core": 0.05, "ram": 0.01}}}}
    book = PriceBook({"as_of": "2026-12-01", "prediction": {"families": rates, "accelerators": {}}})
    assert node_price(book, **shape).hourly == pytest.approx(4 * 0.05 + 15 * 0.01)
    elsewhere = node_price(book, **{**shape, "region": "europe-west4"})
    assert elsewhere.hourly is None and "in the prediction prices" in (elsewhere.reason or "")


def test_endpoints_prices_each_deployed_models_nodes_from_a_book_with_prediction_prices(fake, client):
    """The arithmetic `endpoints` shows once the book has prediction prices: a node's price times
    min_replicas (and max_replicas), summed over the endpoint; automatic resources are unpriced."""
    from vertex_trainer.deployment.endpoints_text import endpoints_text
    from vertex_trainer.pricing import PriceBook
    from vertex_trainer.vertex.deployed import describe

    v1 = deploy(client, request("1"), **FAST)  # n1-standard-4, 1 to 2 replicas
    rates = {"n1": {REGION: {"standard": {"core": 0.05, "ram": 0.01}}}}
    book = PriceBook({"as_of": "2026-12-01", "prediction": {"families": rates, "accelerators": {}}})
    view = describe(client, client.get_endpoint(v1.endpoint), book)
    (only,) = view.deployed
    assert only.hourly.hourly == pytest.approx(0.35) and only.hourly_at_max.hourly == pytest.approx(0.70)
    assert view.hourly.hourly == pytest.approx(0.35)
    text = endpoints_text([view], PROJECT, REGION)
    assert "0.35 (up to 0.70)" in text and "hourly   0.35 USD at min replicas" in text

    automatic = {
        "name": v1.endpoint,
        "deployedModels": [
            {
                "id": "9",
                "model": v1.model,
                "modelVersionId": "1",
                "automaticResources": {"minReplicaCount": 2},
            }
        ],
        "trafficSplit": {"9": 100},
    }
    (auto,) = describe(client, automatic, book).deployed
    assert (auto.machine_type, auto.min_replicas, auto.max_replicas) == (None, 2, 2)
    assert auto.hourly.hourly is None and "automatic or shared resources" in (auto.node.reason or "")
    rows = endpoints_text([describe(client, automatic, book)], PROJECT, REGION).splitlines()
    assert rows[2].split() == ["9", "digits@1", "100%", "automatic", "2", "unknown"]
