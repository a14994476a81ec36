"""A script job in the spec (issue 32, docs/contract.md section 14): image.code with image.script or
image.module, args:, and what is refused, each with one message naming the field, the value and
the fix (exit 2)."""

from __future__ import annotations

import pytest

from tests.owncode.conftest import REPOSITORY, script_data, script_spec
from tests.shared import cli_runner
from vertex_trainer import render
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec, json_schema


def _refusal(data: dict) -> SpecError:
    with pytest.raises(SpecError) as info:
        build_spec(data)
    return info.value


def test_a_script_job_needs_no_trainer_and_is_not_the_bundled_trainer(code_dir):
    spec = script_spec(code_dir)
    assert spec.is_script_job and not spec.runs_bundled_trainer
    assert spec.trainer is None and spec.args == ("--epochs=2",)
    module = script_spec(code_dir, image={"script": None, "module": "trainer.task"})
    assert module.is_script_job and module.image.module == "trainer.task"


def test_trainer_is_refused_with_the_reason(code_dir):
    e = _refusal(script_data(code_dir, trainer={"train_data": "gs://b/x", "num_classes": 3}))
    assert e.field == "trainer"
    assert "not used by a script job" in e.message and "python task.py" in e.message
    assert "gs://b/x" in e.message  # the value given
    assert "args:" in e.hint


def test_the_bundled_trainer_still_requires_trainer():
    e = _refusal({"name": "x", "hardware": "cpu", "image": {"repository": REPOSITORY}})
    assert e.field == "trainer" and "is required" in e.message
    assert "image.code" in e.hint


@pytest.mark.parametrize(
    ("image", "field", "words"),
    [
        ({"module": "trainer.task"}, "image.code", "both are set"),
        ({"script": None}, "image.code", "neither is set"),
        ({"script": "../outside.py"}, "image.script", "relative path"),
        ({"script": "task.py; rm -rf /"}, "image.script", "a semicolon"),
        ({"script": 'task".py'}, "image.script", "a double quote"),
        ({"script": "task.sh"}, "image.script", ".py"),
        ({"script": None, "module": "trainer-task"}, "image.module", "module name"),
        ({"script": None, "module": "a.b\nRUN x"}, "image.module", "a newline"),
        ({"requirements": ["pandas;rm"]}, "image.requirements[0]", "a semicolon"),
        ({"requirements": ["--index-url=http://evil"]}, "image.requirements[0]", "plain pip requirement"),
        ({"code": "dir\nRUN x"}, "image.code", "control character"),
        ({"uri": "gcr.io/x/y:1", "repository": None}, "image.uri", "does not go with image.code"),
        ({"pip_packages": ["pandas"]}, "image.pip_packages", "image.requirements"),
        ({"base_image": "python:latest"}, "image.base_image", "pinned"),
    ],
)
def test_bad_image_values_name_the_field(code_dir, image, field, words):
    e = _refusal(script_data(code_dir, image=image))
    assert e.field == field, e.message
    assert words in e.message + (e.hint or "")


def test_script_without_code_is_refused():
    e = _refusal(
        {
            "name": "x",
            "hardware": "cpu",
            "image": {"repository": REPOSITORY, "script": "t.py"},
            "trainer": {"train_data": "x", "num_classes": 2},
        }
    )
    assert e.field == "image.script" and "image.code" in e.message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"command": ["sh", "-c", "x"]}, "command"),
        # tune: is taken (its trials pass --NAME=VALUE to the script): tests/owncode/test_owncode_tune.py
    ],
)
def test_what_a_script_job_cannot_take(code_dir, changes, field):
    assert _refusal(script_data(code_dir, **changes)).field == field


def test_args_with_the_bundled_trainer_point_to_extra_args():
    e = _refusal(
        {
            "name": "x",
            "hardware": "cpu",
            "args": ["--x"],
            "trainer": {"train_data": "gs://b/t", "num_classes": 2},
        }
    )
    assert e.field == "args" and "extra_args" in e.hint


def test_an_image_of_your_own_takes_args_and_command():
    spec = build_spec(
        {
            "name": "x",
            "region": "us-central1",
            "hardware": "cpu",
            "image": {"uri": "gcr.io/my-project-1/mine:1"},
            "command": ["python", "-m", "mine.train"],
            "args": ["--steps={{ 2 * 5 }}"],  # templated like every string
        }
    )
    pool = render.custom_job(spec)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert pool == {
        "imageUri": "gcr.io/my-project-1/mine:1",
        "command": ["python", "-m", "mine.train"],
        "args": ["--steps=10"],
    }
    e = _refusal(
        {
            "name": "x",
            "hardware": "cpu",
            "image": {"uri": "gcr.io/my-project-1/mine:1"},
            "args": ["--a"],
            "trainer": {"train_data": "gs://b/t", "num_classes": 2},
        }
    )
    assert e.field == "args" and "both" in e.message


def test_the_schema_has_the_new_fields():
    schema = json_schema()
    image = schema["$defs"]["ImageSpec"]["properties"]
    assert {"code", "script", "module", "requirements", "base_image"} <= set(image)
    assert {"args", "command", "trainer"} <= set(schema["properties"])
    assert "trainer" not in schema.get("required", [])


def test_specs_without_the_new_fields_keep_their_hash(code_dir):
    # to_dict leaves empty new fields out: the spec label of existing specs does not move.
    spec = build_spec({"name": "x", "hardware": "cpu", "trainer": {"train_data": "t", "num_classes": 2}})
    assert "args" not in spec.to_dict() and "command" not in spec.to_dict()
    assert script_spec(code_dir).to_dict()["args"] == ["--epochs=2"]


def test_validate_refuses_trainer_with_exit_2(tmp_path, code_dir):
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(script_data(code_dir, trainer={"train_data": "gs://b/x", "num_classes": 3}))
    )
    run = cli_runner({})
    result = run("validate", path)
    assert result.returncode == 2, result.stderr
    assert "trainer: is not used by a script job" in result.stderr
    assert "Traceback" not in result.stderr
