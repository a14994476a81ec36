"""`deploy` of a script job with no `deploy:` block: the default serving_image, auto, runs the
bundled trainer's `python -m trainer.serve`, which a script job's image does not have. It is
exit 2 naming deploy.serving_image and the fix before anything is sent, as an explicit `auto`
is at load; a model factory job trains (and serves) with the bundled trainer, so auto stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import script_data
from tests.shared import cli_runner
from vertex_trainer.contract import SERVE_MODULE
from vertex_trainer.deployment import deploy_request as deployment
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.deploy_block import PREDICTION_IMAGE

JOB = "projects/my-project-1/locations/us-central1/customJobs/123"
MODEL = "gs://my-bucket/runs/own/model"


@pytest.fixture
def run(tmp_path):
    return cli_runner(edge_env(tmp_path), cwd=tmp_path)  # dry runs and refusals: nothing is sent


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("deploy", "--job", JOB, "--dry-run"),
        ("deploy", "--model-dir", MODEL, "--dry-run"),
        ("submit", "--deploy", "--dry-run"),
    ],
)
def test_a_script_job_with_no_deploy_block_is_refused_the_default_auto(run, tmp_path, code_dir, args):
    path = write(tmp_path, script_data(code_dir))
    result = run(args[0], path, *args[1:])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "deploy.serving_image: defaults to auto (the spec has no deploy: block)" in result.stderr
    assert "trainer.serve" in result.stderr and PREDICTION_IMAGE in result.stderr  # the fix
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_the_same_rule_as_an_explicit_auto(code_dir):
    with pytest.raises(SpecError) as said:
        build_spec(script_data(code_dir, deploy={"serving_image": "auto"}))
    spec = build_spec(script_data(code_dir))
    with pytest.raises(SpecError) as defaulted:
        deployment.request(spec, MODEL, "123", "us-central1-docker.pkg.dev/my-project-1/training/own:abc")
    assert said.value.field == defaulted.value.field == "deploy.serving_image"
    assert said.value.hint == defaulted.value.hint and "is auto: auto serves" in said.value.message


def test_a_script_job_deploys_with_the_serving_image_it_names(run, tmp_path, code_dir):
    path = write(tmp_path, script_data(code_dir, deploy={"serving_image": PREDICTION_IMAGE}))
    result = run("deploy", path, "--job", JOB, "--dry-run", "--output", "json")
    assert result.returncode == 0, result.stderr
    (upload,) = [r for r in json.loads(result.stdout)["requests"] if r["url"].endswith("models:upload")]
    container = upload["body"]["model"]["containerSpec"]
    assert container["imageUri"] == PREDICTION_IMAGE and "command" not in container


def test_a_model_factory_job_keeps_auto(run, tmp_path):
    code = tmp_path / "code"
    (code / "models").mkdir(parents=True)
    (code / "models" / "__init__.py").write_text("")
    (code / "models" / "net.py").write_text("def build(num_classes, image_size, dtype):\n    return None\n")
    data = {
        "name": "factory",
        "project": "my-project-1",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"code": str(code), "repository": "us-central1-docker.pkg.dev/my-project-1/training/t"},
        "output_dir": "gs://my-bucket/runs/factory",
        "trainer": {"model": "models.net:build", "train_data": "gs://my-bucket/d/train-*", "num_classes": 3},
    }
    result = run("deploy", write(tmp_path, data), "--job", JOB, "--dry-run", "--output", "json")
    assert result.returncode == 0, result.stderr
    (upload,) = [r for r in json.loads(result.stdout)["requests"] if r["url"].endswith("models:upload")]
    assert upload["body"]["model"]["containerSpec"]["command"] == ["python", "-m", SERVE_MODULE]
