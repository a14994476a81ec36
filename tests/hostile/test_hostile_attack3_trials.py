"""`trials JOB` shows a hyperparameter tuning job's trials: its metric's id, its parameters' ids
and the values Vertex AI chose, which for a categorical parameter are the study's own text. The
job may be anyone's in the project (Vertex AI takes any UTF-8 there), and the table printed them
raw: a value holding ESC ] 52 wrote the terminal's clipboard, ESC c reset it, a line break forged
a row. They are now shown escaped, one row a trial, as `list --all` shows job names
(test_hostile_attack2_job_names.py); `-o json` keeps them as they are.
"""

from __future__ import annotations

import json

import pytest

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
WHERE = ("--project", "test-project", "--region", "us-central1")
VALUE = f"adam{CLIPBOARD}"
PARAM = "optimizer\x1bc"  # (an id holds no whitespace: Vertex AI refuses it)
METRIC = "accuracy\x1b]0;title\x07"

pytestmark = pytest.mark.wire


def _study(fake) -> str:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}
    body = {
        "displayName": "someone-elses-study",
        "studySpec": {
            "metrics": [{"metricId": METRIC, "goal": "MAXIMIZE"}],
            "parameters": [
                {"parameterId": PARAM, "categoricalValueSpec": {"values": [VALUE, "sgd\nforged row"]}}
            ],
        },
        "maxTrialCount": 2,
        "parallelTrialCount": 1,
        "trialJobSpec": {"workerPoolSpecs": [{**pool, "containerSpec": {"imageUri": "x"}}]},
    }
    name = fake.tuning.add_job(body)["name"]
    trials = [
        {
            "id": str(n),
            "state": "SUCCEEDED",
            "parameters": [{"parameterId": PARAM, "value": value}],
            "finalMeasurement": {"metrics": [{"metricId": METRIC, "value": metric}]},
        }
        for n, value, metric in ((1, VALUE, 0.9), (2, "sgd\nforged row", 0.5))
    ]
    assert fake.tuning.report(name, trials=trials, state="JOB_STATE_SUCCEEDED")
    return name


def test_trials_shows_another_studys_names_and_values_escaped(fake, run_cli):
    name = _study(fake)
    shown = run_cli("trials", name, *WHERE)
    assert shown.returncode == 0, shown.stderr
    assert not any(c in shown.stdout + shown.stderr for c in "\x1b\x07"), repr(shown.stdout)
    lines = shown.stdout.splitlines()
    assert len(lines) == 2 + 1 + 2 + 1, lines  # name, state, the header, a row a trial, best
    assert "adam\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07" in lines[3] and "sgd\\x0aforged row" in lines[4]
    assert "OPTIMIZER\\x1bC" in lines[2]
    assert lines[-1].startswith("best     trial 1: accuracy\\x1b]0;title\\x07=0.9000")
    as_json = json.loads(run_cli("trials", name, *WHERE, "-o", "json").stdout)
    assert {t["parameters"][PARAM] for t in as_json["trials"]} == {VALUE, "sgd\nforged row"}


def test_the_apis_own_trial_lines_are_escaped(fake, settings):
    import io

    from vertex_trainer import api

    job = api.tuning_job(_study(fake), settings=settings)
    out = io.StringIO()
    job.wait(stream=out, poll=settings.poll)
    assert "trial 1 SUCCEEDED: accuracy\\x1b]0;title\\x07=0.9000" in out.getvalue()
    assert "\x1b" not in out.getvalue()
