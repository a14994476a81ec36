"""A Spot preemption: SIGTERM (Vertex AI sends it before stopping the VM), then SIGKILL.

The trainer saves on a time budget (--checkpoint-interval-secs), at epoch ends and on SIGTERM
(trainer/checkpoint.py). Whatever the kill lands on, the rerun with the same directories must
resume from the last checkpoint, losing at most the work done since the last time-based one,
and finish the run.
"""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from .conftest import dirs, kill_all, read_metrics, run_trainer, start_trainer

# Two trainer runs each, on a shared machine: more than the default 300 s may be needed.
pytestmark = [pytest.mark.trainer, pytest.mark.slow, pytest.mark.timeout(600)]

# Enough steps that the first run is still training when the test's SIGTERM lands (it is sent on
# reading the first time-based save, a few steps in, even with both cores busy), and no more: the
# rerun trains every step left, at one step per execution and a save every half second.
STEPS = 120
SAVED = re.compile(rf"^trainer: checkpoint \((time|sigterm)\) at epoch 1 step (\d+)/{STEPS} ")
RESUMED = re.compile(rf"resumed from backup in .*: continuing at epoch 1/1 step (\d+)/{STEPS}")


def preemptible_args(data, base) -> list[str]:
    # One long epoch of tiny steps, one step per execution: a save can land after any step. The
    # first execution (tracing, compiling) outlasts the interval, so a time-based save follows it.
    return [
        f"--train-data={data}/train-*",
        "--model=tiny-cnn",
        "--num-classes=4",
        "--image-size=16",
        "--epochs=1",
        f"--steps-per-epoch={STEPS}",
        "--batch-size=8",
        "--steps-per-execution=1",
        "--warmup-epochs=0",
        "--log-interval-secs=0",
        "--checkpoint-interval-secs=0.5",
        *dirs(base),
    ]


def run_until_time_checkpoint(args):
    """Start the trainer and read its output up to its first time-based checkpoint: (process, step)."""
    proc = start_trainer(args)
    for line in proc.stdout:
        m = SAVED.match(line)
        if m and m.group(1) == "time":
            return proc, int(m.group(2))
    proc.wait(timeout=30)
    pytest.fail(f"the run ended (exit {proc.returncode}) without a time-based checkpoint")


def rerun_resumes_at(args) -> tuple[int, subprocess.CompletedProcess]:
    result = run_trainer(args, timeout=500)
    assert result.returncode == 0, result.stdout + result.stderr
    resumed = RESUMED.search(result.stdout)
    assert resumed, result.stdout
    return int(resumed.group(1)), result


def test_sigterm_saves_and_the_rerun_resumes_there(synth_data, tmp_path):
    args = preemptible_args(synth_data, tmp_path)
    proc, time_step = run_until_time_checkpoint(args)
    try:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]  # well inside Vertex's 30 s grace on an idle machine
    finally:
        kill_all([proc])
    assert proc.returncode == 128 + signal.SIGTERM, rest
    saved = [m for m in map(SAVED.match, rest.splitlines()) if m and m.group(1) == "sigterm"]
    assert len(saved) == 1, rest
    sigterm_step = int(saved[0].group(2))
    assert time_step <= sigterm_step < STEPS
    assert f"SIGTERM: saved a checkpoint at epoch 1 step {sigterm_step}/{STEPS}" in rest
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "model").exists()

    start, _ = rerun_resumes_at(args)
    assert start == sigterm_step + 1  # nothing lost, nothing redone
    metrics = read_metrics(tmp_path)
    assert metrics["steps"] == STEPS and metrics["train_examples_per_sec"] > 0
    assert metrics["checkpoints"] >= 1 and metrics["checkpoint_seconds"] > 0


def test_sigkill_right_after_sigterm_loses_at_most_the_work_since_the_time_checkpoint(synth_data, tmp_path):
    args = preemptible_args(synth_data, tmp_path)
    proc, time_step = run_until_time_checkpoint(args)
    try:
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGKILL)  # no grace at all: the SIGTERM save may never happen
        proc.wait(timeout=30)
    finally:
        kill_all([proc])
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "metrics.json").exists()

    start, result = rerun_resumes_at(args)
    assert time_step + 1 <= start <= STEPS  # from the last checkpoint, never from zero
    assert "exported model" in result.stdout and read_metrics(tmp_path)["steps"] == STEPS
