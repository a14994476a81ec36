"""The tune: block: what it renders to (checked with the real aiplatform_v1 types), what it refuses
(exit 2, the dotted field and the fix), and the local search's trials and flags."""

from __future__ import annotations

import json
import re

import pytest

from vertex_trainer import render
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec
from vertex_trainer.tuning import tuning_run as tuning

from .conftest import spec_data, write_spec


def _spec(change=None):
    data = spec_data()
    if change:
        change(data)
    return build_spec(data)


def _parsed(body: dict) -> dict:
    """The body through aiplatform_v1.HyperparameterTuningJob (unknown fields would raise)."""
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob
    from google.protobuf import json_format

    message = json_format.ParseDict(body, HyperparameterTuningJob.pb(HyperparameterTuningJob()))
    return json_format.MessageToDict(message)


def test_the_contract_example_renders_a_study_with_each_parameter_type_and_scale():
    spec = _spec()
    job = render.custom_job(spec, idempotency_key="key-1")
    body = render.tuning_job(spec, job)
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob, StudySpec
    from google.protobuf import json_format

    message = json_format.ParseDict(body, HyperparameterTuningJob.pb(HyperparameterTuningJob()))
    proto = HyperparameterTuningJob.wrap(message)
    study = proto.study_spec
    assert [(m.metric_id, m.goal) for m in study.metrics] == [
        ("accuracy", StudySpec.MetricSpec.GoalType.MAXIMIZE)
    ]
    assert study.algorithm == StudySpec.Algorithm.ALGORITHM_UNSPECIFIED
    P = StudySpec.ParameterSpec
    by_id = {p.parameter_id: p for p in study.parameters}
    assert list(by_id) == ["learning-rate", "warmup-epochs", "batch-size", "optimizer"]
    lr, warmup, batch, optimizer = by_id.values()
    assert P.pb(lr).WhichOneof("parameter_value_spec") == "double_value_spec"
    assert (lr.double_value_spec.min_value, lr.double_value_spec.max_value) == (0.01, 1.0)
    assert lr.scale_type == P.ScaleType.UNIT_LOG_SCALE
    assert P.pb(warmup).WhichOneof("parameter_value_spec") == "integer_value_spec"
    assert (warmup.integer_value_spec.min_value, warmup.integer_value_spec.max_value) == (0, 5)
    assert warmup.scale_type == P.ScaleType.UNIT_LINEAR_SCALE
    assert P.pb(batch).WhichOneof("parameter_value_spec") == "discrete_value_spec"
    assert list(batch.discrete_value_spec.values) == [256.0, 512.0, 1024.0]
    assert P.pb(optimizer).WhichOneof("parameter_value_spec") == "categorical_value_spec"
    assert list(optimizer.categorical_value_spec.values) == ["sgd", "lamb"]
    assert optimizer.scale_type == P.ScaleType.SCALE_TYPE_UNSPECIFIED
    assert (proto.max_trial_count, proto.parallel_trial_count, proto.max_failed_trial_count) == (16, 4, 2)
    # One render: each trial runs the CustomJob's own jobSpec; the job's name and labels too.
    assert body["trialJobSpec"] == job["jobSpec"]
    assert proto.display_name == "tune-test" and dict(proto.labels) == job["labels"]
    assert proto.labels["vertex-trainer-key"] == "key-1"


@pytest.mark.parametrize("algorithm, name", [("grid", "GRID_SEARCH"), ("random", "RANDOM_SEARCH")])
def test_algorithm_goal_and_reverse_log_scale(algorithm, name):
    def change(d):
        d["tune"].update(algorithm=algorithm, goal="minimize")
        d["tune"]["parameters"] = {
            "label_smoothing": {"values": [0.0, 0.1]},
            "momentum": {"values": [0.8, 0.9, 0.95], "scale": "reverse_log"},
            "cache": {"values": [True, False]},
        }

    study = _parsed(render.tuning_job(s := _spec(change), render.custom_job(s)))["studySpec"]
    assert study["algorithm"] == name and study["metrics"][0]["goal"] == "MINIMIZE"
    smoothing, momentum, cache = study["parameters"]
    assert smoothing["discreteValueSpec"]["values"] == [0.0, 0.1]
    assert momentum["scaleType"] == "UNIT_REVERSE_LOG_SCALE"
    assert cache["categoricalValueSpec"]["values"] == ["true", "false"]


# -- refused values: exit 2, the dotted field, the fix --------------------------------------------

