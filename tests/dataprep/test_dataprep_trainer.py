"""The trainer reads what `data convert` wrote, with its own input pipeline, and trains on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import read_split

pytestmark = pytest.mark.trainer


def test_the_trainer_input_pipeline_reads_the_records(converted):
    from trainer import data

    out = converted.out
    expected = {}
    for split in ("train", "validation"):
        files = data.list_files(f"{out}/{split}-*")
        assert [os.path.basename(f) for f in files] == sorted(read_split(out, split))
        cfg = data.PipelineConfig(image_size=24, num_classes=3, training=False, deterministic=True)
        labels = [int(y) for _, ys in data.build_dataset(files, cfg, 1) for y in ys.numpy()]
        expected[split] = [
            ex["image/class/label"][0] for shard in read_split(out, split).values() for ex in shard
        ]
        assert sorted(labels) == sorted(expected[split])  # the trainer interleaves its files
    assert sum(len(v) for v in expected.values()) == len(converted.tree.good)


@pytest.mark.slow
def test_the_trainer_trains_on_the_output(converted, tmp_path):
    out = converted.out
    args = [
        f"--train-data={out}/train-*",
        f"--eval-data={out}/validation-*",
        "--model=tiny-cnn",
        "--num-classes=3",
        "--image-size=16",
        "--epochs=1",
        "--batch-size=4",
        "--base-batch-size=4",
        "--learning-rate=0.05",
        "--warmup-epochs=0",
        "--steps-per-epoch=4",
        "--steps-per-execution=2",
        f"--model-dir={tmp_path}/model/",
        f"--checkpoint-dir={tmp_path}/checkpoints/",
        f"--tensorboard-dir={tmp_path}/logs/",
        "--intra-op-threads=2",
        "--inter-op-threads=2",
        "--data-threads=2",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIP_", "CLUSTER_SPEC", "TF_CONFIG"))}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""})
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.task", *args], env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["steps"] == 4 and metrics["final_train_loss"] > 0
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
