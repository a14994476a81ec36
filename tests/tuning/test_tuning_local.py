"""`submit --local` of a tune: spec: two short digits trials of the bundled trainer run here at
once, each reporting its eval accuracy through cloudml-hypertune as on Vertex AI; the table and the
best. (More trials than run at once, queued: tests/owncode/test_owncode_tune.py, whose trials are
scripts that start no TensorFlow.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.shared import latest_run, records

# Two TensorFlow trials at once: over 150 s when the suite shares the two cores with a second
# worker or another job, so the bounds leave room for that.
pytestmark = [pytest.mark.trainer, pytest.mark.slow, pytest.mark.timeout(480)]

LEARNING_RATES = [0.0003, 0.1]


def _spec(tmp_path: Path, data: Path) -> Path:
    spec = {
        "name": "digits-tune",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"uri": "us-docker.pkg.dev/test-project/training/trainer:v1"},
        "output_dir": str(tmp_path / "runs"),
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
        "trainer": {
            "model": "tiny-cnn",
            "train_data": f"{data}/train-*",
            "eval_data": f"{data}/validation-*",
            "num_classes": 10,
            "image_size": 8,
            "epochs": 3,
            "batch_size": 50,
            "base_batch_size": 50,
            "warmup_epochs": 0,
            "augment": "none",
            "eval_crop_fraction": 1.0,
            "weight_decay": 0,
            # Two trials share two cores.
            "intra_op_threads": 1,
            "inter_op_threads": 1,
            "data_threads": 1,
        },
        "tune": {
            "max_trials": 2,
            "parallel_trials": 2,
            "algorithm": "grid",
            "parameters": {"learning_rate": {"values": LEARNING_RATES}},
        },
    }
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_local_search_of_two_digits_trials_prints_each_metric_and_picks_the_best(
    digits_data, run_cli, tmp_path
):
    result = run_cli("submit", _spec(tmp_path, digits_data), "--local", timeout=450)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    study = latest_run(tmp_path / "runs")  # the study's own folder below output_dir
    record = json.loads((records(study) / "trials.json").read_text())
    trials = record["trials"]
    assert [t["id"] for t in trials] == ["1", "2"]
    assert [t["parameters"]["learning_rate"] for t in trials] == LEARNING_RATES

    table = result.stdout.splitlines()
    header = next(i for i, line in enumerate(table) if line.startswith("TRIAL"))
    assert table[header].split() == ["TRIAL", "STATE", "ACCURACY", "LEARNING_RATE"]
    for trial, line in zip(trials, table[header + 1 : header + 3], strict=True):
        # Each trial ran in its own output directory, reported its accuracy to its own
        # cloudml-hypertune file (as on Vertex AI), and that is the metric shown.
        base = study / trial["id"]
        assert trial["state"] == "SUCCEEDED" and trial["output_dir"] == str(base)
        report = json.loads((base / "hypertune" / "output.metrics").read_text().splitlines()[-1])
        assert float(report["accuracy"]) == pytest.approx(trial["metric"])
        assert json.loads((base / "metrics.json").read_text())["eval_accuracy"] == pytest.approx(
            trial["metric"]
        )
        assert (base / "model" / "saved_model.pb").exists()
        assert line.split()[0] == trial["id"] and f"{trial['metric']:.4f}" in line.split()
        # The trial's flag reached the trainer as Vertex AI passes it.
        assert f"--learning-rate={trial['parameters']['learning_rate']!r}" in json.dumps(
            json.loads((records(base) / "custom_job.json").read_text())
        )
        assert f"trial {trial['id']} SUCCEEDED" in result.stderr

    best = max(trials, key=lambda t: t["metric"])
    assert record["best_trial"] == best and record["state"] == "JOB_STATE_SUCCEEDED"
    assert best["parameters"]["learning_rate"] == 0.1  # 3 epochs at 3e-4 barely move
    assert table[header + int(best["id"])].split()[1] == "*"
    assert table[-1].startswith(f"best     trial {best['id']}: accuracy={best['metric']:.4f}")
    assert record["metrics"]["eval_accuracy"] == pytest.approx(best["metric"])
