"""JobSpec loading: templates, --set, durations, project/region resolution, invalid specs."""

from __future__ import annotations

import subprocess

import pytest
from pydantic import ValidationError

from vertex_trainer.errors import SpecError, SpecProblems, UserError
from vertex_trainer.spec import (
    JobSpec,
    build_spec,
    check_trainer_flags,
    cloud_problems,
    json_schema,
    load_spec,
    spec_hash,
)


def test_preset_expands_to_explicit_hardware(base_spec):
    spec = build_spec(base_spec)
    assert spec.hardware.machine_type == "a2-highgpu-8g"
    assert spec.hardware.accelerator_type == "NVIDIA_TESLA_A100"
    assert spec.hardware.accelerator_count == 8
    assert spec.hardware.preset == "a100x8"
    assert spec.total_devices == 8


def test_spec_is_frozen(base_spec):
    spec = build_spec(base_spec)
    with pytest.raises(ValidationError) as e:
        spec.name = "other"
    assert e.value.errors()[0]["type"] == "frozen_instance"
    with pytest.raises(ValidationError):
        spec.trainer.batch_size = 1
    assert spec.name == "base-job" and spec.trainer.batch_size == 2048


def test_every_way_of_building_a_jobspec_runs_the_cross_field_rules(base_spec):
    base_spec["hardware"] = build_spec(base_spec).hardware.model_dump()
    base_spec["trainer"]["batch_size"] = 1001  # not a multiple of 8 devices
    with pytest.raises(SpecError) as e:
        JobSpec.model_validate(base_spec)  # bypassing build_spec
    assert e.value.field == "trainer.batch_size" and "e.g. 1008" in e.value.hint


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90s", 90),
        ("30m", 1800),
        ("4h", 14400),
        ("2d", 172800),
        ("1h30m", 5400),
        (0, 0),
        ("0", 0),
        (3600, 3600),
        ("7d", 604800),
    ],
)
def test_durations(base_spec, text, seconds):
    base_spec["hardware"] = "h100x8"
    base_spec["scheduling"] = {"strategy": "flex-start", "max_wait": text}
    assert build_spec(base_spec).scheduling.max_wait == seconds


def test_set_overrides_with_type_coercion(base_spec):
    spec = build_spec(
        base_spec,
        sets=[
            "scheduling.strategy=spot",
            "trainer.batch_size=4096",
            "trainer.learning_rate=0.2",
            "labels.team=vision",
            "scheduling.restart_on_worker_restart=true",
        ],
    )
    assert spec.scheduling.strategy == "spot"
    assert spec.trainer.batch_size == 4096 and isinstance(spec.trainer.batch_size, int)
    assert spec.trainer.learning_rate == 0.2
    assert spec.labels == {"team": "vision"}
    assert spec.scheduling.restart_on_worker_restart is True


def test_set_on_a_preset_expands_it(base_spec):
    base_spec["hardware"] = "v100x4"
    spec = build_spec(
        base_spec,
        sets=[
            "hardware.accelerator_count=2",
            "hardware.machine_type=n1-standard-16",
            "trainer.batch_size=1024",
        ],
    )
    assert (spec.hardware.machine_type, spec.hardware.accelerator_count) == ("n1-standard-16", 2)


def test_override_order_file_set_flags(base_spec):
    spec = build_spec(
        base_spec,
        sets=["region=europe-west4", "project=set-project"],
        project="flag-project",
        region="us-east1",
    )
    assert (spec.project, spec.region) == ("flag-project", "us-east1")
    spec = build_spec(base_spec, sets=["region=europe-west4"])
    assert spec.region == "europe-west4"


def test_templates_env_vars_name_timestamp(base_spec):
    base_spec["name"] = "job-{{ env.USER }}-{{ run }}"
    base_spec["output_dir"] = "gs://bkt/runs/{{ name }}/{{ timestamp }}"
    spec = build_spec(base_spec, vars={"run": "7"}, environ={"USER": "alice"})
    assert spec.name == "job-alice-7"
    assert spec.output_dir.startswith("gs://bkt/runs/job-alice-7/2")
    assert len(spec.output_dir.rsplit("/", 1)[1]) == len("20261129-120000")


def test_env_templates_read_only_the_given_environ(base_spec, monkeypatch):
    monkeypatch.setenv("VT_SECRET", "leak")  # the process environment is not the spec's business
    base_spec["labels"] = {"who": "{{ env.VT_SECRET | default('nobody') }}"}
    assert build_spec(base_spec).labels == {"who": "nobody"}
    assert build_spec(base_spec, environ={"VT_SECRET": "given"}).labels == {"who": "given"}
    base_spec["labels"] = {"who": "{{ env.VT_SECRET }}"}
    with pytest.raises(SpecError) as e:
        build_spec(base_spec)
    assert e.value.field == "labels.who" and "VT_SECRET" in e.value.message and "default(" in e.value.hint


