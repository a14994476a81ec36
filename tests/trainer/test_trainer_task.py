"""End-to-end runs of `python -m trainer.task` on CPU: export, metrics, learning, replicas,
multi-worker, preemption and resume, exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import THROUGHPUT_FIELDS

from .conftest import dirs, read_metrics, run_trainer, trainer_env

METRIC_KEYS = {
    "global_batch_size",
    "learning_rate",
    "precision",
    "steps_per_execution",
    "steps",
    "epochs",
    "train_examples_per_sec",
    "final_train_loss",
    "eval_accuracy",
    "replicas",
}
PROGRESS = re.compile(r"^progress epoch=(\d+)/(\d+) step=(\d+)/(\d+) examples_per_sec=([\d.]+) loss=([\d.]+)")


def tiny_args(data: Path, **over) -> list[str]:
    flags = {
        "model": "tiny-cnn",
        "train-data": f"{data}/train-*",
        "eval-data": f"{data}/validation-*",
        "num-classes": 4,
        "image-size": 16,
        "epochs": 2,
        "batch-size": 16,
        "learning-rate": 0.1,
        "base-batch-size": 16,
        "warmup-epochs": 0.5,
    }
    flags.update({k.replace("_", "-"): v for k, v in over.items()})
    return [f"--{k}={v}" for k, v in flags.items() if v is not None]


# The one-replica run test_tiny_cnn_end_to_end asserts on is also the reference the two-replica run
# must match: no augmentation (random crops and flips drawn in a parallel map differ run to run),
# records in a fixed order, no weight decay.
SAME_BATCHES = dict(augment="none", deterministic="true", weight_decay=0)


@pytest.fixture(scope="module")
def tiny_run(synth_data, tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess, Path]:
    """(output base, hyperparameter-tuning metric file, result, its TMPDIR) of one tiny-cnn run on
    one replica."""
    base = tmp_path_factory.mktemp("tiny-run")
    hp_file = base / "hypertune" / "output.metrics"
    scratch = tmp_path_factory.mktemp("tiny-run-tmp")  # the process's TMPDIR: what it leaves there
    result = run_trainer(
        tiny_args(synth_data, **SAME_BATCHES) + dirs(base),
        env=trainer_env(CLOUD_ML_HP_METRIC_FILE=str(hp_file), TMPDIR=str(scratch)),
    )
    return base, hp_file, result, scratch


@pytest.mark.trainer
def test_tiny_cnn_end_to_end(tiny_run):
    base, hp_file, result, scratch = tiny_run
    assert result.returncode == 0, result.stdout + result.stderr
    progress = [PROGRESS.match(line) for line in result.stdout.splitlines() if line.startswith("progress ")]
    assert [(m.group(1), m.group(2), m.group(3), m.group(4)) for m in progress] == [
        ("1", "2", "8", "8"),
        ("2", "2", "8", "8"),
    ]
    assert f"exported model to {base}/model/" in result.stdout

    metrics = read_metrics(base)
    assert METRIC_KEYS <= metrics.keys()
    assert all(metrics[k] is not None for k in METRIC_KEYS)
    # The speed fields every bundled-trainer run writes, a model factory's too (tests/owncode).
    missing = [k for k in THROUGHPUT_FIELDS if metrics.get(k) is None]
    assert not missing, f"metrics.json lacks {missing}: {sorted(metrics)}"
    assert metrics["global_batch_size"] == 16 and metrics["steps"] == 16 and metrics["epochs"] == 2
    assert metrics["steps_per_execution"] == 8 and metrics["replicas"] == 1
    assert metrics["precision"] == "float32" and metrics["train_examples_per_sec"] > 0
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and metrics["final_train_loss"] > 0
    # Reported to Vertex hyperparameter tuning (cloudml-hypertune writes one JSON per report).
    report = json.loads(hp_file.read_text().strip().splitlines()[-1])
    assert (
        float(report["accuracy"]) == pytest.approx(metrics["eval_accuracy"])
        and int(report["global_step"]) == 16
    )
    config = json.loads((base / "trainer_config.json").read_text())
    assert config["flags"]["model"] == "tiny-cnn" and config["steps_per_epoch"] == 8
    # tf.data's own threads (a private pool of --data-threads=2 and more) run below the model's.
    assert config["data_nice"] == 19 and metrics["data_threads_niced"] >= 2
    assert list((base / "logs").rglob("events.out.tfevents.*")), "no TensorBoard events"

    # The export's signatures, their dtypes and what they answer: tests/serving (on a shared run).
    assert (base / "model" / "saved_model.pb").exists()
    # The modules autograph wrote for the functions it converted are removed at the end, though
    # the process skips the interpreter's teardown (exit_now) that would have run TF's removal.
    assert not list(scratch.glob("__autograph_generated_file*")), sorted(p.name for p in scratch.iterdir())


@pytest.mark.trainer
def test_two_replicas_with_steps_per_execution_match_one_replica(tiny_run, synth_data, tmp_path):
    # Per-replica batch norm (the default) is the same run but for its statistics (each replica
    # normalises over half the batch); with them all-reduced, two replicas compute what one does.
    base, _, one, _ = tiny_run
    assert one.returncode == 0, one.stdout + one.stderr
    two = run_trainer(
        tiny_args(synth_data, **SAME_BATCHES, cpu_replicas=2, sync_batch_norm="true") + dirs(tmp_path)
    )
    assert two.returncode == 0, two.stdout + two.stderr
    metrics = {"one": read_metrics(base), "two-sync": read_metrics(tmp_path)}
    assert [m["replicas"] for m in metrics.values()] == [1, 2]
    assert metrics["two-sync"]["strategy"] == "mirrored" and metrics["two-sync"]["steps_per_execution"] == 8
    assert metrics["two-sync"]["steps"] == metrics["one"]["steps"] == 16
    losses = {name: m["final_train_loss"] for name, m in metrics.items()}
    # Same data order and initial weights.
    assert losses["two-sync"] == pytest.approx(losses["one"], rel=1e-4), losses


# Two workers under MultiWorkerMirroredStrategy, each its own process with CLUSTER_SPEC as Vertex AI
# sets it: tests/local/test_local_trainer.py::test_two_replicas_train_together.


# Killed runs and their reruns (SIGKILL, SIGTERM, both at once; resumed from an epoch's end or
# mid-epoch): tests/trainer/test_trainer_preemption.py, one chain of three processes.


@pytest.mark.trainer
def test_corrupt_record_stops_with_the_file_name(corrupt_data, tmp_path):
    # With --skip-corrupt the same data trains to the end: the preemption chain reads it so.
    victim = corrupt_data / "train-00002-of-00004"
    result = run_trainer(tiny_args(corrupt_data, eval_data=None, epochs=1) + dirs(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: corrupt record in {victim} record ") and "--skip-corrupt" in last


def test_unknown_flag_exits_2_without_loading_tensorflow(tmp_path):
    result = run_trainer(["--train-data=x", "--num-classes=3", "--bogus=1"] + dirs(tmp_path), threads=False)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: unknown flags: --bogus=1 (see python -m trainer.task --help)"
    # The flag check runs before TensorFlow is imported (a bad flag costs milliseconds, not seconds).
    probe = (
        "import sys\nfrom trainer import task\n"
        "code = task.main(['--train-data=x', '--num-classes=3', '--bogus=1', *sys.argv[1:]])\n"
        "print(code, 'tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *dirs(tmp_path)],
        capture_output=True,
        text=True,
        env=trainer_env(),
        timeout=120,
    )
    assert out.stdout.split() == ["2", "False"], out.stderr


def test_missing_directories_exit_2(tmp_path):
    result = run_trainer(["--train-data=x", "--num-classes=3"], threads=False)
    assert result.returncode == 2
    assert "--model-dir is not set and $AIP_MODEL_DIR is empty" in result.stderr


def test_missing_data_exits_2_before_tensorflow_loads(tmp_path):
    # A local pattern that matches nothing is found with Python's glob before TensorFlow is
    # imported (trainer/plan.py check_local_data): -X importtime lists every module the process
    # imported, and tensorflow is not among them.
    cmd = [sys.executable, "-X", "importtime", "-m", "trainer.task"]
    args = ["--train-data=/nonexistent/train-*", "--num-classes=3"] + dirs(tmp_path)
    result = subprocess.run(cmd + args, capture_output=True, text=True, env=trainer_env(), timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    imported = [line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")]
    assert "trainer.plan" in imported  # the listing was captured: its silence on tensorflow counts
    assert not [m for m in imported if m == "tensorflow" or m.startswith("tensorflow.")]
    assert lines[-1] == "error: no files match /nonexistent/train-*"
