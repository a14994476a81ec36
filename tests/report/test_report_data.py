"""What the report reads from a run (reporting/run_data.py, report_cloud.py): the epochs of the
chief's progress lines, the verdict, the learning-rate schedule, the wall-time split, a study's
trials, a fallback's attempts and the cost; no TensorFlow. (TensorBoard's reader itself is checked
on a real run's event files on gs:// in tests/sandbox/test_sandbox_seed.py, whose CLI imports
TensorFlow anyway.)"""

from __future__ import annotations

import json
import math

import pytest

from tests.report.conftest import ATTEMPTS, LEARNING_RATES, fallback_job, records
from vertex_trainer.errors import UserError
from vertex_trainer.reporting import cloud_data as report_cloud
from vertex_trainer.reporting import run_data as report
from vertex_trainer.settings import Settings


def test_the_epochs_are_the_progress_lines_at_each_epochs_end(quickstart):
    data = report.from_run_dir(str(quickstart))
    assert data.name == "quickstart-local" and data.state == "JOB_STATE_SUCCEEDED"
    assert [
        (e.epoch, e.loss, e.accuracy, e.examples_per_sec, e.input_wait_fraction) for e in data.epochs
    ] == [
        (1, 0.8378, 0.7749, 229.7, 0.729),
        (2, 0.0496, 0.9912, 988.9, 0.248),
        (3, 0.0127, 0.9995, 724.9, 0.61),
    ]
    # the last epoch's loss is metrics.json's final loss, to the 4 decimals the line prints
    assert data.epochs[-1].loss == pytest.approx(data.metrics["final_train_loss"], abs=5e-5)
    assert data.verdict is not None and data.verdict.startswith("throughput: input-bound: 56% ")
    assert data.epochs_from == "log"
    assert [p.step for p in data.points] == [32, 64, 96]
    assert data.points[0].seconds == pytest.approx(14.317368, abs=1e-6)  # since the log's first line


def test_a_progress_line_within_an_epoch_is_a_point_not_an_epoch():
    lines = [
        "2026-12-02T04:00:00.000000Z trainer: start",
        "2026-12-02T04:00:30.000000Z progress epoch=1/2 step=10/20 examples_per_sec=100.0 loss=2.0000"
        " input_wait_fraction=0.500",
        "2026-12-02T04:01:00.000000Z progress epoch=1/2 step=20/20 examples_per_sec=120.0 loss=1.5000"
        " step_time_ms=10.00 accuracy=0.3000",
        "progress epoch=oops",
    ]
    epochs, points, verdict = report.parse_log(lines)
    assert [(e.epoch, e.loss, e.accuracy) for e in epochs] == [(1, 1.5, 0.3)]
    assert [(p.seconds, p.step, p.examples_per_sec, p.input_wait_fraction) for p in points] == [
        (30.0, 10, 100.0, 0.5),
        (60.0, 20, 120.0, None),
    ]
    assert verdict is None


def test_the_learning_rate_schedule_warms_up_then_decays_to_zero(quickstart):
    config = json.loads((quickstart / "trainer_config.json").read_text())
    schedule = dict(report.lr_schedule(config))
    peak, warmup, total = config["peak_learning_rate"], config["warmup_steps"], config["total_steps"]
    assert (peak, warmup, total) == (0.05, 32, 96)
    assert schedule[0] == 0.0
    assert schedule[16] == pytest.approx(peak / 2)  # halfway through the warmup
    assert schedule[warmup] == pytest.approx(peak)
    assert schedule[64] == pytest.approx(peak / 2)  # halfway through the cosine
    assert schedule[total] == pytest.approx(0.0, abs=1e-12)
    assert max(schedule.values()) == pytest.approx(peak)
    assert report.lr_schedule({}) == []


def test_the_wall_time_split_adds_up_to_the_runs_time(quickstart):
    data = report.from_run_dir(str(quickstart))
    split = report.time_split(data.metrics, data.elapsed_s)
    assert list(split) == ["compile", "steps", "checkpoints", "eval", "start-up and export"]
    assert split["compile"] == pytest.approx(data.metrics["compile_seconds"], abs=1e-3)
    assert sum(split.values()) == pytest.approx(data.elapsed_s, abs=0.01)
    assert report.time_split({}) == {}


