"""Endpoint hygiene in the sandbox (issue 40 item 3): a deployed model's serving container stops
when it is undeployed, as Vertex AI releases its nodes; the undeploy that a new version's deploy
makes stops the old server, and the new one answers. Stand-in servers (conftest.ECHO_SERVER), no
TensorFlow."""

from __future__ import annotations

import dataclasses

import pytest

from tests.process_support import pid_alive, processes_with_env
from vertex_trainer import api
from vertex_trainer.vertex.model_deploy import deploy
from vertex_trainer.vertex.models import RegistryClient

from .conftest import PROJECT, REGION, echo_deploy_request

pytestmark = pytest.mark.wire


def server_pids(marker: str, deployed_model_id: str) -> list[int]:
    """The processes of this test's sandbox serving that deployed model (the sandbox's gateway
    carries the marker too; the model's server also carries its AIP_DEPLOYED_MODEL_ID)."""
    mine = set(processes_with_env(marker))
    return [p for p in processes_with_env(f"AIP_DEPLOYED_MODEL_ID={deployed_model_id}\0") if p in mine]


def test_a_new_version_undeploys_the_old_one_and_its_server_stops(sandbox, settings, marker):
    registry = RegistryClient(PROJECT, REGION, settings=settings)
    old = deploy(registry, echo_deploy_request(), poll=settings.poll)
    assert old.predict([{"a": 1}])  # its server runs and answers
    (old_pid,) = server_pids(marker, old.deployed_model_id)
    assert list(sandbox.models.servers) == [old.deployed_model_id]

    new = deploy(registry, dataclasses.replace(echo_deploy_request(), job_id="456"), poll=settings.poll)
    assert [u.deployed_model_id for u in new.undeployed] == [old.deployed_model_id]
    assert new.traffic_split == {new.deployed_model_id: 100}
    # The undeploy operation ends once the server is gone (the sandbox's hook stops it first).
    assert not pid_alive(old_pid)
    assert list(sandbox.models.servers) == [new.deployed_model_id]
    answer = registry.predict(new.endpoint, [{"b": 2}])
    assert answer["deployedModelId"] == new.deployed_model_id
    (new_pid,) = server_pids(marker, new.deployed_model_id)

    done = api.undeploy(new.endpoint, new.deployed_model_id, settings=settings, log=lambda _: None)
    assert done.undeployed and done.remaining == 0
    assert sandbox.models.servers == {} and not pid_alive(new_pid)
