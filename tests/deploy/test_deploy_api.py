"""`deploy` through the API and the CLI: from a finished job to an endpoint, against the fake
Vertex AI and gcp-storage-emulator; bad input is exit 2 before anything is sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli_support import invoke
from tests.shared import QUICK_RETRY, fake_settings, storage_emulator
from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.spec import build_spec

pytestmark = pytest.mark.wire

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "us-central1-docker.pkg.dev/test-project/r/trainer:abc"


@pytest.fixture
def storage():
    """gcp-storage-emulator in-process, with the bucket `out-bucket` holding a training shard that
    the spec's train_data matches (a cloud submit checks it first). Yields its URL."""
    with storage_emulator("out-bucket") as url:
        put(url, "data/train-00000-of-00001", b"records")
        yield url


def put(storage_url: str, name: str, data: bytes = b"pb") -> None:
    import requests

    r = requests.post(
        f"{storage_url}/upload/storage/v1/b/out-bucket/o",
        params={"uploadType": "media", "name": name},
        data=data,
    )
    assert r.ok, r.text


@pytest.fixture
def settings(fake, storage):
    return fake_settings(fake, retry=QUICK_RETRY, storage_emulator=storage)


def spec(**deploy):
    return build_spec(
        {
            "name": "digits",
            "project": "test-project",
            "region": "us-central1",
            "hardware": "cpu",
            "image": {"uri": IMAGE},
            "output_dir": "gs://out-bucket/runs/digits",
            "trainer": {"model": "tiny-cnn", "train_data": "gs://out-bucket/data/train-*", "num_classes": 10},
            "deploy": {"endpoint": "digits", "machine_type": "n1-standard-2", **deploy},
        }
    )


def finished_job(fake, state="JOB_STATE_SUCCEEDED", base="gs://out-bucket/runs/digits") -> str:
    body = {
        "displayName": "digits",
        "labels": {"vertex-trainer-spec": "x"},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-8"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": IMAGE},
                }
            ],
            "baseOutputDirectory": {"outputUriPrefix": base},
        },
    }
    return fake.add_job(body, state=state)["name"]


def sent(fake, op):
    return [r for r in fake.requests if r.op == op]


def test_deploy_a_finished_job_once(fake, storage, settings):
    put(storage, "runs/digits/model/saved_model.pb")
    job = finished_job(fake)
    first = api.deploy(spec(traffic=100), job=job, settings=settings, log=lambda _: None)
    (upload,) = sent(fake, "upload")
    model = upload.body["model"]
    assert model["artifactUri"] == "gs://out-bucket/runs/digits/model"
    assert model["containerSpec"] == {
        "imageUri": IMAGE,
        "command": ["python", "-m", "trainer.serve"],
        "ports": [{"containerPort": 8080}],
        "predictRoute": "/predict",
        "healthRoute": "/health",
    }
    assert model["labels"]["vertex-trainer-job"] == job.rsplit("/", 1)[1]
    (deploy_call,) = sent(fake, "deploy")
    assert deploy_call.body["trafficSplit"] == {"0": 100}
    assert first.to_dict()["traffic_split"] == {first.deployed_model_id: 100}

    again = api.deploy(spec(), job=job, settings=settings, log=lambda _: None)
    assert again.adopted and len(sent(fake, "upload")) == 1 and len(sent(fake, "deploy")) == 1


def test_a_job_that_did_not_succeed_is_exit_2_and_nothing_is_sent(fake, settings):
    job = finished_job(fake, state="JOB_STATE_RUNNING")
    with pytest.raises(UserError) as err:
        api.deploy(spec(), job=job, settings=settings, log=lambda _: None)
    assert err.value.exit_code == 2 and "only a job that SUCCEEDED" in str(err.value)
    assert sent(fake, "upload") == [] and sent(fake, "deploy") == []


def test_a_missing_export_is_exit_2_before_the_upload(fake, settings):
    job = finished_job(fake)  # nothing under runs/digits/model
    with pytest.raises(UserError) as err:
        api.deploy(spec(), job=job, settings=settings, log=lambda _: None)
    assert "no SavedModel at gs://out-bucket/runs/digits/model" in str(err.value)
    assert sent(fake, "upload") == []


def test_model_dir_must_be_cloud_storage(settings):
    with pytest.raises(UserError) as err:
        api.deploy(spec(), model_dir="runs/local/model", settings=settings)
    assert "vertex-trainer serve runs/local/model" in str(err.value)
    with pytest.raises(UserError, match="exactly one of --job"):
        api.deploy(spec(), settings=settings)


def test_dry_run_sends_nothing(fake, settings):
    plan = api.deploy(
        spec(),
        job="projects/test-project/locations/us-central1/customJobs/1",
        dry_run=True,
        settings=settings,
    )
    assert plan["dry_run"] and fake.connections == 0
    assert [r["method"] for r in plan["requests"]] == ["GET", "POST", "GET", "POST", "POST"]
    assert plan["requests"][1]["body"]["model"]["displayName"] == "digits"
    # Once the new version serves with all the traffic, the others left at 0% go (issue 40 item 3).
    assert plan["requests"][-1]["url"].endswith("/endpoints/ENDPOINT_ID:undeployModel")
    assert plan["undeploys"] == "every other deployed model left at 0%, once the new version serves"


def test_job_deploy_from_the_python_api(fake, storage, settings):
    put(storage, "runs/digits/digits-py-1/model/saved_model.pb")  # the job's own folder's model
    job = api.submit(spec(), idempotency_key="py-1", settings=settings, wait=True, log=lambda _: None)
    deployment = job.deploy()
    assert deployment.model_version == "1" and deployment.endpoint.endswith("/endpoints/digits")
    assert sent(fake, "upload")[0].body["model"]["labels"]["vertex-trainer-job"] == job.id


