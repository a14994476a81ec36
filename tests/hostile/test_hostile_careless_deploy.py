"""A careless user presses Ctrl-C while `deploy` (or `submit --deploy`) waits for the new version
to be deployed (issue 42, A1): on Vertex AI that takes minutes.

The deploy goes on without the command, and the command would have undeployed the versions left
at 0% once the new one served: interrupted, they stay deployed, their nodes billed, and all it
said was "interrupted". Now it says so, and that running the same deploy again adopts the
deployment and undeploys them (checked here: it does, against the fake Vertex AI).
"""

from __future__ import annotations

import pytest

from tests.deploy.test_deploy_vertex import request
from tests.shared import PROJECT, REGION, fake_settings
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.model_deploy import DeployRequest, deploy
from vertex_trainer.vertex.models import RegistryClient

FAST = dict(poll=PollPolicy(initial=0.01, maximum=0.02), timeout=30)


def _request(job_id: str) -> DeployRequest:
    return request(job_id, max_replicas=1, labels={})


class _CtrlCAfterDeploySent(RegistryClient):
    """The service takes the deployModel; Ctrl-C arrives while the command waits for it."""

    def deploy_once(self, endpoint, deployed_model, traffic_split):
        operation = super().deploy_once(endpoint, deployed_model, traffic_split)
        raise KeyboardInterrupt(operation)


def test_ctrl_c_during_a_deploy_says_what_keeps_billing_and_how_to_finish(fake):
    settings = fake_settings(fake)
    first = deploy(RegistryClient(PROJECT, REGION, settings=settings), _request("111"), **FAST)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        deploy(
            _CtrlCAfterDeploySent(PROJECT, REGION, settings=settings),
            _request("222"),
            log=said.append,
            **FAST,
        )
    (line,) = [s for s in said if s.startswith("interrupted")]
    endpoint = f"projects/{PROJECT}/locations/{REGION}/endpoints/digits-endpoint"
    assert f"the deploy of {first.model}@2 to {endpoint} goes on in Vertex AI" in line
    assert "the models it leaves at 0% keep their nodes (billed)" in line
    assert "Run the same deploy again" in line and "undeploys them" in line
    assert f"vertex-trainer endpoints --endpoint {endpoint}" in line
    # what the line says: the re-run adopts the deployment and undeploys version 1, left at 0%
    again = deploy(RegistryClient(PROJECT, REGION, settings=settings), _request("222"), **FAST)
    assert again.model_version == "2"
    assert len([r for r in fake.requests if r.op == "deploy"]) == 2  # version 1's, the interrupted one's
    assert again.adopted  # the interrupted run's deployment, waited for: not deployed a second time
    (serving,) = RegistryClient(PROJECT, REGION, settings=settings).get_endpoint(endpoint)["deployedModels"]
    assert serving["id"] == again.deployed_model_id and serving["modelVersionId"] == "2"
    assert [u.deployed_model_id for u in again.undeployed] == [first.deployed_model_id]
    assert again.traffic_split == {again.deployed_model_id: 100}
