"""A careless user deploys a model to try it and forgets it (issue 42, H2 round 2).

A deployed model keeps its nodes (min_replicas machines, GPUs included) for as long as it stays
deployed, billed by the hour whether or not a request ever comes; `deploy` (and `submit
--deploy`) said only "deployed / endpoint / model id / traffic", nothing about that nor how to
stop it. Now a line says it, with the command that shows the nodes and their price and the one
that takes the model off (checked here: both work as written, and the endpoint is left empty).
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.shared import PROJECT, REGION, put_object, storage_emulator
from vertex_trainer.vertex.models import RegistryClient

IMAGE = "us-central1-docker.pkg.dev/test-project/r/trainer:abc"
SPEC = {
    "name": "digits",
    "project": PROJECT,
    "region": REGION,
    "hardware": "cpu",
    "image": {"uri": IMAGE},
    "output_dir": "gs://out-bucket/runs/digits",
    "trainer": {"model": "tiny-cnn", "train_data": "gs://out-bucket/data/train-*", "num_classes": 10},
    "deploy": {
        "endpoint": "digits",
        "machine_type": "n1-standard-4",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 1,
        "min_replicas": 2,
        "max_replicas": 2,
    },
}
MODEL_DIR = "gs://out-bucket/exported/model"


@pytest.fixture
def storage():
    with storage_emulator("out-bucket") as url:
        put_object(url, f"{MODEL_DIR}/saved_model.pb")
        yield url


def test_deploy_says_its_nodes_bill_until_undeployed_and_how(settings, run_cli, storage, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    env = {"STORAGE_EMULATOR_HOST": storage}
    done = run_cli("deploy", path, "--model-dir", MODEL_DIR, env=env)
    assert done.returncode == 0, done.stderr
    endpoint = f"projects/{PROJECT}/locations/{REGION}/endpoints/digits"
    registry = RegistryClient(PROJECT, REGION, settings=settings)
    (deployed,) = registry.get_endpoint(endpoint)["deployedModels"]
    ident = str(deployed["id"])
    assert f"model id  {ident}" in done.stdout
    (note,) = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert "bill by the hour while it stays deployed, whether or not it gets requests" in note
    assert f"vertex-trainer endpoints --endpoint {endpoint}" in note
    assert note.endswith(f"when done: vertex-trainer undeploy {endpoint} {ident}")

    # --output json stays one JSON object on stdout
    again = run_cli("deploy", path, "--model-dir", MODEL_DIR, "-o", "json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["deployed_model_id"] == ident

    # what the line says works as written: the nodes listed, then the model taken off
    shown = run_cli("endpoints", "--endpoint", endpoint, env=env)
    assert shown.returncode == 0, shown.stderr
    assert ident in shown.stdout and "n1-standard-4 + 1 x NVIDIA_TESLA_T4" in shown.stdout
    gone = run_cli("undeploy", endpoint, ident, env=env)
    assert gone.returncode == 0, gone.stderr
    assert not registry.get_endpoint(endpoint).get("deployedModels")
