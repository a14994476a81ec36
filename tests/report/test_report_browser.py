"""The report as a person sees it (issue 34): each page opened offline in Debian's headless
Chromium, a screenshot taken and checked, no script error in the console, nothing fetched, the
plots drawn, and the numbers on the page equal to metrics.json's. One browser for the module."""

from __future__ import annotations

import json

import pytest

from tests.report.browser import (
    assert_not_blank,
    assert_numbers_equal_metrics,
    chromium,
    look,
    metrics_of,
)
from tests.report.conftest import ATTEMPTS, fallback_job, records
from vertex_trainer import api
from vertex_trainer.reporting import cloud_data as report_cloud
from vertex_trainer.reporting import page as report_page
from vertex_trainer.settings import Settings

RUN_FIGURES = {"loss", "accuracy", "learning-rate", "throughput", "input-wait", "time-split"}


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def _seen(page_look, figures: set[str]) -> None:
    assert page_look.size == page_look.viewport, "the screenshot is not the window's size"
    assert_not_blank(page_look.screenshot)
    assert page_look.errors == []
    assert page_look.fetched == [], "the page fetched something: it must open offline"
    assert figures <= set(page_look.figures), (figures, page_look.figures)
    empty = [f for f in figures if page_look.figures[f] < 2]
    assert empty == [], f"figures without drawn paths: {empty}"


def test_a_local_runs_report_shows_its_curves_speed_wait_time_split_and_cost(browser, quickstart, tmp_path):
    page = tmp_path / "report.html"
    assert api.report(str(quickstart), str(page), settings=Settings(environ={})) == str(page)
    seen = look(browser, page, tmp_path / "screenshot.png")
    _seen(seen, RUN_FIGURES)
    metrics = metrics_of(quickstart)
    assert assert_numbers_equal_metrics(seen.printed, metrics) >= 12
    assert seen.printed["eval_accuracy"] == "0.8926" and seen.printed["steady_examples_per_sec"] == "728.0"
    assert "input-bound: 56% of the time waiting for data" in seen.text
    assert "3 epoch(s) from the run's progress lines" in seen.text
    assert "this run's time on Vertex AI in us-central1" in seen.text  # the cost line
    assert "SUCCEEDED" in seen.text and "The exact CustomJob" in seen.text


def test_a_studys_report_shows_the_trials_the_best_one_and_a_plot_per_parameter(
    browser, study, quickstart, tmp_path
):
    page = tmp_path / "study.html"
    api.report(str(study), str(page), settings=Settings(environ={}))
    seen = look(browser, page, tmp_path / "study.png")
    _seen(seen, RUN_FIGURES | {"param-learning_rate"})
    from selenium.webdriver.common.by import By

    best = browser.find_elements(By.CSS_SELECTOR, "#trials tr.best")
    assert [row.get_attribute("data-trial") for row in best] == ["3"]
    shown = {
        cell.get_attribute("data-trial-metric"): cell.text
        for cell in browser.find_elements(By.CSS_SELECTOR, "[data-trial-metric]")
    }
    trials = json.loads((records(study) / "trials.json").read_text())["trials"]
    assert shown == {t["id"]: f"{t['metric']:.4f}" for t in trials}
    assert assert_numbers_equal_metrics(seen.printed, metrics_of(quickstart)) >= 12  # the best trial's


def test_a_fallback_jobs_report_shows_its_attempts_and_its_cost_against_max_cost(
    browser, quickstart, tmp_path
):
    data = report_cloud.from_custom_job(
        fallback_job(quickstart), Settings(environ={}), attempts=ATTEMPTS, max_cost=40.0, events=lambda d: []
    )
    page = tmp_path / "fallback.html"
    report_page.write(data, str(page))
    seen = look(browser, page, tmp_path / "fallback.png")
    _seen(seen, {"attempts", "cost", "time-split"})
    from selenium.webdriver.common.by import By

    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#attempts tr")][1:]
    assert [r.split()[:3] for r in rows] == [
        ["1", "us-central1", "flex-start"],
        ["2", "us-east4", "spot"],
        ["3", "europe-west4", "standard"],
    ]
    usd = data.cost["usd"]
    assert f"${usd:.2f} at list price" in seen.text and "max_cost $40.00" in seen.text
    assert assert_numbers_equal_metrics(seen.printed, metrics_of(quickstart)) >= 12
