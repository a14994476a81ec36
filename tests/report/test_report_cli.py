"""`vertex-trainer report` in-process (tests/cli_support.py): the file it writes, its formats, its
default name, and the exit-2 messages of a wrong target or a missing extra."""

from __future__ import annotations

import re
import sys

import pytest

from tests.report.browser import metrics_of
from vertex_trainer import lazy
from vertex_trainer.errors import UserError


def test_report_writes_one_self_contained_page_with_the_runs_figures(run_cli, quickstart, tmp_path):
    out = tmp_path / "report.html"
    proc = run_cli("report", str(quickstart), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 6
    # self-contained: no script, no stylesheet or image fetched, no URL but the SVG namespaces
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert set(__import__("re").findall(r'(?:src|href)="([^"#]+)"', page)) == set()
    metrics = metrics_of(quickstart)
    assert f'data-metric="eval_accuracy">{metrics["eval_accuracy"]:.4f}<' in page


def test_report_png_is_the_plots_as_one_image(run_cli, quickstart, tmp_path):
    from PIL import Image

    out = tmp_path / "plots.png"
    proc = run_cli("report", str(quickstart), "--format", "png", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (1200, 900)  # 6 plots: 3 rows of 2 at 100 dpi
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50


def test_without_o_the_report_is_named_after_the_run_in_the_working_directory(cli_env, quickstart, tmp_path):
    from tests.shared import cli_runner

    proc = cli_runner(cli_env, cwd=tmp_path)("report", str(quickstart))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "report-quickstart.html"
    assert (tmp_path / "report-quickstart.html").is_file()


def test_a_directory_that_holds_no_run_is_exit_2_naming_it(run_cli, tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_cli("report", str(tmp_path / "empty"))
    assert proc.returncode == 2
    assert f"report: {tmp_path / 'empty'} holds no run" in proc.stderr
    proc = run_cli("report", str(tmp_path / "missing" / "run"))
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def test_a_format_it_does_not_write_is_exit_2(run_cli, quickstart):
    proc = run_cli("report", str(quickstart), "--format", "pdf")
    assert proc.returncode == 2 and "pdf" in proc.stderr


def test_without_matplotlib_the_report_says_which_extra_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an environment without the extra
    with pytest.raises(UserError) as err:
        lazy.require("matplotlib", "vertex-trainer report")
    assert err.value.exit_code == 2
    assert str(err.value).startswith("vertex-trainer report needs matplotlib: ")
    assert err.value.hint.startswith("pip install 'vertex-trainer[report]'")


@pytest.mark.wire  # the fake Vertex AI on loopback
def test_submit_wait_and_status_name_the_report_when_the_job_ends(fake, run_cli, tmp_path):
    from tests.shared import T4_JOB, spec_yaml, write_spec

    spec = write_spec(tmp_path, spec_yaml(T4_JOB), "job.yaml")
    submitted = run_cli("submit", str(spec), "--wait")
    assert submitted.returncode == 0, submitted.stderr
    name = submitted.stdout.splitlines()[0].split()[1]
    assert name.startswith("projects/") and "/customJobs/" in name
    assert f"report   vertex-trainer report {name}" in submitted.stdout.splitlines()
    status = run_cli("status", name)
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[-1] == f"report   vertex-trainer report {name}"


FALLBACK = """\
name: h100-fallback
project: test-project
region: us-central1
hardware: h100x8
image: {uri: us-docker.pkg.dev/test-project/training/trainer:v1}
scheduling: {strategy: flex-start, max_wait: 30m, timeout: 2h, fallback: [spot, standard], max_cost: 2000}
output_dir: gs://test-bucket/runs/h100
trainer: {model: tiny-cnn, train_data: "gs://test-bucket/data/train-*", num_classes: 10, image_size: 32}
"""


@pytest.mark.wire  # the fake Vertex AI on loopback
def test_a_fallback_jobs_report_by_name_finds_its_attempts_by_key(fake, run_cli, tmp_path):
    fake.no_capacity("FLEX_START")  # attempt 1's job ends FAILED with code 8; attempt 2 runs
    spec = tmp_path / "fallback.yaml"
    spec.write_text(FALLBACK.replace("fallback: [spot, standard]", "fallback: [standard]"))
    submitted = run_cli("submit", str(spec), "--wait", "--no-quota-check", "--no-logs")
    assert submitted.returncode == 0, submitted.stderr
    created = [line.split()[1] for line in submitted.stdout.splitlines() if line.startswith("created")]
    assert len(created) == 2
    name = created[-1]  # the job that ran: attempt 2
    page = tmp_path / "fallback.html"
    proc = run_cli("report", name, "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    rows = re.findall(r"<tr><td>(\d)</td><td>([\w-]*)</td><td>([\w-]+)</td>", text)
    assert rows == [("1", "us-central1", "flex-start"), ("2", "us-central1", "standard")]
    assert 'id="fig-attempts"' in text and "no-capacity: no capacity (code 8 RESOURCE_EXHAUSTED)" in text


def test_open_hands_the_page_to_the_browser_as_a_file_url(run_cli, quickstart, tmp_path, monkeypatch):
    import webbrowser

    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    out = tmp_path / "report.html"
    # In this process: webbrowser reads BROWSER once, at its first use; its own function reads it
    # again (what a new process would), before the call with BROWSER and after it without.
    monkeypatch.setenv("BROWSER", str(browser))
    webbrowser.register_standard_browsers()
    try:
        proc = run_cli("report", str(quickstart), "-o", str(out), "--open", env={"BROWSER": str(browser)})
    finally:
        monkeypatch.undo()
        webbrowser.register_standard_browsers()
    assert proc.returncode == 0, proc.stderr
    assert opened.read_text().strip() == out.resolve().as_uri()


@pytest.mark.wire  # the fake Vertex AI on loopback
def test_a_jobs_handle_writes_its_report(fake, run_cli, cli_env, tmp_path):
    from tests.shared import T4_JOB, spec_yaml, write_spec
    from vertex_trainer import api
    from vertex_trainer.settings import Settings

    spec = write_spec(tmp_path, spec_yaml(T4_JOB), "job.yaml")
    submitted = run_cli("submit", str(spec), "--wait")
    assert submitted.returncode == 0, submitted.stderr
    name = submitted.stdout.splitlines()[0].split()[1]
    job = api.status(name, settings=Settings.from_environ(cli_env))
    out = tmp_path / "job.html"
    assert job.report(str(out)) == str(out)
    page = out.read_text()
    # the job as the API has it: its name, state, the exact CustomJob and its cost; no metrics.json
    # (nothing trained), so no figures table and no curves
    assert name in page and 'id="state">SUCCEEDED<' in page and "The exact CustomJob" in page
    assert 'id="cost"' in page and 'id="summary"' not in page and "<svg" not in page
