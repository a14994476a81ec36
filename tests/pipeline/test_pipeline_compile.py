"""`pipeline compile`: the KFP pipeline built with kfp and GCPC holds exactly the rendered job
(machine, accelerator, Flex Start, max wait) and, with deploy:, the upload and deploy steps."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.cli_support import invoke
from tests.pipeline.conftest import IMAGE
from vertex_trainer import api, render
from vertex_trainer.automation import pipeline_steps as steps
from vertex_trainer.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]


def _tasks(ir: dict) -> dict:
    return ir["root"]["dag"]["tasks"]


def _params(task: dict) -> dict:
    return {k: v["runtimeValue"]["constant"] for k, v in task["inputs"].get("parameters", {}).items()}


def test_compiled_pipeline_loads_with_kfp_and_holds_the_rendered_job(spec_file, tmp_path):
    out = tmp_path / "pipeline.yaml"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("VERTEX_TRAINER_")},
        "CLOUDSDK_CONFIG": str(tmp_path),
    }
    done = invoke(  # in this process (tests/cli_support.py)
        [
            "pipeline",
            "compile",
            str(spec_file),
            "-o",
            str(out),
            "--idempotency-key",
            "k1",
        ],
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr

    from google.cloud import aiplatform_v1
    from google.protobuf import json_format
    from kfp import components

    pipeline = components.load_component_from_file(str(out))  # kfp reads it back
    ir = json_format.MessageToDict(pipeline.pipeline_spec, preserving_proto_field_name=False)
    tasks = _tasks(ir)
    assert set(tasks) == {
        "custom-training-job",
        "importer",
        "model-upload",
        "endpoint-create",
        "model-deploy",
    }

    train = _params(tasks["custom-training-job"])
    assert train["strategy"] == "FLEX_START" and train["max_wait_duration"] == "14400s"
    assert train["timeout"] == "86400s" and train["project"] == "test-project"
    assert train["location"] == "europe-west4"
    # the run's own folder below output_dir (docs/contract.md section 15), named after the key
    assert train["base_output_directory"] == "gs://out-bucket/runs/digits/digits-flex-k1"
    assert train["service_account"] == "trainer@test-project.iam.gserviceaccount.com"
    assert train["network"] == "projects/123/global/networks/vpc"
    pools = train["worker_pool_specs"]
    assert [p["machine_spec"]["machine_type"] for p in pools] == ["a2-highgpu-2g", "a2-highgpu-2g"]
    assert {p["machine_spec"]["accelerator_type"] for p in pools} == {"NVIDIA_TESLA_A100"}

    # Exactly the rendered worker pools: the same protos, whichever JSON spelling carried them.
    rendered = render.custom_job(api.load_spec(spec_file), idempotency_key=None)
    for ours, theirs in zip(pools, rendered["jobSpec"]["workerPoolSpecs"], strict=True):
        assert aiplatform_v1.WorkerPoolSpec(_ints(ours)) == aiplatform_v1.WorkerPoolSpec.from_json(
            json.dumps(theirs)
        )

    model = ir["deploymentSpec"]["executors"]["exec-importer"]["importer"]
    assert model["artifactUri"]["constant"] == "gs://out-bucket/runs/digits/digits-flex-k1/model"
    assert model["typeSchema"]["schemaTitle"] == "google.UnmanagedContainerModel"
    container = model["metadata"]["containerSpec"]
    assert container["imageUri"] == IMAGE and container["command"] == ["python", "-m", "trainer.serve"]
    assert tasks["importer"]["dependentTasks"] == ["custom-training-job"]  # after training only

    upload = _params(tasks["model-upload"])
    assert (upload["project"], upload["location"], upload["display_name"]) == (
        "test-project",
        "europe-west4",
        "digits",
    )
    endpoint = _params(tasks["endpoint-create"])
    assert (endpoint["project"], endpoint["location"], endpoint["display_name"]) == (
        "test-project",
        "europe-west4",
        "digits",
    )
    deploy = _params(tasks["model-deploy"])
    assert deploy["dedicated_resources_machine_type"] == "n1-standard-4"
    assert deploy["dedicated_resources_accelerator_type"] == "NVIDIA_TESLA_T4"
    assert deploy["dedicated_resources_max_replica_count"] == 3
    assert deploy["traffic_split"] == {"0": 100}  # compiled without looking: a first deploy
    assert sorted(tasks["model-deploy"]["dependentTasks"]) == ["endpoint-create", "model-upload"]
    assert all(not t.get("cachingOptions") for t in tasks.values())  # no step is ever cached


def test_an_out_named_json_gets_the_same_pipeline_as_json(spec_file, tmp_path):
    """-o NAME.json writes JSON (it wrote YAML into it), the PipelineSpec the YAML holds, and kfp
    reads it; compiling again replaces it, and a JSON file that is no pipeline is left alone."""
    import yaml
    from kfp import components

    env = {"CLOUDSDK_CONFIG": str(tmp_path)}
    as_json, as_yaml = tmp_path / "pipeline.json", tmp_path / "pipeline.yaml"
    for out in (as_json, as_yaml, as_json):  # the third: over the JSON compiled before
        line = ["pipeline", "compile", str(spec_file), "-o", str(out), "--idempotency-key", "k1"]
        done = invoke(line, env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr
    assert json.loads(as_json.read_text()) == yaml.safe_load(as_yaml.read_text())
    assert components.load_component_from_file(str(as_json)).name  # kfp reads it back

    other = tmp_path / "settings.json"
    other.write_text('{\n  "sdkVersion": "mine"\n}\n')
    done = invoke(["pipeline", "compile", str(spec_file), "-o", str(other)], env=env, cwd=ROOT)
    assert done.returncode == 2 and "not a compiled pipeline" in done.stderr
    assert other.read_text() == '{\n  "sdkVersion": "mine"\n}\n'


def _ints(pool: dict) -> dict:
    # Pipeline parameters are JSON numbers (doubles): 8.0 for an int32 field.
    if isinstance(pool, dict):
        return {k: _ints(v) for k, v in pool.items()}
    if isinstance(pool, list):
        return [_ints(v) for v in pool]
    return int(pool) if isinstance(pool, float) and pool.is_integer() else pool


def test_without_deploy_the_pipeline_only_trains(spec):
    ir = api.compile_pipeline(spec.model_copy(update={"deploy": None}))
    assert list(_tasks(ir)) == ["custom-training-job"]


def test_resolve_versions_the_existing_model_and_reuses_the_endpoint(spec, settings, fake):
    from vertex_trainer.deployment import deploy_request as deployment
    from vertex_trainer.vertex.model_deploy import deploy
    from vertex_trainer.vertex.models import RegistryClient

    client = RegistryClient("test-project", "europe-west4", settings=settings)
    earlier = deploy(
        client, deployment.request(spec, "gs://out-bucket/old/model", "old-job", IMAGE), poll=settings.poll
    )
    ir = api.compile_pipeline(spec, resolve=True, idempotency_key="k-1", settings=settings)
    tasks = _tasks(ir)
    assert "endpoint-create" not in tasks  # the endpoint exists: imported, not created again
    executors = ir["deploymentSpec"]["executors"]
    imported = {
        e["importer"]["typeSchema"]["schemaTitle"]: e["importer"]["metadata"].get("resourceName")
        for e in executors.values()
        if "importer" in e
    }
    assert imported["google.VertexModel"] == earlier.model  # a new version of it (parentModel)
    assert imported["google.VertexEndpoint"] == earlier.endpoint
    assert "parent_model" in tasks["model-upload"]["inputs"]["artifacts"]
    assert _params(tasks["model-deploy"])["traffic_split"] == {"0": 50, earlier.deployed_model_id: 50}
    assert _params(tasks["model-upload"])["labels"]["vertex-trainer-key"] == "k-1"


def test_disable_retries_has_no_pipeline_equivalent_and_is_refused(spec):
    strict = spec.model_copy(
        update={"scheduling": spec.scheduling.model_copy(update={"disable_retries": True})}
    )
    with pytest.raises(SpecError, match=re.escape("scheduling.disable_retries")):
        api.compile_pipeline(strict)


def test_a_job_field_the_training_step_cannot_carry_is_an_error_not_a_silent_drop():
    job = {"displayName": "x", "jobSpec": {"workerPoolSpecs": [], "enableWebAccess": True}}
    with pytest.raises(ValueError, match="enableWebAccess"):
        steps.training_inputs(job, project="p", location="l")


def test_snake_keys_turns_rest_json_into_proto_field_names():
    assert steps.snake_keys(
        {"machineSpec": {"acceleratorCount": 8}, "env": [{"name": "A_B", "value": "1"}]}
    ) == {"machine_spec": {"accelerator_count": 8}, "env": [{"name": "A_B", "value": "1"}]}


# -- endpoint hygiene (issue 40 item 3): the models left at 0% are undeployed after the deploy ---


def _deploy_two_versions(spec, settings) -> tuple:
    """Two versions of the spec's model serving on its endpoint, 50% each (the second deployed
    with traffic 50, so the first is kept)."""
    import dataclasses

    from vertex_trainer.deployment import deploy_request as deployment
    from vertex_trainer.vertex.model_deploy import deploy
    from vertex_trainer.vertex.models import RegistryClient

    client = RegistryClient("test-project", "europe-west4", settings=settings)
    request = deployment.request(spec, "gs://out-bucket/old/model", "old-job-1", IMAGE)
    first = deploy(client, dataclasses.replace(request, traffic=100), poll=settings.poll)
    second = deploy(
        client,
        dataclasses.replace(
            request, artifact_uri="gs://out-bucket/old2/model", job_id="old-job-2", traffic=50
        ),
        poll=settings.poll,
    )
    assert second.traffic_split == {first.deployed_model_id: 50, second.deployed_model_id: 50}
    return first, second


def _with_deploy(spec, **changes):
    return spec.model_copy(update={"deploy": spec.deploy.model_copy(update=changes)})


def _load_back(ir: dict, tmp_path: Path) -> dict:
    """The IR as kfp reads the compiled file back."""
    from google.protobuf import json_format
    from kfp import components

    path = tmp_path / "pipeline.yaml"
    path.write_text(api.pipeline_yaml(ir))
    loaded = components.load_component_from_file(str(path))
    return json_format.MessageToDict(loaded.pipeline_spec, preserving_proto_field_name=False)


def test_at_traffic_100_the_models_deployed_now_are_undeployed_after_the_deploy_step(
    spec, settings, fake, tmp_path
):
    first, second = _deploy_two_versions(spec, settings)
    full = _with_deploy(spec, traffic=100)
    ir = _load_back(
        api.compile_pipeline(full, resolve=True, idempotency_key="k-2", settings=settings), tmp_path
    )
    tasks = _tasks(ir)
    by_name = {t["taskInfo"]["name"]: key for key, t in tasks.items()}
    assert _params(tasks[by_name["deploy-model"]])["traffic_split"] == {"0": 100}
    old = [first, second]
    undeploys = [by_name[f"undeploy-{d.deployed_model_id}"] for d in old]
    # one after the other, the first once the new version serves (the deploy step succeeded)
    assert by_name["deploy-model"] in tasks[undeploys[0]]["dependentTasks"]
    assert undeploys[0] in tasks[undeploys[1]]["dependentTasks"]
    executors = ir["deploymentSpec"]["executors"]
    for d, key in zip(old, undeploys, strict=True):
        task = tasks[key]
        command = executors[task["componentRef"]["name"].replace("comp-", "exec-", 1)]["container"]["command"]
        assert command[-1] == "google_cloud_pipeline_components.container.v1.endpoint.undeploy_model.launcher"
        inputs = task["inputs"]["artifacts"]
        assert inputs["endpoint"]["taskOutputArtifact"]["producerTask"] == by_name["endpoint"]
        importer = inputs["model"]["taskOutputArtifact"]["producerTask"]
        assert tasks[importer]["taskInfo"]["name"] == f"previous-model-{d.deployed_model_id}"
        imported = executors[tasks[importer]["componentRef"]["name"].replace("comp-", "exec-", 1)]["importer"]
        # GCPC's launcher finds the deployed model by the artifact's model@version
        assert imported["typeSchema"]["schemaTitle"] == "google.VertexModel"
        assert imported["metadata"]["resourceName"] == f"{d.model}@{d.model_version}"
        assert imported["artifactUri"]["constant"].endswith(f"/v1/{d.model}@{d.model_version}")
    assert not any(t.get("cachingOptions") for t in tasks.values())
    description = ir["pipelineInfo"]["description"]
    assert f"{first.deployed_model_id} ({first.model}@{first.model_version})" in description
    assert "left at 0% are undeployed" in description

    # The same inputs (registry included) compile to the same bytes.
    again = api.compile_pipeline(full, resolve=True, idempotency_key="k-2", settings=settings)
    assert api.pipeline_yaml(again) == (tmp_path / "pipeline.yaml").read_text()


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"traffic": 50}, "the new version takes 50% of the traffic and the deployed models keep the rest"),
        (
            {"traffic": 100, "keep_previous": True},
            "the other deployed models are kept (deploy.keep_previous)",
        ),
    ],
)
def test_with_less_traffic_or_keep_previous_nothing_is_undeployed(spec, settings, fake, changes, says):
    _deploy_two_versions(spec, settings)
    ir = api.compile_pipeline(_with_deploy(spec, **changes), resolve=True, settings=settings)
    names = [t["taskInfo"]["name"] for t in _tasks(ir).values()]
    assert "deploy-model" in names
    assert not [n for n in names if n.startswith(("undeploy-", "previous-model-"))]
    assert says in ir["pipelineInfo"]["description"]


def test_without_the_look_up_no_deployed_model_is_known(spec, settings, fake):
    _deploy_two_versions(spec, settings)
    requests = len(fake.requests)
    ir = api.compile_pipeline(_with_deploy(spec, traffic=100), idempotency_key="k-3")
    assert len(fake.requests) == requests  # no connection
    assert not [t for t in _tasks(ir).values() if t["taskInfo"]["name"].startswith("undeploy-")]
    assert ir["pipelineInfo"]["description"].endswith(
        "left at 0% are undeployed: none known at compile time "
        "(pipeline submit and compile --resolve look them up)"
    )
    again = api.compile_pipeline(_with_deploy(spec, traffic=100), idempotency_key="k-3")
    assert api.pipeline_yaml(again) == api.pipeline_yaml(ir)  # deterministic
