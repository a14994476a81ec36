"""A careless user presses Ctrl-C while `resources create` waits for its machines (issue 42, H2
round 2): on Vertex AI a persistent resource takes minutes to come up.

The create goes on without the command, and the resource's machines (2 x 8 H100s here) bill
while it exists, used or not; all the command said was "interrupted". Now it says so, with the
way back: the same create again adopts it (checked here: no second create) and `resources
delete NAME` removes it (checked: it does).
"""

from __future__ import annotations

import pytest
import yaml

from tests.shared import PROJECT, REGION, T4_JOB
from vertex_trainer import api
from vertex_trainer.vertex.resources import ResourcesClient


class _CtrlCWhileWaiting:
    """The client's transport, but Ctrl-C arrives at the first read of the create's operation:
    the service has taken the create, and the command is waiting for the machines."""

    def __init__(self, api):
        self._api = api

    def __getattr__(self, name):
        return getattr(self._api, name)

    def json(self, op, method, path, **kwargs):
        if op.endswith("(operation)"):
            raise KeyboardInterrupt(path)
        return self._api.json(op, method, path, **kwargs)


def test_ctrl_c_during_resources_create_says_what_bills_and_the_way_back(fake, settings, run_cli, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**T4_JOB, "hardware": "h100x8", "replicas": 2}))
    body = api.resource_request(api.load_spec(str(path)))
    said: list[str] = []
    client = ResourcesClient(PROJECT, REGION, settings=settings, log=said.append)
    client.api = _CtrlCWhileWaiting(client.api)
    with pytest.raises(KeyboardInterrupt):
        client.create(body, "team-h100")
    name = f"projects/{PROJECT}/locations/{REGION}/persistentResources/team-h100"
    (line,) = [s for s in said if s.startswith("interrupted")]
    assert f"the persistent resource {name} is being created in Vertex AI" in line
    assert "its machines bill while it exists, used or not" in line
    assert "The same create again (--id team-h100) adopts it and shows its state" in line
    assert line.endswith(f"remove it: vertex-trainer resources delete {name}")
    assert name in fake.resources.resources  # it was made, though the command stopped

    # what the line says: the same create adopts it (no second create), and delete removes it
    again = run_cli("resources", "create", path, "--id", "team-h100")
    assert again.returncode == 0, again.stderr
    assert f"adopted  {name}" in again.stdout and len(fake.calls("resource-create")) == 1
    gone = run_cli("resources", "delete", name)
    assert gone.returncode == 0 and "deleted" in gone.stdout and name not in fake.resources.resources


def test_a_create_that_is_not_interrupted_says_nothing_of_it(settings, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**T4_JOB, "hardware": "h100x8", "replicas": 2}))
    body = api.resource_request(api.load_spec(str(path)))
    said: list[str] = []
    made, adopted = ResourcesClient(PROJECT, REGION, settings=settings, log=said.append).create(
        body, "team-h100"
    )
    assert not adopted and made.state == "RUNNING"
    assert not [s for s in said if s.startswith("interrupted")]
