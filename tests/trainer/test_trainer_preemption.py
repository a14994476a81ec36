"""A Spot preemption: SIGTERM (Vertex AI sends it before stopping the VM), then SIGKILL.

The trainer saves on a time budget (--checkpoint-interval-secs), at epoch ends and on SIGTERM
(trainer/checkpoint.py). Whatever the kill lands on, the rerun with the same directories must
resume from the last checkpoint, losing at most the work done since it, and finish the run.

One chain of three trainer processes checks every path (each used to have two of its own):
a SIGTERM (the save, exit 143, a rerun that resumes right after it, mid-epoch), then in that rerun
a SIGTERM with a SIGKILL right behind it, sent on reading an epoch's end (no grace: exit -9, and
the last checkpoint is the epoch's, or a later one), then the last run resumes from it and
finishes. Its data has a corrupt shard, which --skip-corrupt trains past (the same data without
it stops: test_trainer_task.py::test_corrupt_record_stops_with_the_file_name).
"""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from .conftest import dirs, kill_all, read_metrics, run_trainer, start_trainer

# Three trainer runs on a shared machine: more than the default 300 s may be needed.
pytestmark = [pytest.mark.trainer, pytest.mark.slow, pytest.mark.timeout(600)]

# Enough steps per epoch that each run is still training when the test's signal lands (sent on
# reading a line, with at least an epoch's steps left, even with both cores busy), and no more.
STEPS, EPOCHS = 64, 2
SAVED = re.compile(rf"^trainer: checkpoint \((time|sigterm)\) at epoch (\d+) step (\d+)/{STEPS} ")
RESUMED = re.compile(
    rf"resumed from backup in .*: continuing at epoch (\d+)/{EPOCHS}(?: step (\d+)/{STEPS})?"
)
PROGRESS = re.compile(rf"^progress epoch=(\d+)/{EPOCHS} step={STEPS}/{STEPS} ")


def preemptible_args(data, base) -> list[str]:
    # Epochs of tiny steps, one step per execution: a save can land after any step. The first
    # execution (tracing, compiling) outlasts the interval, so a time-based save follows it.
    return [
        f"--train-data={data}/train-*",
        "--skip-corrupt",
        "--model=tiny-cnn",
        "--num-classes=4",
        "--image-size=16",
        f"--epochs={EPOCHS}",
        f"--steps-per-epoch={STEPS}",
        "--batch-size=8",
        "--steps-per-execution=1",
        "--warmup-epochs=0",
        "--log-interval-secs=0",
        "--checkpoint-interval-secs=0.5",
        *dirs(base),
    ]


def steps_done(epoch: str, step: str) -> int:
    """Steps of the whole run done at a save (its epoch, and its step of that epoch: 1-based)."""
    return (int(epoch) - 1) * STEPS + int(step)


def resumed_after(m: re.Match[str]) -> int:
    """Steps of the whole run done before a rerun resumed (RESUMED: at an epoch's start, or mid-epoch
    at the step it names)."""
    return steps_done(m.group(1), m.group(2) or "1") - 1


def read_until(proc: subprocess.Popen, pattern: re.Pattern[str], seen: list[str]) -> re.Match[str]:
    """The first line of the trainer's output that `pattern` matches; every line read so far in `seen`."""
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        m = pattern.search(line)
        if m:
            return m
    proc.wait(timeout=30)
    pytest.fail(f"the run ended (exit {proc.returncode}) without {pattern.pattern!r}:\n{''.join(seen)}")


def test_sigterm_then_sigkill_after_an_epoch_and_each_rerun_resumes_from_the_last_checkpoint(
    corrupt_data, tmp_path
):
    args = preemptible_args(corrupt_data, tmp_path)

    # 1. SIGTERM after the first time-based save: the trainer saves once more, then exits 143.
    proc, seen = start_trainer(args), []
    try:
        while (m := read_until(proc, SAVED, seen)).group(1) != "time":
            pass
        time_done = steps_done(m.group(2), m.group(3))
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]  # well inside Vertex's 30 s grace on an idle machine
    finally:
        kill_all([proc])
    assert proc.returncode == 128 + signal.SIGTERM, rest
    saved = [m for m in map(SAVED.match, rest.splitlines()) if m and m.group(1) == "sigterm"]
    assert len(saved) == 1, rest
    epoch, step = saved[0].group(2), saved[0].group(3)
    sigterm_done = steps_done(epoch, step)
    assert time_done <= sigterm_done < STEPS  # in epoch 1: the rerun has its end to read
    assert f"SIGTERM: saved a checkpoint at epoch {epoch} step {step}/{STEPS}" in rest
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "model").exists()

    # 2. The rerun resumes right after that save (nothing lost, nothing redone). On reading the end
    # of an epoch, SIGTERM and SIGKILL at once: no grace, the SIGTERM save may never happen.
    proc, seen = start_trainer(args), []
    try:
        resumed = read_until(proc, RESUMED, seen)
        assert resumed_after(resumed) == sigterm_done
        killed_after = int(read_until(proc, PROGRESS, seen).group(1))
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_all([proc])
    assert proc.returncode == -signal.SIGKILL, "".join(seen)
    assert not (tmp_path / "metrics.json").exists()

    # 3. The last run resumes from the last checkpoint (the epoch's end, or one after it): not
    # from zero, at most the interrupted epoch replayed. It trains every step left and exports.
    result = run_trainer(args, timeout=500)
    assert result.returncode == 0, result.stdout + result.stderr
    resumed = RESUMED.search(result.stdout)
    assert resumed, result.stdout
    assert killed_after * STEPS <= resumed_after(resumed) < STEPS * EPOCHS
    start = int(resumed.group(1))
    assert killed_after < start
    epochs = [int(m.group(1)) for m in map(PROGRESS.match, result.stdout.splitlines()) if m]
    assert epochs == list(range(start, EPOCHS + 1))
    assert "exported model" in result.stdout
    metrics = read_metrics(tmp_path)
    assert metrics["initial_epoch"] == start - 1 and metrics["epochs"] == EPOCHS
    assert metrics["steps"] == STEPS * EPOCHS and metrics["train_examples_per_sec"] > 0
    assert metrics["checkpoints"] >= 1 and metrics["checkpoint_seconds"] > 0
