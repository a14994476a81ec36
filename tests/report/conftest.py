"""Fixtures for the report tests: run directories in the trainer's real format, no training.

data/quickstart is a real `submit --local` run of job_specs/quickstart-local.yaml (3 epochs on
the synthesized quickstart data, this repository's trainer, 2026-12-02): its metrics.json,
trainer_config.json and TensorBoard event file in its folder, and beside it, in
data/.vertex-trainer/quickstart (docs/contract.md section 15), its record (spec.yaml,
custom_job.json, result.json) and the chief's log (the TensorFlow start-up banner left out);
paths made relative. A study and a fallback plan are built around it the way
tuning/tuning_run.py and capacity/fallback.py record them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
LEARNING_RATES = (0.003, 0.01, 0.03, 0.1, 0.3)
ACCURACIES = (0.41, 0.78, 0.8926, 0.87, 0.1)  # 0.03 wins; 0.3 diverges to chance level


@pytest.fixture
def quickstart(tmp_path) -> Path:
    """A copy of the real quickstart run's folder, its records beside it."""
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    return Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))


def records(run: Path) -> Path:
    """The tool's records of the run in `run`: beside it (local/layout.py)."""
    return run.parent / ".vertex-trainer" / run.name


@pytest.fixture
def study(tmp_path, quickstart) -> Path:
    """A local study's folder (its records beside it: trials.json and the tuning job's body, as
    tuning/tuning_run.py writes them) over five learning rates; the best trial's run is the
    quickstart run."""
    base = tmp_path / "study"
    base.mkdir()
    record = records(base)
    record.mkdir(parents=True)
    trials = []
    for n, (lr, acc) in enumerate(zip(LEARNING_RATES, ACCURACIES, strict=True), start=1):
        out = quickstart if acc == max(ACCURACIES) else base / str(n)
        trials.append(
            {
                "id": str(n),
                "state": "SUCCEEDED",
                "parameters": {"learning_rate": lr},
                "metric": acc,
                "output_dir": str(out),
            }
        )
    (record / "trials.json").write_text(
        json.dumps({"name": "quickstart-tune", "state": "JOB_STATE_SUCCEEDED", "trials": trials})
    )
    (record / "hyperparameter_tuning_job.json").write_text(
        json.dumps(
            {
                "displayName": "quickstart-tune",
                "maxTrialCount": 5,
                "studySpec": {
                    "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                    "parameters": [
                        {
                            "parameterId": "learning_rate",
                            "discreteValueSpec": {"values": list(LEARNING_RATES)},
                        }
                    ],
                },
            }
        )
    )
    return base


ATTEMPTS = [
    {
        "attempt": 1,
        "region": "us-central1",
        "strategy": "flex-start",
        "hardware": "a100",
        "name": "projects/p/locations/us-central1/customJobs/1",
        "state": "JOB_STATE_FAILED",
        "reason": "no-capacity",
        "message": "Resources are insufficient in region: us-central1",
    },
    {
        "attempt": 2,
        "region": "us-east4",
        "strategy": "spot",
        "hardware": "a100",
        "name": None,
        "state": None,
        "reason": "quota",
        "message": "quota exceeded: custom_model_training_preemptible_nvidia_a100_gpus",
    },
    {
        "attempt": 3,
        "region": "europe-west4",
        "strategy": "standard",
        "hardware": "a100",
        "name": "projects/p/locations/europe-west4/customJobs/3",
        "state": "JOB_STATE_SUCCEEDED",
        "reason": None,
        "message": None,
    },
]


def fallback_job(quickstart: Path) -> dict:
    """The CustomJob of a fallback plan's last attempt, as the REST API returns it, whose outputs
    are the quickstart run's."""
    body = json.loads((records(quickstart) / "custom_job.json").read_text())
    body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": str(quickstart)}
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
    return {
        **body,
        "name": "projects/p/locations/europe-west4/customJobs/3",
        "state": "JOB_STATE_SUCCEEDED",
        "startTime": "2026-12-02T04:00:00Z",
        "endTime": "2026-12-02T05:30:00Z",
    }
