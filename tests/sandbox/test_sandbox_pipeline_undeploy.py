"""Endpoint hygiene on the pipeline path, in the sandbox (issue 40 item 3): a compiled pipeline
whose new version takes all the traffic undeploys, after its deploy step, the models that were
deployed on the endpoint when it was compiled, through GCPC's own undeploy launcher against the
fake Vertex AI; their servers stop, the new one serves alone. A stand-in training replica and
stand-in serving containers (conftest.ECHO_SERVER), no TensorFlow."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest

from tests.process_support import pid_alive, processes_with_env
from vertex_trainer.automation import compile_ir, pipeline_job, resolve_target
from vertex_trainer.vertex.model_deploy import deploy
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.vertex.pipelines import PipelinesClient

from .conftest import BUCKET, PROJECT, REGION, echo_deploy_request, python_job

LAUNCHER = "google_cloud_pipeline_components.container.v1.endpoint.undeploy_model.launcher"


def _server_pid(marker: str, deployed_model_id: str, timeout: float = 60) -> int:
    """The process of this test's sandbox serving that deployed model. The deploy's operation
    ends when the sandbox has *begun* serving it: the watcher thread forks the server a moment
    later (on a busy machine, seconds), so look every 50 ms up to `timeout` (another process:
    no event to await)."""
    deadline = time.monotonic() + timeout
    while True:
        mine = set(processes_with_env(marker))
        found = [p for p in processes_with_env(f"AIP_DEPLOYED_MODEL_ID={deployed_model_id}\0") if p in mine]
        if found or time.monotonic() > deadline:
            (pid,) = found
            return pid
        time.sleep(0.05)


@pytest.mark.wire
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_pipeline_undeploys_the_models_left_at_0_percent_after_its_deploy_step(
    sandbox, settings, marker, echoed
):
    registry = RegistryClient(PROJECT, REGION, settings=settings)
    first = deploy(registry, echo_deploy_request(), poll=settings.poll)
    second = deploy(
        registry, dataclasses.replace(echo_deploy_request(), job_id="456", traffic=50), poll=settings.poll
    )
    old = [first.deployed_model_id, second.deployed_model_id]
    pids = [_server_pid(marker, i) for i in old]

    request = dataclasses.replace(echo_deploy_request(), job_id="789")  # traffic 100, none kept
    target = resolve_target(registry, request)  # what `pipeline submit` looks up
    assert [p.deployed_model_id for p in target.undeploy] == old
    ir = compile_ir(
        python_job("print('trained')", name="hygiene"),
        name="hygiene",
        project=PROJECT,
        location=REGION,
        key="hygiene-1",
        deploy=request,
        target=target,
    )
    body = pipeline_job(display_name="hygiene", ir=ir, labels={}, root=f"gs://{BUCKET}/pipeline-root")
    client = PipelinesClient(PROJECT, REGION, settings=settings)
    created = client.create_once(body, f"hygiene-{uuid.uuid4().hex[:8]}")
    assert sandbox.pipelines.wait(created["name"], timeout=280)
    run = client.get(created["name"])
    assert run["state"] == "PIPELINE_STATE_SUCCEEDED", run.get("error")

    endpoint = registry.get_endpoint(first.endpoint)
    (new,) = endpoint["deployedModels"]  # the old ones are gone
    assert new["id"] not in old and new["modelVersionId"] == "3"
    assert endpoint["trafficSplit"] == {new["id"]: 100}
    assert list(sandbox.models.servers) == [new["id"]]  # their nodes stopped
    assert not any(pid_alive(p) for p in pids)
    assert registry.predict(first.endpoint, [{"x": 1}])["deployedModelId"] == new["id"]

    tasks = {t["taskName"]: t for t in run["jobDetail"]["taskDetails"][1:]}
    deployed, undeploys = tasks["deploy-model"], [tasks[f"undeploy-{i}"] for i in old]
    assert all(t["state"] == "SUCCEEDED" for t in tasks.values())
    # after the deploy step, one after the other
    assert deployed["endTime"] <= undeploys[0]["startTime"]
    assert undeploys[0]["endTime"] <= undeploys[1]["startTime"]
    assert sum(LAUNCHER in line for line in echoed) == 2
    # GCPC's launcher found each by its model@version and sent its id (as a proto field name)
    assert [r.body["deployed_model_id"] for r in sandbox.vertex.calls("undeploy")] == old