BAD = {
    "unknown parameter": (
        lambda d: d["tune"]["parameters"].update(learning_rat={"min": 0.1, "max": 1}),
        "tune.parameters.learning_rat",
        "did you mean 'learning_rate'",
    ),
    "min >= max": (
        lambda d: d["tune"]["parameters"].update(learning_rate={"min": 1.0, "max": 0.1}),
        "tune.parameters.learning_rate.min",
        "swap them",
    ),
    "log scale min <= 0": (
        lambda d: d["tune"]["parameters"].update(learning_rate={"min": 0, "max": 1.0, "scale": "log"}),
        "tune.parameters.learning_rate.min",
        "raise min above 0",
    ),
    "parallel > max": (
        lambda d: d["tune"].update(max_trials=2),
        "tune.parallel_trials",
        "parallel_trials <= 2",
    ),
    "outside the field's bounds": (
        lambda d: d["tune"]["parameters"].update(label_smoothing={"min": 0.0, "max": 1.5}),
        "tune.parameters.label_smoothing.max",
        "in [0, 1)",
    ),
    "outside the field's choices": (
        lambda d: d["tune"]["parameters"].update(optimizer={"values": ["sgd", "adam"]}),
        "tune.parameters.optimizer.values[1]",
        "adamw",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_tune_values_are_exit_2_with_the_field_and_the_fix(case, run_cli, tmp_path):
    change, field, fix = BAD[case]
    result = run_cli("validate", write_spec(tmp_path, change))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert f"error: {field}:" in result.stderr and fix in result.stderr, result.stderr


@pytest.mark.parametrize(
    "change, field, words",
    [
        (lambda d: d["tune"].update(metric="loss"), "tune.metric", "trainer.hypertune_metric: loss"),
        (lambda d: d["trainer"].pop("eval_data"), "trainer.eval_data", "evaluation"),
        (lambda d: d["tune"].update(algorithm="grid"), "tune.parameters.learning_rate", "grid search"),
        (
            lambda d: d["tune"]["parameters"].update(batch_size={"min": 64, "max": 512}),
            None,
            None,
        ),  # an int field's range is an integer range: fine
        (
            lambda d: d["tune"]["parameters"].update(batch_size={"min": 64, "max": 512, "type": "double"}),
            "tune.parameters.batch_size.type",
            "type: integer",
        ),
        (
            lambda d: d["tune"]["parameters"].update(hypertune_metric={"values": ["a", "b"]}),
            "tune.parameters.hypertune_metric",
            "trainer: field",
        ),
        (
            lambda d: d["tune"]["parameters"].update(batch_size={"values": [256, 256]}),
            "tune.parameters.batch_size.values[1]",
            "twice",
        ),
        (
            lambda d: d["tune"]["parameters"].update(batch_size={"values": [64.5]}),
            "tune.parameters.batch_size.values[0]",
            "valid trainer.batch_size",
        ),
        (lambda d: d.update(hardware="v100x4"), None, None),  # 256, 512 and 1024 split over 4 GPUs
        (lambda d: d.update(hardware="v100x8", trainer={**d["trainer"], "batch_size": 512}), None, None),
        (
            lambda d: (
                d.update(hardware="v100x4"),
                d["tune"]["parameters"].update(batch_size={"values": [256, 258]}),
            ),
            "tune.parameters.batch_size.values[1]",
            "multiple of 4",
        ),
    ],
)
def test_rules_between_tune_and_the_rest_of_the_spec(change, field, words):
    if field is None:
        assert _spec(change).tune is not None
        return
    with pytest.raises(SpecError) as info:
        _spec(change)
    problems = {p.field: p for p in info.value.problems}
    assert field in problems, info.value.message
    assert words in problems[field].message + (problems[field].hint or ""), info.value.message


# -- the local search -----------------------------------------------------------------------------


def test_grid_trials_are_every_combination_in_order_up_to_max_trials():
    def change(d):
        d["tune"].update(algorithm="grid", max_trials=5, parallel_trials=1)
        d["tune"]["parameters"] = {
            "warmup_epochs": {"min": 0, "max": 1, "type": "integer"},
            "batch_size": {"values": [512, 256]},
            "optimizer": {"values": ["sgd", "lamb"]},
        }

    planned = tuning.plan_trials(_spec(change))
    assert planned == [
        {"warmup_epochs": 0, "batch_size": 256, "optimizer": "sgd"},
        {"warmup_epochs": 0, "batch_size": 256, "optimizer": "lamb"},
        {"warmup_epochs": 0, "batch_size": 512, "optimizer": "sgd"},
        {"warmup_epochs": 0, "batch_size": 512, "optimizer": "lamb"},
        {"warmup_epochs": 1, "batch_size": 256, "optimizer": "sgd"},
    ]


def test_random_trials_are_seeded_within_range_and_passed_as_vertex_passes_them():
    spec = _spec()
    planned = tuning.plan_trials(spec)
    assert planned == tuning.plan_trials(spec) and len(planned) == 16
    assert len({json.dumps(p, sort_keys=True) for p in planned}) == 16
    for p in planned:
        assert 0.01 <= p["learning_rate"] <= 1.0 and p["warmup_epochs"] in range(6)
        assert p["batch_size"] in (256, 512, 1024) and p["optimizer"] in ("sgd", "lamb")
    # A log scale spreads the draws over the decades: some below 0.1, some above.
    assert min(p["learning_rate"] for p in planned) < 0.1 < max(p["learning_rate"] for p in planned)
    other_seed = build_spec({**spec_data(), "trainer": {**spec_data()["trainer"], "seed": 7}})
    assert tuning.plan_trials(other_seed) != planned
    args = tuning.trial_args(
        spec, {"learning_rate": 0.05, "warmup_epochs": 3, "batch_size": 512, "optimizer": "lamb"}
    )
    # Vertex AI appends --<parameter id>=<value>: DISCRETE values as doubles.
    assert args == ["--learning-rate=0.05", "--warmup-epochs=3", "--batch-size=512.0", "--optimizer=lamb"]


def test_the_trainer_reads_a_discrete_integer_passed_as_a_double():
    from trainer.config import UsageError, parse_flags

    dirs = ["--model-dir=/m", "--checkpoint-dir=/c", "--tensorboard-dir=/t"]
    base = ["--train-data=/d/train-*", "--num-classes=10", "--batch-size=64", *dirs]
    assert parse_flags(base + ["--batch-size=512.0"]).batch_size == 512
    with pytest.raises(UsageError, match=re.escape("invalid int value: '512.5'")):
        parse_flags(base + ["--batch-size=512.5"])


def test_trial_job_appends_the_flags_and_gives_the_trial_its_own_output():
    spec = _spec(lambda d: d.update(replicas=2))
    job = render.custom_job(spec)
    trial = tuning.trial_job(job, "3", "/runs/tune/3", ["--learning-rate=0.1"])
    for before, after in zip(
        job["jobSpec"]["workerPoolSpecs"], trial["jobSpec"]["workerPoolSpecs"], strict=True
    ):
        assert after["containerSpec"]["args"] == before["containerSpec"]["args"] + ["--learning-rate=0.1"]
    assert trial["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "/runs/tune/3"}
    assert job["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://test-bucket/runs/tune"}


def test_read_reported_takes_the_last_report_of_the_metric(tmp_path):
    path = tmp_path / "output.metrics"
    assert tuning.read_reported(str(path), "accuracy") is None
    path.write_text(
        '{"accuracy": "0.5", "global_step": "10"}\n{"loss": "0.3"}\n'
        '{"accuracy": "0.75", "global_step": "20"}\n'
    )
    assert tuning.read_reported(str(path), "accuracy") == 0.75
    assert tuning.read_reported(str(path), "auc") is None


def test_local_dry_run_lists_the_trials_and_runs_nothing(run_cli, tmp_path):
    spec = write_spec(
        tmp_path,
        lambda d: (
            d.update(output_dir=str(tmp_path / "runs")),
            d["tune"].update(max_trials=3, parallel_trials=2),
        ),
    )
    result = run_cli("submit", spec, "--local", "--dry-run", "--output", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["dry_run"] and out["local"] and len(out["trials"]) == 3
    assert out["trials"][0]["args"][0].startswith("--learning-rate=")
    assert "studySpec" in out["requests"][0]["body"]
    assert not (tmp_path / "runs").exists()


def test_exponent_notation_is_a_number_not_a_category():
    import yaml

    def change(d):  # PyYAML reads 1e-3 as text; the spec reads it as the number it is
        d["tune"]["parameters"] = yaml.safe_load(
            "learning_rate: {values: [1e-1, 1e-3, 1e-2]}\nweight_decay: {min: 1e-6, max: 1e-3, scale: log}"
        )

    spec = _spec(change)
    assert spec.tune.kind("learning_rate") == "discrete" and spec.tune.kind("weight_decay") == "double"
    study = _parsed(render.tuning_job(spec, render.custom_job(spec)))["studySpec"]
    assert study["parameters"][0]["discreteValueSpec"]["values"] == [0.001, 0.01, 0.1]
    assert study["parameters"][1]["doubleValueSpec"] == {"minValue": 1e-6, "maxValue": 1e-3}