BAD = [
    ("deploy.machine_type=m9-standard-4", "deploy.machine_type", "not a machine type Vertex AI serves on"),
    ("deploy.accelerator_type=NVIDIA_TESLA_T5", "deploy.accelerator_type", "did you mean 'NVIDIA_TESLA_T4'"),
    ("deploy.traffic=120", "deploy.traffic", "less than or equal to 100"),
    ("deploy.max_replicas=0", "deploy.max_replicas", "greater than or equal to 1"),
    ("deploy.endpoint=projects/other/locations/us-central1/endpoints/5", "deploy.endpoint", "the job in"),
    ("deploy.serving_image=bad image", "deploy.serving_image", "space"),
    ("deploy.modl=x", "deploy.modl", "did you mean 'model'"),
]


@pytest.mark.parametrize(
    "setting,field,fragment", BAD, ids=[b[1] + "-" + b[0].split("=")[1][:12] for b in BAD]
)
def test_bad_deploy_values_are_exit_2(tmp_path, setting, field, fragment, fake):
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec().to_dict()))
    env = {**os.environ, "VERTEX_TRAINER_API_ENDPOINT": fake.url}
    proc = invoke(["deploy", str(path), "--job", "1", "--set", setting], env=env, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr and fragment in proc.stderr and "Traceback" not in proc.stderr
    assert fake.connections == 0


def cli_setup(fake, storage: str, tmp_path) -> tuple[Path, dict]:
    """The spec as a file, and the CLI's environment: the fake Vertex AI and the storage emulator."""
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec().to_dict()))
    return path, {
        **os.environ,
        "VERTEX_TRAINER_API_ENDPOINT": fake.url,
        "STORAGE_EMULATOR_HOST": storage,
        "VERTEX_TRAINER_POLL_INTERVAL": "0.01",
    }


def test_cli_deploy_prints_one_json_object(fake, storage, tmp_path):
    put(storage, "runs/digits/model/saved_model.pb")
    job = finished_job(fake)
    path, env = cli_setup(fake, storage, tmp_path)
    args = ["deploy", str(path), "--job", job, "--output", "json"]
    out = invoke(args, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result) == {
        "model",
        "model_version",
        "endpoint",
        "deployed_model_id",
        "traffic_split",
        "adopted",
        "undeployed",
    }
    assert result["adopted"] is False and sum(result["traffic_split"].values()) == 100
    assert result["undeployed"] == []  # nothing else was on the endpoint
    again = json.loads(invoke(args, env=env, cwd=ROOT).stdout)
    assert again == {**result, "adopted": True}


def test_submit_wait_deploy_trains_then_deploys_once(fake, storage, tmp_path):
    """Issue 10's "done when": `submit --wait --deploy` makes exactly one upload (artifactUri under
    the job's own folder below output_dir) and one deployModel; the same key again sends neither."""
    put(storage, "runs/digits/digits-ci-run-1/model/saved_model.pb")
    path, env = cli_setup(fake, storage, tmp_path)
    args = [
        "submit",
        str(path),
        "--deploy",
        "--output",
        "json",
        "--idempotency-key",
        "ci-run-1",
    ]
    out = invoke(args, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.lstrip().startswith("{"), out.stdout[:300]
    result = json.loads(out.stdout)  # exactly one JSON object
    assert result["state"] == "JOB_STATE_SUCCEEDED" and result["deploy"]["model_version"] == "1"
    (upload,) = sent(fake, "upload")
    assert upload.body["model"]["artifactUri"] == "gs://out-bucket/runs/digits/digits-ci-run-1/model"
    (deploy_call,) = sent(fake, "deploy")
    assert sum(deploy_call.body["trafficSplit"].values()) == 100

    again = json.loads(invoke(args, env=env, cwd=ROOT).stdout)
    assert again["adopted"] is True and again["deploy"]["adopted"] is True
    assert (
        len(sent(fake, "create")) == 1 and len(sent(fake, "upload")) == 1 and len(sent(fake, "deploy")) == 1
    )


def test_submit_deploy_of_a_failed_job_deploys_nothing(fake, storage, tmp_path):
    fake.set_script(["JOB_STATE_RUNNING", "JOB_STATE_FAILED"])
    path, env = cli_setup(fake, storage, tmp_path)
    out = invoke(["submit", str(path), "--deploy", "--output", "json"], env=env, cwd=ROOT)
    assert out.returncode == 1
    assert json.loads(out.stdout)["state"] == "JOB_STATE_FAILED"
    assert sent(fake, "upload") == [] and sent(fake, "deploy") == []


def test_cli_deploy_says_the_traffic_split_in_words(fake, storage, tmp_path):
    """issue 24 item 6: the split is a sentence on stdout and in the progress line, not a dict."""
    put(storage, "runs/digits/model/saved_model.pb")
    job = finished_job(fake)
    path, env = cli_setup(fake, storage, tmp_path)
    out = invoke(["deploy", str(path), "--job", job], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "traffic   100% to this version\n" in out.stdout
    assert "(traffic: 100% to the new version)" in out.stderr
    assert "{" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    "split,new,expected",
    [
        ({"0": 100}, "0", "100% to the new version"),
        (
            {"0": 70, "5": 20, "4": 10},
            "0",
            "70% to the new version, 20% to deployed model 5, 10% to deployed model 4",
        ),
        ({}, "0", "no traffic"),
    ],
)
def test_describe_split(split, new, expected):
    from vertex_trainer.vertex.model_deploy import describe_split

    assert describe_split(split, new) == expected
