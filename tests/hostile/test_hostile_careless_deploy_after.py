"""A careless user's `submit --wait --deploy` trains fine and then the deploy fails (issue 42,
A1): here the model export is missing; on Vertex AI a refused serving image or a quota. The job
SUCCEEDED (and was paid for), yet the command ended on the deploy's error alone, the key random
and the job never named in --output json: the obvious retry, `submit --deploy` again, trains it
again. Now the error is preceded by a line naming the job that succeeded and the `deploy --job`
that deploys it without training again (checked here: it does)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.cli_support import invoke
from tests.shared import storage_emulator

IMAGE = "us-central1-docker.pkg.dev/test-project/r/trainer:abc"
SPEC = {
    "name": "digits",
    "project": "test-project",
    "region": "us-central1",
    "hardware": "cpu",
    "image": {"uri": IMAGE},
    "output_dir": "gs://out-bucket/runs/digits",
    "trainer": {"model": "tiny-cnn", "train_data": "gs://out-bucket/data/train-*", "num_classes": 10},
    "deploy": {"endpoint": "digits", "machine_type": "n1-standard-2"},
}


@pytest.fixture
def storage():
    with storage_emulator("out-bucket") as url:
        _put(url, "data/train-00000-of-00001")
        yield url


def _put(url: str, name: str) -> None:
    import requests

    r = requests.post(
        f"{url}/upload/storage/v1/b/out-bucket/o", params={"uploadType": "media", "name": name}, data=b"x"
    )
    assert r.ok, r.text


def test_a_deploy_that_fails_after_training_names_the_job_and_the_deploy_that_needs_no_training(
    fake, storage, tmp_path
):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    env = {
        **os.environ,
        "VERTEX_TRAINER_API_ENDPOINT": fake.url,
        "STORAGE_EMULATOR_HOST": storage,
        "VERTEX_TRAINER_POLL_INTERVAL": "0.01",
    }
    failed = invoke(["submit", path, "--deploy", "--output", "json"], env=env, cwd=tmp_path)
    assert failed.returncode == 2, failed.stderr  # the job's model/ has no export
    (job,) = fake.jobs  # one job, and it SUCCEEDED
    assert fake.jobs[job]["state"] == "JOB_STATE_SUCCEEDED"
    said = f"the training job {job} SUCCEEDED; only its deploy failed (below)"
    assert said in failed.stderr and f"vertex-trainer deploy SPEC --job {job}" in failed.stderr
    assert failed.stderr.index(said) < failed.stderr.index("error:")  # before the deploy's error
    # --output json's one object names the job too: a CI step reads it from stdout
    error = json.loads(failed.stdout)["error"]
    assert error["job"] == job and error["exit_code"] == 2 and error["kind"] == "invalid"

    # what the line says: the model exported now, deploy --job deploys it; no second job
    base = fake.jobs[job]["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"].removeprefix(
        "gs://out-bucket/"
    )
    _put(storage, f"{base.rstrip('/')}/model/saved_model.pb")
    done = invoke(["deploy", path, "--job", job, "--output", "json"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model_version"] == "1" and len(fake.jobs) == 1
