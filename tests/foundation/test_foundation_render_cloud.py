"""`render --format json|gcloud` prints what Vertex AI is sent, so it refuses what `validate`
refuses for a cloud job in the body (issue 40 item 4): a local output_dir or data path is exit 2
naming the field and its value; `--format yaml` (and `spec`) still show a local spec's body."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env, invoke
from vertex_trainer import api
from vertex_trainer.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
OWN_CODE = "examples/own-code/own-code.yaml"  # output_dir: runs/own-code (README's example)
LOCAL = "job_specs/quickstart-local.yaml"  # output_dir and data on this machine


def render(tmp_path, *args):
    return invoke(["render", *args], env=edge_env(tmp_path), cwd=ROOT)


@pytest.mark.parametrize(
    "form", [("--format", "gcloud"), ("--format", "json"), ()], ids=["gcloud", "json", "default"]
)
def test_a_local_output_dir_is_refused_naming_it(tmp_path, form):
    done = render(tmp_path, OWN_CODE, *form)
    assert done.returncode == 2 and done.stdout == ""
    first, hint = done.stderr.splitlines()
    # validate's own words for a cloud job, and the fix for render
    assert first == (
        "error: output_dir: must be a gs:// path for a cloud job (local paths work with --local) "
        "(got 'runs/own-code')"
    )
    assert f"`render --format {form[1] if form else 'json'}` prints what Vertex AI is sent" in hint
    assert "--set output_dir=gs://BUCKET/own-code" in hint and "--format yaml" in hint


def test_validate_refuses_the_same_field_in_the_same_words(tmp_path):
    validated = invoke(["validate", OWN_CODE], env=edge_env(tmp_path), cwd=ROOT)
    assert validated.returncode == 2
    assert (
        "output_dir: must be a gs:// path for a cloud job (local paths work with --local)" in validated.stderr
    )


def test_every_local_path_of_the_body_is_named(tmp_path):
    done = render(tmp_path, LOCAL, "--format", "gcloud")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: 3 problems in the spec:")
    for field, value in (
        ("output_dir", "runs/quickstart"),
        ("trainer.train_data", "data/quickstart/train-*"),
        ("trainer.eval_data", "data/quickstart/validation-*"),
    ):
        assert f"  {field}: " in done.stderr and repr(value) in done.stderr
    assert "project" not in done.stderr.replace("my-project", "")  # not in the body: not asked for


def test_the_readme_example_renders_with_a_cloud_output_dir(tmp_path):
    done = render(tmp_path, OWN_CODE, "--format", "gcloud", "--set", "output_dir=gs://my-bucket/own")
    assert done.returncode == 0, done.stderr
    assert "gcloud ai custom-jobs create" in done.stdout
    body = yaml.safe_load(done.stdout)
    assert body["baseOutputDirectory"]["outputUriPrefix"].startswith("gs://my-bucket/own")


@pytest.mark.parametrize("fmt", ["yaml", "spec"])
def test_yaml_and_the_spec_still_show_a_local_spec(tmp_path, fmt):
    done = render(tmp_path, OWN_CODE, "--format", fmt)
    assert done.returncode == 0, done.stderr
    shown = yaml.safe_load(done.stdout)
    if fmt == "yaml":
        assert "runs/own-code" in shown["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    else:
        assert shown["output_dir"] == "runs/own-code"


def test_the_python_api_refuses_the_same(tmp_path):
    spec = api.load_spec(ROOT / OWN_CODE)
    with pytest.raises(SpecError) as refused:
        api.render_text(spec, "gcloud")
    assert refused.value.field == "output_dir" and refused.value.value == "runs/own-code"
    assert refused.value.exit_code == 2
    assert "workerPoolSpecs" in api.render_text(spec, "yaml")
