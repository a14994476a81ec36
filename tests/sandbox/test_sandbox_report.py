"""The report of a tuning job in the sandbox (issue 34): a HyperparameterTuningJob whose stand-in
trials (`python -c`, no TensorFlow) report through cloudml-hypertune, read back through the API
by `vertex_trainer.api.report` and looked at in headless Chromium (tests/report/browser.py): the
trials table with the best one highlighted, and the metric against the parameter drawn."""

from __future__ import annotations

import json
import textwrap
import urllib.request

import pytest

from tests.report.browser import assert_not_blank, chromium, look
from vertex_trainer import api

from .conftest import PROJECT, REGION, python_job

pytestmark = pytest.mark.wire

# accuracy peaks at lr 0.03: a curve with a top, as the tuning example's search should give
REPORTS = textwrap.dedent("""\
    import math, sys
    import hypertune
    lr = float(next(a for a in sys.argv if a.startswith("--learning-rate=")).split("=")[1])
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=0.9 - 0.1 * math.log10(lr / 0.03) ** 2)
    """)
RATES = [0.003, 0.01, 0.03, 0.1, 0.3]


def _create(sandbox, body: dict) -> dict:
    request = urllib.request.Request(
        f"{sandbox.vertex.url}/v1/projects/{PROJECT}/locations/{REGION}/hyperparameterTuningJobs",
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {sandbox.token}"},
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as resp:
        return json.loads(resp.read())


def test_a_sandbox_tuning_jobs_report_shows_its_trials_and_the_metric_against_the_rate(
    sandbox, settings, tmp_path
):
    spec = python_job(REPORTS, output_dir="gs://sandbox-test/runs/tune")["jobSpec"]
    created = _create(
        sandbox,
        {
            "displayName": "rates",
            "maxTrialCount": len(RATES),
            "parallelTrialCount": 2,
            "studySpec": {
                "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                "parameters": [{"parameterId": "learning-rate", "discreteValueSpec": {"values": RATES}}],
                "algorithm": "GRID_SEARCH",
            },
            "trialJobSpec": spec,
        },
    )
    assert sandbox.tuning.wait(created["name"], timeout=120)
    page = tmp_path / "tuning.html"
    assert api.report(created["name"], str(page), settings=settings) == str(page)
    with chromium() as driver:
        seen = look(driver, page, tmp_path / "tuning.png")
        from selenium.webdriver.common.by import By

        rows = driver.find_elements(By.CSS_SELECTOR, "#trials tr[data-trial]")
        best = [r.get_attribute("data-trial") for r in rows if "best" in (r.get_attribute("class") or "")]
        cells = [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    assert seen.size == seen.viewport
    assert_not_blank(seen.screenshot)
    assert seen.errors == [] and seen.fetched == []
    # one plot for the one parameter (the trials name it by the trainer's field), and nothing else:
    # the stand-in trials wrote no metrics.json, so there are no curves to draw
    assert set(seen.figures) == {"param-learning_rate"} and seen.figures["param-learning_rate"] >= 2
    assert [float(c[2]) for c in cells] == RATES  # trial, state, learning_rate, accuracy
    assert [c[1] for c in cells] == ["SUCCEEDED"] * len(RATES)
    assert best == ["3"] and cells[2][3] == "0.9000"  # lr 0.03
    assert "rates" in seen.text and "Trials (accuracy, maximize)" in seen.text
