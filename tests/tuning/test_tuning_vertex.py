"""Tuning jobs against the fake Vertex AI: the request (study spec, trial counts, the trial job
spec = the rendered CustomJob's jobSpec) through the real aiplatform_v1 types, idempotent create,
trials as the job advances, the best trial, and the trials / submit commands."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from tests.cli_support import gcloud_config
from vertex_trainer import api
from vertex_trainer.spec import build_spec
from vertex_trainer.vertex.hptuning import Trial, TuningJob, best_trial

from .conftest import PROJECT, REGION, spec_data

pytestmark = pytest.mark.wire


def _normalised(type_name: str, body: dict) -> dict:
    """Through an aiplatform_v1 type: enum names/numbers and int64 strings/ints compare equal."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    cls = getattr(aiplatform_v1, type_name)
    return json_format.MessageToDict(json_format.ParseDict(body, cls.pb(cls())))


def test_submit_creates_a_tuning_job_over_the_rendered_custom_job(fake, settings):
    spec = build_spec(spec_data())
    job = api.submit(spec, idempotency_key="key-1", settings=settings)
    assert isinstance(job, TuningJob) and not job.adopted
    assert job.name in fake.tuning.jobs and job.state == "JOB_STATE_QUEUED"
    assert job.console_url.endswith(f"/training/{job.id}?project=test-project")

    (create,) = fake.calls("tuning-create")
    sent = _normalised("HyperparameterTuningJob", create.body)
    study = sent["studySpec"]
    assert study["metrics"] == [{"metricId": "accuracy", "goal": "MAXIMIZE"}]
    assert [
        (p["parameterId"], next(k for k in p if k.endswith("ValueSpec")), p.get("scaleType"))
        for p in study["parameters"]
    ] == [
        ("learning-rate", "doubleValueSpec", "UNIT_LOG_SCALE"),
        ("warmup-epochs", "integerValueSpec", "UNIT_LINEAR_SCALE"),
        ("batch-size", "discreteValueSpec", "UNIT_LINEAR_SCALE"),
        ("optimizer", "categoricalValueSpec", None),
    ]
    assert (sent["maxTrialCount"], sent["parallelTrialCount"], sent["maxFailedTrialCount"]) == (16, 4, 2)
    rendered = api.render_job(spec, idempotency_key="key-1")
    assert _normalised("CustomJobSpec", create.body["trialJobSpec"]) == _normalised(
        "CustomJobSpec", rendered["jobSpec"]
    )
    assert sent["labels"] == rendered["labels"] and sent["displayName"] == "tune-test"
    assert fake.calls("create") == []  # no CustomJob of its own


def test_create_is_idempotent_and_adopts_after_a_lost_answer(fake, settings):
    spec = build_spec(spec_data())
    first = api.submit(spec, idempotency_key="ci-7", settings=settings)
    again = api.submit(spec, idempotency_key="ci-7", settings=settings)
    assert again.adopted and again.name == first.name
    assert len(fake.tuning.jobs) == 1 and len(fake.calls("tuning-create")) == 1

    # The service commits the job, then the answer is lost: the retry finds it, no second job.
    fake.fail("tuning-create", status=503, commit=True)
    lost = api.submit(spec, idempotency_key="ci-8", settings=settings)
    assert lost.adopted and len(fake.tuning.jobs) == 2
    assert [r.op for r in fake.requests][-3:] == ["tuning-list", "tuning-create", "tuning-list"]


