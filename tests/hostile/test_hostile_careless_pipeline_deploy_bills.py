"""A careless user starts the pipeline of a spec with `deploy:` (issue 42, H2 round 2).

The run trains, then deploys the model to an endpoint, whose nodes bill by the hour while the
model stays deployed; `deploy` now says so (test_hostile_careless_deploy_bills.py), but
`pipeline submit` said only "run / state / console" and returned long before the deploy. Now it
says where the run deploys, that its nodes then bill, and the commands that show and remove
them (the one it names with the spec runs as written here).
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.shared import PROJECT, REGION, put_object, storage_emulator

SPEC = {
    "name": "digits",
    "project": PROJECT,
    "region": REGION,
    "hardware": "cpu",
    "image": {"uri": "us-central1-docker.pkg.dev/test-project/r/trainer:abc"},
    "output_dir": "gs://out-bucket/runs/digits",
    "trainer": {"model": "tiny-cnn", "train_data": "gs://out-bucket/data/train-*", "num_classes": 10},
    "deploy": {"endpoint": "digits-ep", "machine_type": "n1-standard-4"},
}


@pytest.fixture
def env():
    with storage_emulator("out-bucket") as url:
        put_object(url, "gs://out-bucket/data/train-00000-of-00001")
        yield {"STORAGE_EMULATOR_HOST": url}


def _spec(tmp_path, **changes):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}))
    return path


def test_pipeline_submit_of_a_deploy_spec_says_its_nodes_will_bill(fake, run_cli, env, tmp_path):
    path = _spec(tmp_path)
    done = run_cli("pipeline", "submit", path, env=env)
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert f"deploying the model to the endpoint digits-ep ({PROJECT} / {REGION})" in note
    assert "its nodes then bill by the hour while it stays deployed, whether or not it gets requests" in note
    assert f"vertex-trainer endpoints {path} shows them" in note
    assert "vertex-trainer undeploy ENDPOINT DEPLOYED_MODEL_ID takes one off" in note

    shown = run_cli("endpoints", path, env=env)  # the command it names runs as written
    assert shown.returncode == 0, shown.stderr

    as_json = run_cli("pipeline", "submit", path, "-o", "json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["name"].startswith(
        f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/"
    )


def test_a_pipeline_without_deploy_says_nothing_of_nodes(fake, run_cli, env, tmp_path):
    done = run_cli("pipeline", "submit", _spec(tmp_path, deploy=None), env=env)
    assert done.returncode == 0, done.stderr
    assert "bill" not in done.stderr
