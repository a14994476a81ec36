"""`tune:` for a script job (issue 32 item 6): each trial passes its values to your code as
`--NAME=VALUE` after the job's args, as Vertex AI's HyperparameterTuningJob does for a custom
container or a python package; the script reports its metric with cloudml-hypertune.

Pure tests render the tuning job (checked with the v1 API's own HyperparameterTuningJob) and the
trials' args; one real local study runs examples/own-code-tune (a script with no TensorFlow: it
scores its arguments), through the Python API."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.owncode.conftest import script_data, script_spec
from tests.shared import ROOT, records
from vertex_trainer import api, render
from vertex_trainer.errors import SpecError, SpecProblems
from vertex_trainer.packaging import plan_artifact
from vertex_trainer.sandbox.tuning import as_tune_spec
from vertex_trainer.settings import Settings
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.tune import PARAMS_LABEL, VERBATIM
from vertex_trainer.tuning.tuning_run import plan_trials, trial_args, trial_job
from vertex_trainer.vertex.hptuning import TuningJob

EXAMPLE = ROOT / "examples" / "own-code-tune" / "tune.yaml"
TUNE = {
    "metric": "val_auc",
    "goal": "maximize",
    "max_trials": 4,
    "parallel_trials": 2,
    "algorithm": "grid",
    "parameters": {
        "learning_rate": {"values": [0.01, 0.1]},  # the script's own spelling: --learning_rate
        "num-layers": {"min": 2, "max": 3},  # whole numbers: INTEGER
        "optimizer": {"values": ["adam"]},
    },
}


def _v1_tuning(body: dict):
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob
    from google.protobuf import json_format

    message = HyperparameterTuningJob.pb(HyperparameterTuningJob())
    return HyperparameterTuningJob.wrap(json_format.ParseDict(body, message, ignore_unknown_fields=False))


def _tuned(code_dir: Path, **changes):
    return script_spec(code_dir, tune=TUNE, **changes)


@pytest.mark.parametrize("mode", ["image", "python_package"])
def test_the_tuning_job_runs_the_scripts_pool_with_its_args(code_dir, mode):
    image = {"python_package": True, "repository": None} if mode == "python_package" else {}
    spec = _tuned(code_dir, image=image, replicas=2)
    plan = api.plan_submit(spec, settings=Settings())
    assert plan.kind == "tuning" and plan.tuning is not None
    body = plan.tuning
    # The trial job spec is the script job's own CustomJob: its pools, its code, its base args.
    assert body["trialJobSpec"] == plan.body["jobSpec"]
    key = "containerSpec" if mode == "image" else "pythonPackageSpec"
    pools = body["trialJobSpec"]["workerPoolSpecs"]
    assert [p[key]["args"] for p in pools] == [["--epochs=2"], ["--epochs=2"]]
    if mode == "python_package":
        assert pools[0][key]["pythonModule"] == "vertex_trainer_script.task"
    study = body["studySpec"]
    assert study["metrics"] == [{"metricId": "val_auc", "goal": "MAXIMIZE"}]
    assert [
        (p["parameterId"], next(k for k in p if k.endswith("ValueSpec"))) for p in study["parameters"]
    ] == [
        ("learning_rate", "discreteValueSpec"),  # the name as written: no trainer flag spelling
        ("num-layers", "integerValueSpec"),
        ("optimizer", "categoricalValueSpec"),
    ]
    assert body["labels"][PARAMS_LABEL] == VERBATIM
    parsed = _v1_tuning(body)  # the v1 API's message takes every field
    assert parsed.study_spec.parameters[1].integer_value_spec.max_value == 3
    assert list(parsed.trial_job_spec.worker_pool_specs[0].container_spec.args or []) in ([], ["--epochs=2"])


def test_an_image_of_your_own_given_args_tunes_them_the_same_way():
    """image.uri with args: (no trainer:) is the same contract: the container's args, then the
    trial's --NAME=VALUE."""
    spec = build_spec(
        {
            "name": "own-image",
            "project": "my-project-1",
            "region": "us-central1",
            "hardware": "cpu",
            "image": {"uri": "us-docker.pkg.dev/p/r/mine:v1"},
            "output_dir": "gs://my-bucket/runs/own-image",
            "args": ["--data=gs://my-bucket/d"],
            "tune": {"parameters": {"lr": {"min": 0.001, "max": 0.1, "scale": "log"}}},
        }
    )
    body = render.tuning_job(spec, render.custom_job(spec))
    (param,) = body["studySpec"]["parameters"]
    assert (
        param["parameterId"] == "lr" and param["scaleType"] == "UNIT_LOG_SCALE" and "doubleValueSpec" in param
    )
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] == ["--data=gs://my-bucket/d"]
    _v1_tuning(body)


