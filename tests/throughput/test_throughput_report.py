"""The report of a real run (issue 34), no training of its own: this folder's starved run (the
real-data run of a `bench --local`, conftest.py `starved_run`), a run of the trainer through
`submit --local` with its record and log, rendered by `vertex-trainer report` and looked at in
headless Chromium (tests/report/browser.py): the screenshot, no console error, nothing fetched,
the plots drawn, the numbers equal to its metrics.json and the verdict the run printed."""

from __future__ import annotations

import pytest

from tests.report.browser import (
    assert_not_blank,
    assert_numbers_equal_metrics,
    chromium,
    look,
    metrics_of,
)
from vertex_trainer import api
from vertex_trainer.settings import Settings

pytestmark = [pytest.mark.trainer, pytest.mark.slow]


def test_the_report_of_a_real_run_opens_offline_with_its_figures(starved_run, tmp_path):
    run = starved_run.runs["real"]
    page = tmp_path / "real.html"
    assert api.report(str(run), str(page), settings=Settings(environ={})) == str(page)
    with chromium() as driver:
        seen = look(driver, page, tmp_path / "real.png")
    assert seen.size == seen.viewport
    assert_not_blank(seen.screenshot)
    assert seen.errors == [] and seen.fetched == []
    for figure in ("loss", "accuracy", "learning-rate", "throughput", "input-wait", "time-split"):
        assert seen.figures.get(figure, 0) >= 2, (figure, seen.figures)
    metrics = metrics_of(run)
    assert assert_numbers_equal_metrics(seen.printed, metrics) >= 12
    verdict = starved_run.trainer_lines("real")[-1].removeprefix("trainer: ")
    assert verdict.startswith("throughput: input-bound") and verdict in seen.text