def test_a_run_is_read_from_its_base_its_folder_or_its_records_and_from_the_older_layout(quickstart):
    """The base (output_dir) means its newest run; a run made before the per-run folders kept its
    record inside its folder (vertex-trainer/): both read the same (docs/contract.md section 15)."""
    first = report.from_run_dir(str(quickstart))
    assert first.name == "quickstart-local" and first.epochs
    for ref in (quickstart.parent, records(quickstart)):
        again = report.from_run_dir(str(ref))
        assert (again.source, again.name, again.epochs) == (first.source, first.name, first.epochs)
    records(quickstart).rename(quickstart / "vertex-trainer")  # the layout before section 15
    older = report.from_run_dir(str(quickstart))
    assert (older.source, older.name, older.epochs) == (first.source, first.name, first.epochs)


def test_a_directory_with_no_run_is_exit_2_naming_it(tmp_path):
    with pytest.raises(UserError) as err:
        report.from_run_dir(str(tmp_path / "nothing"))
    assert "nothing holds no run" in str(err.value)
    assert err.value.exit_code == 2


def test_a_study_has_its_trials_goal_and_the_best_trials_curves(study, quickstart):
    data = report.from_run_dir(str(study))
    assert data.kind == "tuning" and data.goal == "MAXIMIZE" and data.metric_id == "accuracy"
    assert [t["parameters"]["learning_rate"] for t in data.trials] == list(LEARNING_RATES)
    best = data.best_trial()
    assert best is not None and best["id"] == "3" and best["output_dir"] == str(quickstart)
    assert len(data.epochs) == 3 and data.metrics["eval_accuracy"] == 0.892578125


def test_the_event_files_are_read_only_when_the_log_has_no_epoch(quickstart):
    (records(quickstart) / "logs" / "workerpool0-0.log").unlink()
    asked = []

    def events(log_dir: str) -> list[report.Epoch]:
        asked.append(log_dir)
        return [report.Epoch(1, loss=0.5)]

    data = report.from_run_dir(str(quickstart), events=events)
    assert asked == [str(quickstart / "logs")]
    assert data.epochs_from == "tensorboard" and data.epochs == (report.Epoch(1, loss=0.5),)


def test_a_local_runs_cost_is_its_time_at_the_list_price_of_its_machines(quickstart):
    data = report_cloud.run_cost(report.from_run_dir(str(quickstart)))
    cost = data.cost
    assert cost is not None and cost["hourly"] > 0 and cost["strategy"] == "standard"
    assert cost["hours"] == pytest.approx(31.265 / 3600, abs=1e-3)
    assert "us-central1" in cost["what"]
    assert data.max_cost is None


def test_a_cloud_jobs_data_reads_its_outputs_attempts_and_cost(quickstart):
    body = fallback_job(quickstart)
    data = report_cloud.from_custom_job(
        body, Settings(environ={}), attempts=ATTEMPTS, max_cost=40.0, events=lambda d: []
    )
    assert data.kind == "fallback" and [a["attempt"] for a in data.attempts] == [1, 2, 3]
    assert data.metrics["eval_accuracy"] == 0.892578125 and data.config["total_steps"] == 96
    assert data.elapsed_s == 5400.0
    assert data.cost is not None and data.cost["hours"] == 1.5
    assert data.cost["usd"] == pytest.approx(1.5 * data.cost["hourly"], abs=0.01)
    assert data.max_cost == 40.0
    assert not math.isnan(data.cost["usd"])


def test_the_published_figure_is_for_the_whole_job_and_only_where_there_is_one():
    from vertex_trainer import api

    a100 = api.load_spec("job_specs/resnet50-a100x8.yaml")
    ref = report_cloud.reference_of(a100)
    assert ref is not None and ref["examples_per_sec"] == 2375 * 8  # AMP on A100, per GPU x 8
    assert ref["setup"].startswith("2,375 per accelerator x 8: mixed precision")
    quickstart = api.load_spec("job_specs/quickstart-local.yaml")  # tiny-cnn on CPU: none published
    assert report_cloud.reference_of(quickstart) is None and report_cloud.reference_of(None) is None


def test_a_running_jobs_cost_is_its_time_so_far(quickstart):
    body = fallback_job(quickstart)
    from datetime import datetime, timedelta, timezone

    body.pop("endTime")
    started = datetime.now(timezone.utc) - timedelta(hours=2)
    body.update(state="JOB_STATE_RUNNING", startTime=started.isoformat().replace("+00:00", "Z"))
    data = report_cloud.from_custom_job(body, Settings(environ={}), events=lambda d: [])
    assert data.cost is not None and data.cost["what"] == "so far: the job is still running"
    assert data.cost["hours"] == pytest.approx(2.0, abs=0.01) and data.elapsed_s is None