def test_a_bundled_trainer_study_keeps_its_flag_ids_and_labels():
    from tests.tuning.conftest import spec_data

    spec = build_spec(spec_data())
    body = render.tuning_job(spec, render.custom_job(spec, plan_artifact(spec)))
    assert [p["parameterId"] for p in body["studySpec"]["parameters"]][:2] == [
        "learning-rate",
        "warmup-epochs",
    ]
    assert PARAMS_LABEL not in body["labels"]


def test_each_trial_appends_its_values_after_the_jobs_args(code_dir):
    spec = _tuned(code_dir)
    planned = plan_trials(spec)
    assert planned == [
        {"learning_rate": 0.01, "num-layers": 2, "optimizer": "adam"},
        {"learning_rate": 0.01, "num-layers": 3, "optimizer": "adam"},
        {"learning_rate": 0.1, "num-layers": 2, "optimizer": "adam"},
        {"learning_rate": 0.1, "num-layers": 3, "optimizer": "adam"},
    ]
    job = render.custom_job(spec, plan_artifact(spec))
    body = trial_job(job, "3", "gs://my-bucket/runs/own/3", trial_args(spec, planned[2]))
    (pool,) = body["jobSpec"]["workerPoolSpecs"]
    # DISCRETE values travel as doubles, INTEGER as integers, CATEGORICAL as text (as on Vertex AI).
    assert pool["containerSpec"]["args"] == [
        "--epochs=2",
        "--learning_rate=0.1",
        "--num-layers=2",
        "--optimizer=adam",
    ]
    assert body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://my-bucket/runs/own/3"}


def test_the_sandbox_reads_the_study_back_with_the_same_names(code_dir):
    """The fake Vertex AI's tuning runner plans its trials from the study it was sent: the
    verbatim label keeps `learning_rate` from turning into the trainer's `--learning-rate`."""
    spec = _tuned(code_dir)
    body = render.tuning_job(spec, render.custom_job(spec, plan_artifact(spec)))
    search = as_tune_spec(body["studySpec"], body["maxTrialCount"], verbatim=True)
    assert [trial_args(search, v) for v in plan_trials(search)] == [
        trial_args(spec, v) for v in plan_trials(spec)
    ]


def test_trials_read_back_keep_the_scripts_names():
    trial = {
        "id": "1",
        "state": "SUCCEEDED",
        "parameters": [
            {"parameterId": "learning_rate", "value": 0.1},
            {"parameterId": "num-layers", "value": 3},
        ],
        "finalMeasurement": {"metrics": [{"metricId": "val_auc", "value": 0.9}]},
    }
    study = {
        "metrics": [{"metricId": "val_auc", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "num-layers", "integerValueSpec": {"minValue": "2", "maxValue": "3"}}],
    }
    data = {"name": "projects/p/locations/us-central1/hyperparameterTuningJobs/1", "studySpec": study}
    own = TuningJob({**data, "labels": {PARAMS_LABEL: VERBATIM}, "trials": [trial]}, client=None)
    assert own.best_trial().parameters == {"learning_rate": 0.1, "num-layers": 3}
    bundled = TuningJob({**data, "trials": [trial]}, client=None)  # ids are the trainer's flags: fields back
    assert bundled.best_trial().parameters == {"learning_rate": 0.1, "num_layers": 3}


def _refused(data: dict) -> list[SpecError]:
    with pytest.raises((SpecError, SpecProblems)) as info:
        build_spec(data)
    err = info.value
    return list(err.problems) if isinstance(err, SpecProblems) else [err]


def test_a_tuned_name_also_in_args_is_refused_naming_both(code_dir):
    tune = {"parameters": {"epochs": {"min": 1, "max": 4}}}
    (e,) = _refused(script_data(code_dir, tune=tune, args=["--data=x", "--epochs=2"]))
    assert e.field == "tune.parameters.epochs"
    assert "args[1]" in e.message and "'--epochs=2'" in e.message
    assert "remove '--epochs=2' from args" in (e.hint or "")
    # --epochs as a separate word (its value next) is the same collision.
    (e,) = _refused(script_data(code_dir, tune=tune, args=["--epochs", "2"]))
    assert e.field == "tune.parameters.epochs"
    # A longer name that starts the same is another argument.
    assert build_spec(script_data(code_dir, tune=tune, args=["--epochs-per-eval=2"])).tune is not None


