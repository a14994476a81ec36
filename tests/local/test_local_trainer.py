"""End to end with the real trainer (trainer_image/trainer): the quickstart spec, two workers
under MultiWorkerMirroredStrategy, a failing worker, and gs:// data and output in the emulator."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.process_support import processes_with_env
from vertex_trainer.local import FAILED, SUCCEEDED, run_local
from vertex_trainer.settings import Settings

from .conftest import local_settings

pytestmark = [pytest.mark.trainer, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "job_specs" / "quickstart-local.yaml"
SYNTH = (
    "import sys; from trainer.datagen import synthesize; "
    "synthesize(sys.argv[1], examples=512, shards=2, image_size=32, num_classes=10, seed=3, "
    "eval_examples=128)"
)


def _synth(out_dir: str, env: dict | None = None) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SYNTH, out_dir],
        capture_output=True,
        text=True,
        env=dict(env or os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="session")
def local_data(tmp_path_factory) -> Path:
    """A small synthetic dataset in the quickstart's layout (train-*, validation-*)."""
    out = tmp_path_factory.mktemp("data") / "quickstart"
    _synth(str(out))
    return out


def _console():
    import io

    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, width=200), buf


def _job(sets: list[str]):
    """The quickstart spec, resolved and rendered exactly as submit renders it."""
    from vertex_trainer import render
    from vertex_trainer.contract import Artifact
    from vertex_trainer.spec import load_spec

    spec = load_spec(QUICKSTART, sets=sets)
    return render.custom_job(spec, artifact=Artifact(image_uri="local/trainer:test")), spec


def _saved_model_files(model_dir: Path) -> set[str]:
    return {p.name for p in model_dir.iterdir()} if model_dir.is_dir() else set()


def test_quickstart_runs_end_to_end_with_submit_local(tmp_path, local_data):
    """`vertex-trainer submit job_specs/quickstart-local.yaml --local --output json`."""
    shutil.copytree(local_data, tmp_path / "data" / "quickstart")
    proc = subprocess.run(
        [sys.executable, "-m", "vertex_trainer", "submit", str(QUICKSTART), "--local", "--output", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, VERTEX_TRAINER_DEBUG="1"),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)  # exactly one JSON object on stdout
    assert out["state"] == "JOB_STATE_SUCCEEDED"
    output_dir = Path(out["output_dir"])
    assert output_dir == tmp_path / "runs" / "quickstart"
    assert "saved_model.pb" in _saved_model_files(output_dir / "model")
    metrics = json.loads((output_dir / "metrics.json").read_text())
    assert out["metrics"] == metrics
    assert metrics["replicas"] == 1 and metrics["epochs"] == 3
    # One replica still gets CLUSTER_SPEC/TF_CONFIG (one-task cluster): the default strategy.
    assert metrics["strategy"] == "default" and metrics["workers"] == 1
    assert "workerpool0-0 | " in proc.stderr and "JOB_STATE_SUCCEEDED" in proc.stderr


def test_two_replicas_train_together(tmp_path, local_data, marker):
    out = tmp_path / "out"
    job, spec = _job(
        [
            f"output_dir={out}",
            f"trainer.train_data={local_data}/train-*",
            f"trainer.eval_data={local_data}/validation-*",
            "replicas=2",
            "trainer.epochs=2",
            "trainer.steps_per_execution=4",
        ]
    )
    assert [p["replicaCount"] for p in job["jobSpec"]["workerPoolSpecs"]] == ["1", "1"]
    console, buf = _console()
    result = run_local(job, spec, settings=local_settings(VT_MARKER=marker), console=console)
    log = buf.getvalue()
    assert result.state == SUCCEEDED and result.exit_code == 0, log[-4000:]
    assert result.replicas == ["workerpool0-0", "workerpool1-0"]
    assert result.metrics["replicas"] == 2 and result.metrics["workers"] == 2
    assert result.metrics["strategy"] == "multi-worker" and result.metrics["steps_per_execution"] == 4
    assert "saved_model.pb" in _saved_model_files(out / "model")
    # Each process found its role in CLUSTER_SPEC; only the chief exports.
    assert "task=chief:0 chief=True" in log
    assert "task=worker:0 chief=False" in log
    assert not [
        line for line in log.splitlines() if line.startswith("workerpool1-0") and "exported model" in line
    ]
    # Both processes trained in lockstep: each reported every epoch with the same loss.
    losses = {}
    for line in log.splitlines():
        if "| progress " in line:
            name, rest = line.split(" | ", 1)
            losses.setdefault(name.strip(), []).append(rest.split("loss=")[1].split()[0])
    assert set(losses) == {"workerpool0-0", "workerpool1-0"}
    assert losses["workerpool0-0"] == losses["workerpool1-0"] and len(losses["workerpool0-0"]) == 2
    assert processes_with_env(marker) == []


