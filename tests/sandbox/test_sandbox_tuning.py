"""HyperparameterTuningJobs in the sandbox with stand-in trials (`python -c`, no TensorFlow): each
trial is a CustomJob run here with `--<parameterId>=<value>` appended, reporting through
cloudml-hypertune; the job lists trials with final measurements; a cancel stops the trials."""

from __future__ import annotations

import json
import textwrap
import urllib.request

import pytest

from .conftest import PROJECT, REGION, python_job

pytestmark = pytest.mark.wire
# One sandbox for the module (conftest.py): each test looks at its own tuning jobs and their trials.
SHARED_SANDBOX = True

REPORTS = textwrap.dedent("""\
    import os, sys
    import hypertune
    lr = float(next(a for a in sys.argv if a.startswith("--learning-rate=")).split("=")[1])
    print("trial", os.environ["CLOUD_ML_TRIAL_ID"], "lr", lr, "model dir", os.environ["AIP_MODEL_DIR"])
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=1 - lr)
    """)


def _call(sandbox, method: str, path: str, body=None) -> dict:
    request = urllib.request.Request(
        f"{sandbox.vertex.url}/v1/{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {sandbox.token}"},
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def _tuning_job(script: str, values: list[float], parallel: int) -> dict:
    # python -c SCRIPT ARGS...: the trial's flags arrive in sys.argv.
    spec = python_job(script, output_dir="gs://sandbox-test/runs/tune")["jobSpec"]
    return {
        "displayName": "stand-in-tune",
        "maxTrialCount": len(values),
        "parallelTrialCount": parallel,
        "studySpec": {
            "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "learning-rate", "discreteValueSpec": {"values": values}}],
            "algorithm": "GRID_SEARCH",
        },
        "trialJobSpec": spec,
    }


def test_trials_run_with_their_flags_and_report_through_hypertune(sandbox):
    created = _call(
        sandbox,
        "POST",
        f"projects/{PROJECT}/locations/{REGION}/hyperparameterTuningJobs",
        _tuning_job(REPORTS, [0.1, 0.25, 0.5], parallel=2),
    )
    assert sandbox.tuning.wait(created["name"], timeout=120)
    job = _call(sandbox, "GET", created["name"])
    assert job["state"] == "JOB_STATE_SUCCEEDED"
    trials = job["trials"]
    assert [t["state"] for t in trials] == ["SUCCEEDED"] * 3
    assert [t["parameters"] for t in trials] == [
        [{"parameterId": "learning-rate", "value": v}] for v in (0.1, 0.25, 0.5)
    ]
    assert [t["finalMeasurement"]["metrics"] for t in trials] == [
        [{"metricId": "accuracy", "value": pytest.approx(1 - v)}] for v in (0.1, 0.25, 0.5)
    ]
    for trial in trials:
        custom = sandbox.vertex.jobs[trial["customJob"]]
        assert custom["state"] == "JOB_STATE_SUCCEEDED"
        assert (
            custom["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
            == f"gs://sandbox-test/runs/tune/{trial['id']}"
        )
        assert "vertex-trainer-key" not in (custom.get("labels") or {})


def test_a_trial_that_reports_nothing_is_infeasible_and_cancel_stops_the_trials(sandbox):
    silent = _call(
        sandbox,
        "POST",
        f"projects/{PROJECT}/locations/{REGION}/hyperparameterTuningJobs",
        _tuning_job("print('no report')", [0.1], parallel=1),
    )
    assert sandbox.tuning.wait(silent["name"], timeout=60)
    job = _call(sandbox, "GET", silent["name"])
    assert job["state"] == "JOB_STATE_FAILED" and job["error"]["message"] == "All trials failed."
    assert job["trials"][0]["state"] == "INFEASIBLE"
    assert "reported no 'accuracy'" in job["trials"][0]["infeasibleReason"]

    sleeping = "import time; print('sleeping', flush=True); time.sleep(600)"
    created = _call(
        sandbox,
        "POST",
        f"projects/{PROJECT}/locations/{REGION}/hyperparameterTuningJobs",
        _tuning_job(sleeping, [0.1, 0.2, 0.3], parallel=2),
    )
    assert sandbox.logging.wait_until(
        lambda fake: sum(e["jsonPayload"]["message"] == "sleeping" for e in fake.entries) == 2, timeout=60
    )
    _call(sandbox, "POST", f"{created['name']}:cancel", {})
    assert sandbox.tuning.wait(created["name"], timeout=60)
    job = _call(sandbox, "GET", created["name"])
    assert job["state"] == "JOB_STATE_CANCELLED"
    assert len(job["trials"]) == 2  # the third never started
    for trial in job["trials"]:
        assert trial["state"] == "INFEASIBLE"
        assert sandbox.vertex.jobs[trial["customJob"]]["state"] == "JOB_STATE_CANCELLED"
