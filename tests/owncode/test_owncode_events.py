"""`pipeline compile` and `trigger render` take a script job (issue 32 item 6): the pipeline's
train step is the one rendered CustomJob (your code's image and args), its deploy step reads the
model from AIP_MODEL_DIR (<the run's folder>/model) and needs a serving image of your own; the trigger's
function runs the pinned image with the spec's args."""

from __future__ import annotations

import pytest
import yaml

from tests.owncode.conftest import script_data

SERVING = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


@pytest.fixture
def spec_file(tmp_path, code_dir):
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(script_data(code_dir, args=["--epochs=2", "--data=gs://my-bucket/d"])))
    return path


def test_the_pipeline_trains_your_code_and_deploys_from_aip_model_dir(run_cli, spec_file, tmp_path):
    out = tmp_path / "pipeline.yaml"
    deploy = ["--set", "deploy.endpoint=own", "--set", f"deploy.serving_image={SERVING}"]
    key = ["--idempotency-key", "k1"]  # the run's own folder: <output_dir>/<name>-<key>
    result = run_cli("pipeline", "compile", spec_file, *deploy, *key, "-o", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "--data=gs://my-bucket/d" in text and "training/own:" in text  # the script job's pool
    assert "gs://my-bucket/runs/own/own-k1/model" in text and SERVING in text  # AIP_MODEL_DIR, served
    assert "gs://my-bucket/runs/own/model" not in text  # never the base, which every run shares


def test_deploy_auto_is_refused_for_a_script_job(run_cli, spec_file, tmp_path):
    result = run_cli(
        "pipeline", "compile", spec_file, "--set", "deploy.endpoint=own", "-o", tmp_path / "p.yaml"
    )
    assert result.returncode == 2
    assert "deploy.serving_image" in result.stderr and "trainer.serve" in result.stderr


def test_the_trigger_runs_the_pinned_image_with_the_args(run_cli, spec_file, tmp_path):
    out = tmp_path / "function"
    result = run_cli("trigger", "render", spec_file, "--bucket", "my-bucket", "-o", out)
    assert result.returncode == 0, result.stderr
    stored = yaml.safe_load((out / "spec.yaml").read_text())
    assert set(stored["image"]) == {"uri"} and "training/own:" in stored["image"]["uri"]
    assert stored["args"] == ["--epochs=2", "--data=gs://my-bucket/d"] and "trainer" not in stored
    # The advice names args: (a script job has no trainer: block to template).
    assert "no args: or env: value uses {{ trigger.folder }}" in result.stderr