def test_a_failing_worker_fails_the_run_and_stops_the_waiting_chief(tmp_path, local_data, marker):
    job, spec = _job(
        [
            f"output_dir={tmp_path / 'out'}",
            f"trainer.train_data={local_data}/train-*",
            f"trainer.eval_data={local_data}/validation-*",
            "replicas=2",
        ]
    )
    # The worker pool gets a data path that matches nothing: it fails at start, while the chief
    # waits for it in the collective set-up and would wait forever.
    pools = job["jobSpec"]["workerPoolSpecs"]
    pools[1] = copy.deepcopy(pools[1])  # render may share sub-objects between the pools
    worker = pools[1]["containerSpec"]
    worker["args"] = [
        a if not a.startswith("--train-data=") else f"--train-data={tmp_path}/missing/train-*"
        for a in worker["args"]
    ]
    console, buf = _console()
    result = run_local(job, spec, settings=local_settings(VT_MARKER=marker), console=console)
    # The chief would wait for the worker forever: the run ending at all means it was stopped.
    assert result.state == FAILED and result.exit_code == 1
    assert result.failed_replica == "workerpool1-0" and result.failed_exit_code != 0
    assert any("missing/train-*" in line for line in result.log_tail), result.log_tail
    assert not any(
        "missing/train-*" in line
        for line in buf.getvalue().splitlines()
        if line.startswith("workerpool0-0 |")
    ), "the chief had good data"
    assert f"workerpool1-0 exited with code {result.failed_exit_code}" in buf.getvalue()
    assert result.metrics is None
    assert processes_with_env(marker) == []


def test_gs_data_and_gs_output_through_the_emulator(tmp_path, gcs_emulator, gcs_bucket, gcs_env):
    _synth(f"gs://{gcs_bucket}/data/quickstart", env=dict(os.environ) | gcs_env)
    assert "data/quickstart/train-00000-of-00002" in gcs_emulator.list_objects(gcs_bucket)
    base = f"gs://{gcs_bucket}/runs/quickstart"
    job, spec = _job(
        [
            f"output_dir={base}",
            f"trainer.train_data=gs://{gcs_bucket}/data/quickstart/train-*",
            f"trainer.eval_data=gs://{gcs_bucket}/data/quickstart/validation-*",
            "trainer.epochs=1",
            "trainer.warmup_epochs=0",
        ]
    )
    console, buf = _console()
    # The route reaches the replicas (and the metrics read) through the settings alone.
    settings = Settings.from_environ(dict(os.environ) | gcs_env)
    result = run_local(job, spec, settings=settings, console=console)
    assert result.state == SUCCEEDED, buf.getvalue()[-4000:]
    assert result.model_dir == f"{base}/model/"
    objects = set(gcs_emulator.list_objects(gcs_bucket, "runs/quickstart/"))
    assert "runs/quickstart/model/saved_model.pb" in objects
    assert "runs/quickstart/metrics.json" in objects
    metrics = json.loads(gcs_emulator.read_object(gcs_bucket, "runs/quickstart/metrics.json"))
    assert result.metrics == metrics and metrics["replicas"] == 1
