"""A careless user lists the persistent resources a team left behind (issue 42, H2 round 2).

`resources create` says what a resource bills (round 1), but `resources list`, where one looks a
week later, showed only each resource's pools and state: nothing said that two RUNNING pools of
8 H100s bill by the hour whether or not a job runs on them, nor how to stop it. Now each resource
says its hourly list price (every pool's machines, from the same book as `cost`; unknown when the
book lacks one) and the command that deletes it; `--output json` adds "hourly" to each.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.shared import PROJECT, REGION, T4_JOB
from vertex_trainer import api

PARENT = f"projects/{PROJECT}/locations/{REGION}"


def _hourly(tmp_path, name: str, **changes) -> float:
    """`cost`'s own hourly figure for a standard job of this hardware and replica count."""
    path = tmp_path / f"{name}.yaml"
    trainer = {**T4_JOB["trainer"], "batch_size": 48}  # splits over 2 x 8 GPUs and over 3 machines
    path.write_text(
        yaml.safe_dump({**T4_JOB, "trainer": trainer, "scheduling": {"strategy": "standard"}, **changes})
    )
    hourly = api.cost(api.load_spec(str(path))).attempts[0].hourly
    assert hourly is not None and hourly > 0
    return hourly


def _pool(machine: str, replicas: int, accelerator: str | None = None, count: int = 0) -> dict:
    spec = {"machineType": machine}
    if accelerator:
        spec.update(acceleratorType=accelerator, acceleratorCount=count)
    return {"machineSpec": spec, "replicaCount": str(replicas)}


@pytest.fixture
def left_behind(fake):
    fake.resources.add(
        PARENT,
        "team-h100",
        {"resourcePools": [_pool("a3-highgpu-8g", 2, "NVIDIA_H100_80GB", 8), _pool("n1-standard-8", 3)]},
    )
    fake.resources.add(PARENT, "old-t4", {"resourcePools": [_pool("n1-standard-8", 1, "NVIDIA_TESLA_T4", 1)]})
    return fake


def test_resources_list_says_what_each_bills_and_how_to_delete_it(left_behind, run_cli, tmp_path):
    h100 = _hourly(tmp_path, "h100", hardware="h100x8", replicas=2)
    cpu = _hourly(tmp_path, "cpu", hardware={"machine_type": "n1-standard-8"}, replicas=3)
    expected = h100 + cpu  # both pools bill

    listed = run_cli("resources", "list", "--project", PROJECT, "--region", REGION)
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout
    team = f"{PARENT}/persistentResources/team-h100"
    old = f"{PARENT}/persistentResources/old-t4"
    assert (
        f"  bills    about {expected:,.2f} USD/h at list price while it exists, whether or not a job "
        f"runs on it; when done: vertex-trainer resources delete {team}"
    ) in text
    assert (
        "  bills    unknown (not in the price snapshot) while it exists, whether or not a job runs on "
        f"it; when done: vertex-trainer resources delete {old}"
    ) in text

    as_json = run_cli("resources", "list", "--project", PROJECT, "--region", REGION, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    by_name = {r["name"]: r for r in json.loads(as_json.stdout)["resources"]}
    assert by_name[team]["hourly"] == pytest.approx(expected)
    assert by_name[old]["hourly"] is None
    assert (
        by_name[team]["resourcePools"][0]["machineSpec"]["machineType"] == "a3-highgpu-8g"
    )  # REST as it was

    gone = run_cli("resources", "delete", team)  # what the line says works
    assert gone.returncode == 0 and "deleted" in gone.stdout and team not in left_behind.resources.resources
