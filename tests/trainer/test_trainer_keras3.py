"""A Keras 3 model factory's checkpoints (issue 42 item 2): SIGTERM saves one (exit 143) into
<checkpoint_dir>/chief, Keras 3's BackupAndRestore format, and the rerun resumes from it (at the
start of the epoch it stopped in: Keras 3's fit cannot start mid-epoch, the trainer says so),
trains the epochs left and exports. The rest of the Keras 3 path (validate, two replicas, the
export served): tests/owncode/test_owncode_keras3.py."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from .conftest import dirs, kill_all, read_metrics, run_trainer, start_trainer, trainer_env

pytestmark = [pytest.mark.trainer, pytest.mark.slow, pytest.mark.timeout(600)]

# As tests/trainer/test_trainer_preemption.py: enough one-step executions that the run is still
# training when the signal lands, a time-based save after the first (compiling) execution.
STEPS, EPOCHS = 64, 3
SAVED = re.compile(rf"^trainer: checkpoint \(time\) at epoch (\d+) step (\d+)/{STEPS} ")
PROGRESS = re.compile(rf"^progress epoch=(\d+)/{EPOCHS} step={STEPS}/{STEPS} ")
NET = """
import keras


def build(num_classes, image_size, dtype):
    inputs = keras.Input(shape=(image_size, image_size, 3))
    x = keras.layers.Conv2D(4, 3, padding="same")(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
"""


def test_a_keras_3_model_saves_on_sigterm_and_the_rerun_resumes_from_it(tmp_path: Path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "k3net.py").write_text(NET)
    env = trainer_env(PYTHONPATH=str(code))
    args = [
        "--model=k3net:build",
        "--train-data=unused",
        "--synthetic-data",
        "--num-classes=3",
        "--image-size=16",
        f"--epochs={EPOCHS}",
        f"--steps-per-epoch={STEPS}",
        "--batch-size=8",
        "--steps-per-execution=1",
        "--warmup-epochs=0",
        "--log-interval-secs=0",
        "--checkpoint-interval-secs=0.5",
        *dirs(tmp_path / "run"),
    ]
    proc, seen = start_trainer(args, env=env), []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if SAVED.search(line):
                break
        else:
            pytest.fail("no time-based save:\n" + "".join(seen))
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]
    finally:
        kill_all([proc])
    output = "".join(seen) + rest
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "Keras 3 trains k3net:build (k3net.py line 2: import keras)" in output
    saved = re.search(rf"SIGTERM: saved a checkpoint at epoch (\d+) step (\d+)/{STEPS}", rest)
    assert saved, output
    epoch, step = int(saved.group(1)), int(saved.group(2))
    backup = tmp_path / "run" / "checkpoints" / "chief"
    assert (backup / "latest.weights.h5").is_file()
    metadata = json.loads((backup / "training_metadata.json").read_text())
    # The epoch a rerun starts at (0-based) and the steps of it done at the save.
    assert (metadata["epoch"], metadata["batch"]) == ((epoch, 0) if step == STEPS else (epoch - 1, step))
    assert not (tmp_path / "run" / "model").exists()

    result = run_trainer(args, env=env, timeout=500)
    assert result.returncode == 0, result.stdout + result.stderr
    start = metadata["epoch"] + 1  # 1-based
    if metadata["batch"]:
        assert (
            f"Keras 3 resumes at the start of epoch {start}: the {metadata['batch']} steps of it done "
            "before the checkpoint run again" in result.stdout
        )
    epochs = [int(m.group(1)) for m in map(PROGRESS.match, result.stdout.splitlines()) if m]
    assert epochs == list(range(start, EPOCHS + 1)), result.stdout
    metrics = read_metrics(tmp_path / "run")
    assert metrics["initial_epoch"] == start - 1 and metrics["epochs"] == EPOCHS
    assert metrics["checkpoints"] >= EPOCHS - start + 1  # each epoch end saved
    assert (tmp_path / "run" / "model" / "saved_model.pb").is_file()
    assert not backup.exists()  # a finished run leaves no backup behind (as tf-keras)