def test_templates_are_sandboxed(base_spec):
    base_spec["labels"] = {"x": "{{ ''.__class__.__mro__ }}"}
    with pytest.raises(SpecError) as e:
        build_spec(base_spec)
    assert e.value.field == "labels.x" and "unsafe" in e.value.message
    base_spec["labels"] = {"x": "{{ 1 / 0 }}"}
    with pytest.raises(SpecError) as e:
        build_spec(base_spec)
    assert e.value.field == "labels.x" and "ZeroDivisionError" in e.value.message


def test_template_git_sha(base_spec, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "x"], cwd=repo, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    base_spec["labels"] = {"commit": "{{ git_sha }}"}
    assert build_spec(base_spec, base_dir=repo).labels["commit"] == sha


def test_undefined_template_variable_is_an_error(base_spec):
    base_spec["output_dir"] = "gs://b/{{ nope }}"
    with pytest.raises(SpecError) as e:
        build_spec(base_spec)
    assert e.value.field == "output_dir" and "nope" in str(e.value)


def test_project_and_region_defaults_apply_only_when_nothing_else_gives_one(base_spec, monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")  # read by the edge, never by spec/
    defaults = {"default_project": "default-project", "default_region": "europe-west4"}
    del base_spec["project"], base_spec["region"]
    assert build_spec(base_spec, region="us-central1").project is None
    spec = build_spec(base_spec, **defaults)
    assert (spec.project, spec.region) == ("default-project", "europe-west4")
    spec = build_spec(base_spec, sets=["project=set-project"], region="us-east1", **defaults)
    assert (spec.project, spec.region) == ("set-project", "us-east1")
    spec = build_spec({**base_spec, "project": "file-project", "region": "us-west1"}, **defaults)
    assert (spec.project, spec.region) == ("file-project", "us-west1")


def test_missing_region_is_an_error_only_for_a_cloud_job(base_spec):
    """A local-only spec needs no region and no image (issue 15); a cloud submit names both."""
    del base_spec["region"]
    del base_spec["image"]
    spec = build_spec(base_spec)
    assert spec.region is None and spec.image is None and spec.runs_bundled_trainer
    with pytest.raises(SpecProblems) as e:
        cloud_problems(spec)
    fields = [p.field for p in e.value.problems]
    assert fields == ["region", "image"]
    assert "--region" in e.value.problems[0].hint and "image.repository" in e.value.problems[1].hint


def test_spec_hash_is_stable_and_label_safe(base_spec):
    a, b = build_spec(base_spec), build_spec(base_spec)
    assert spec_hash(a) == spec_hash(b)
    assert len(spec_hash(a)) <= 63 and spec_hash(a).isalnum() and spec_hash(a).islower()
    assert spec_hash(build_spec(base_spec, sets=["trainer.batch_size=4096"])) != spec_hash(a)


def test_yaml_syntax_error_names_the_line(write_spec):
    path = write_spec("name: x\nregion: us-central1\nhardware: [cpu\n")
    with pytest.raises(UserError) as e:
        load_spec(path)
    assert "line 4" in str(e.value) or "line 3" in str(e.value)


def test_duplicate_key_is_an_error(write_spec):
    path = write_spec("name: a\nname: b\n")
    with pytest.raises(UserError) as e:
        load_spec(path)
    assert "duplicate key 'name'" in str(e.value) and "line 2" in str(e.value)


def test_json_schema_offers_presets_and_forbids_extra_keys():
    schema = json_schema()
    presets = schema["properties"]["hardware"]["anyOf"][0]["anyOf"][0]["enum"]
    assert "h100x8" in presets and "tpu-v5e-8" in presets
    assert schema["additionalProperties"] is False
    assert "max_wait" in schema["$defs"]["Scheduling"]["properties"]


def test_trainer_args_are_kebab_case(base_spec):
    base_spec["trainer"].update({"steps_per_execution": 200, "extra_args": ["--foo", "bar"]})
    args = build_spec(base_spec).trainer.to_args()
    assert "--train-data=gs://my-bucket/train-*" in args
    assert "--steps-per-execution=200" in args
    assert args[-2:] == ["--foo", "bar"]


def test_trainer_flags_are_checked_by_the_api_not_the_model(base_spec):
    # image.uri: that image's trainer decides; the spec only checks the model name's shape.
    base_spec["trainer"]["model"] = "my-own-model"
    spec = build_spec(base_spec)
    assert spec.trainer.model == "my-own-model" and not spec.runs_bundled_trainer
    # The bundled trainer refuses it, but only when asked (api.load_spec asks for bundled specs).
    base_spec["image"] = {"repository": "us-docker.pkg.dev/p/r/trainer"}
    spec = build_spec(base_spec)
    assert spec.runs_bundled_trainer
    with pytest.raises(SpecError) as e:
        check_trainer_flags(spec)
    assert e.value.field == "trainer.model" and "invalid choice: 'my-own-model'" in e.value.message