def test_wait_follows_the_trials_and_the_best_is_the_best_final_measurement(fake, settings):
    fake.tuning.set_metrics([0.61, 0.93, None, 0.87, 0.92])
    spec = build_spec(spec_data())
    job = api.submit(spec, idempotency_key="key-2", settings=settings)
    # Spec counts: 16 trials; keep the test short with a 5-trial study.
    fake.tuning.jobs[job.name].data["maxTrialCount"] = 5
    ended: list[Trial] = []
    states: list[str] = []
    job.wait(on_trial=ended.append, on_state=lambda j: states.append(j.state))
    assert job.succeeded and states[-1] == "JOB_STATE_SUCCEEDED"
    assert sorted(t.id for t in ended) == ["1", "2", "3", "4", "5"]  # each once, as it ended
    trials = job.trials()
    assert [(t.id, t.state, t.metric) for t in trials] == [
        ("1", "SUCCEEDED", 0.61),
        ("2", "SUCCEEDED", 0.93),
        ("3", "INFEASIBLE", None),
        ("4", "SUCCEEDED", 0.87),
        ("5", "SUCCEEDED", 0.92),
    ]
    assert set(trials[0].parameters) == {"learning_rate", "warmup_epochs", "batch_size", "optimizer"}
    assert isinstance(trials[0].parameters["batch_size"], int)
    assert job.best_trial().id == "2"

    out = job.to_dict()
    assert {
        "name",
        "state",
        "console_url",
        "image",
        "idempotency_key",
        "adopted",
        "trials",
        "best_trial",
    } <= set(out)
    assert out["best_trial"]["id"] == "2" and out["best_trial"]["metric"] == 0.93
    assert {"id", "state", "parameters", "metric"} <= set(out["trials"][2])
    assert out["trials"][2]["metric"] is None

    # Attach by name later (the Python API), the same answer.
    again = api.tuning_job(job.name, settings=settings)
    assert again.best_trial() == job.best_trial()


def test_best_trial_follows_the_goal():
    trials = [
        Trial("1", "SUCCEEDED", {}, 0.3),
        Trial("2", "SUCCEEDED", {}, 0.1),
        Trial("3", "INFEASIBLE", {}, None),
        Trial("4", "SUCCEEDED", {}, 0.1),
        Trial("5", "ACTIVE", {}, None),
    ]
    assert best_trial(trials, "maximize").id == "1"
    assert best_trial(trials, "MINIMIZE").id == "2"  # a tie: the earlier trial
    assert best_trial(trials[2:3], "maximize") is None


def test_a_minimize_study_reports_the_lowest(fake, settings):
    spec = build_spec(
        {
            **spec_data(),
            "trainer": {**spec_data()["trainer"], "hypertune_metric": "loss"},
            "tune": {
                **spec_data()["tune"],
                "metric": "loss",
                "goal": "minimize",
                "max_trials": 3,
                "parallel_trials": 3,
            },
        }
    )
    fake.tuning.set_metrics(lambda trial_id, params: {"1": 0.4, "2": 0.2, "3": 0.9}[trial_id])
    job = api.submit(spec, wait=True, settings=settings)
    assert job.goal == "MINIMIZE" and job.best_trial().id == "2" and job.best_trial().metric == 0.2


def test_the_study_fails_when_max_failed_trials_fail(fake, settings):
    fake.tuning.set_metrics([None, None, 0.5, 0.5])
    spec = build_spec(spec_data())
    job = api.submit(spec, settings=settings)
    job.wait(check=False)
    assert job.state == "JOB_STATE_FAILED" and "maxFailedTrialCount" in job.error


# -- the commands ---------------------------------------------------------------------------------


def test_submit_wait_json_then_trials_text_and_json(fake, run_cli, spec_file):
    fake.tuning.set_metrics([0.5, 0.75, 0.7, 0.6])
    result = run_cli(
        "submit",
        spec_file,
        "--set",
        "tune.max_trials=4",
        "--wait",
        "--output",
        "json",
        "--idempotency-key",
        "cli-1",
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)  # exactly one JSON object
    assert out["state"] == "JOB_STATE_SUCCEEDED" and len(out["trials"]) == 4
    assert out["best_trial"]["id"] == "2" and out["best_trial"]["metric"] == 0.75
    assert "trial 2 SUCCEEDED: accuracy=0.7500" in result.stderr

    job_id = out["name"].rsplit("/", 1)[1]
    text = run_cli("trials", job_id, "--project", PROJECT, "--region", REGION)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].split() == ["state", "SUCCEEDED"]
    assert lines[2].split()[:4] == ["TRIAL", "STATE", "ACCURACY", "LEARNING_RATE"]
    assert lines[4].split()[:4] == ["2", "*", "SUCCEEDED", "0.7500"]
    assert lines[-1].startswith("best     trial 2: accuracy=0.7500")

    as_json = json.loads(run_cli("trials", out["name"], "-o", "json").stdout)
    assert as_json["best_trial"] == out["best_trial"] and as_json["metric"] == "accuracy"