def test_a_name_that_is_no_flag_is_refused(code_dir):
    (e,) = _refused(script_data(code_dir, tune={"parameters": {"--lr": {"min": 0.1, "max": 1.0}}}))
    assert e.field == "tune.parameters.--lr" and "--NAME=VALUE" in e.message


def test_the_trainers_rules_do_not_apply_to_a_script(code_dir):
    """No trainer: no trainer field to match, no hypertune_metric or eval_data to require."""
    spec = script_spec(
        code_dir,
        tune={"metric": "loss", "goal": "minimize", "parameters": {"dropout": {"min": 0, "max": 0.5}}},
    )
    assert spec.tune is not None and spec.tune.kind("dropout", trainer=False) == "double"


def test_the_python_api_dry_run_takes_the_script_job(code_dir):
    spec = _tuned(code_dir)
    dry = api.submit(spec, dry_run=True)
    body = dry.to_dict()["requests"][1]["body"]  # (look, create, look after)
    assert body["labels"][PARAMS_LABEL] == VERBATIM
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] == ["--epochs=2"]


def test_a_local_study_runs_the_script_with_each_trials_args(tmp_path):
    """The one real study: examples/own-code-tune's script (no TensorFlow) scores its arguments and
    reports through cloudml-hypertune to the CLOUD_ML_HP_METRIC_FILE each trial is given."""
    out = tmp_path / "study"
    spec = api.load_spec(EXAMPLE, [f"image.code={EXAMPLE.parent / 'code'}", f"output_dir={out}"])
    settings = Settings(environ={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    study = api.submit(spec, local=True, settings=settings)
    assert study.state == "JOB_STATE_SUCCEEDED", study.failure_message()
    found = [(t.id, t.parameters, round(t.metric or 0, 4)) for t in study.trials()]
    assert found == [
        ("1", {"optimizer": "adam", "layers": 3, "learning_rate": 0.01}, 0.85),
        ("2", {"optimizer": "adam", "layers": 3, "learning_rate": 0.1}, 0.95),
    ]
    assert study.best_trial().id == "2"
    # The study has its own folder below output_dir, each trial a folder in it (as on Vertex AI);
    # each trial reported to its own file, in cloudml-hypertune's JSON lines.
    run = Path(study.output_dir)
    assert run.parent == out and run.name.startswith(f"{spec.name}-")
    for trial_id, metric in (("1", 0.85), ("2", 0.95)):
        (line,) = (run / trial_id / "hypertune" / "output.metrics").read_text().splitlines()
        report = json.loads(line)
        assert report["trial"] == trial_id and round(float(report["accuracy"]), 4) == metric
    saved = json.loads((records(run) / "trials.json").read_text())
    assert saved["best_trial"]["parameters"]["learning_rate"] == 0.1


@pytest.mark.wire
def test_submitted_study_reads_its_trials_back_under_the_names_written(fake, run_cli, tmp_path):
    """Against the fake Vertex AI: the create carries the verbatim label, and `submit --wait` and
    `trials JOB` show learning_rate and num-layers as written (no trainer field mapping)."""
    import yaml

    spec = {
        "name": "own-image",
        "project": "test-project",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"uri": "us-docker.pkg.dev/p/r/mine:v1"},
        "output_dir": "gs://my-bucket/runs/own-image",
        "args": ["--data=gs://my-bucket/d"],
        "tune": {**TUNE, "max_trials": 2},
    }
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(spec))
    fake.tuning.set_metrics([0.5, 0.75])
    result = run_cli("submit", path, "--wait", "--output", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    (create,) = fake.calls("tuning-create")
    assert create.body["labels"][PARAMS_LABEL] == VERBATIM
    assert set(out["best_trial"]["parameters"]) == {"learning_rate", "num-layers", "optimizer"}
    listed = json.loads(run_cli("trials", out["name"], "-o", "json").stdout)
    assert [set(t["parameters"]) for t in listed["trials"]] == [
        {"learning_rate", "num-layers", "optimizer"}
    ] * 2