def test_submit_text_and_dry_run(fake, run_cli, spec_file):
    created = run_cli("submit", spec_file)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[0].startswith(
        "created  projects/test-project/locations/us-central1/hyperparameterTuningJobs/"
    )
    assert "16 at most, 4 at a time (maximize accuracy)" in created.stdout
    name = created.stdout.split()[1]
    followed = run_cli("trials", name, "--wait", "--output", "json")
    assert followed.returncode == 0, followed.stderr
    out = json.loads(followed.stdout)
    assert out["state"] == "JOB_STATE_SUCCEEDED" and len(out["trials"]) == 16
    assert out["best_trial"]["metric"] == max(t["metric"] for t in out["trials"])
    assert followed.stderr.count(" SUCCEEDED: accuracy=") == 16

    dry = run_cli("submit", spec_file, "--dry-run", "--idempotency-key", "dry-1")
    assert dry.returncode == 0, dry.stderr
    assert "hyperparameterTuningJobs?filter=labels.vertex-trainer-key" in dry.stdout
    body, _ = json.JSONDecoder().raw_decode(dry.stdout[dry.stdout.index("{") :])  # (the prices follow)
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"].endswith("trainer:v1")
    assert len(fake.tuning.jobs) == 1  # the dry run sent nothing


def test_trials_of_a_missing_job_and_a_bad_name(fake, run_cli):
    missing = run_cli("trials", f"projects/{PROJECT}/locations/{REGION}/hyperparameterTuningJobs/42")
    assert missing.returncode in (2, 3) and "does not exist" in missing.stderr
    assert "no such hyperparameter tuning job" in missing.stderr
    bad = run_cli("trials", "projects/p/locations/r/customJobs/1")
    assert bad.returncode == 2 and "not a hyperparameter tuning job" in bad.stderr


# -- parity with the Google Cloud CLI ---------------------------------------------------------------


@pytest.mark.gcloud
@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_creates_the_same_tuning_job_from_render_format_gcloud(
    fake, run_cli, cli_env, spec_file, tmp_path
):
    config_dir = gcloud_config(tmp_path / "gcloud", fake.url)
    config = run_cli("render", spec_file, "--format", "gcloud", "--idempotency-key", "k1")  # one run folder
    assert config.returncode == 0, config.stderr
    (command,) = [
        line.removeprefix("#").strip()
        for line in config.stdout.splitlines()
        if "gcloud ai hp-tuning-jobs create" in line
    ]
    (tmp_path / "tuning.yaml").write_text(config.stdout)
    created = subprocess.run(
        shlex.split(command) + ["--format=json"],
        cwd=tmp_path,
        env={**cli_env, "CLOUDSDK_CONFIG": str(config_dir)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    (request,) = fake.calls("tuning-create")
    ours = json.loads(run_cli("render", spec_file, "--format", "json", "--idempotency-key", "k1").stdout)
    theirs = _normalised("HyperparameterTuningJob", request.body)
    mine = _normalised("HyperparameterTuningJob", ours)
    for key in (
        "displayName",
        "studySpec",
        "trialJobSpec",
        "maxTrialCount",
        "parallelTrialCount",
        "maxFailedTrialCount",
        "labels",
    ):
        assert theirs.get(key) == mine.get(key), key
