"""Fixtures for the trainer tests: small TFRecord data sets and a subprocess runner.

Training runs in subprocesses (`python -m trainer.task`), as the container and the local runner
run it: TensorFlow's runtime settings (logical CPUs, threads, strategy) are per process.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


class Lazy:
    """A module imported on first use: collecting the suite (every worker, and `make test-fast`,
    which deselects these files) must not pay TensorFlow's or Keras's import."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):  # pytest's probes while collecting (__test__, ...): not the module's
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


PYTHON = sys.executable
# Two cores are shared with other test runs: keep every trainer process small.
THREAD_FLAGS = ["--intra-op-threads=2", "--inter-op-threads=2", "--data-threads=2"]


def trainer_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("CLUSTER_SPEC", "TF_CONFIG", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")
    }
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""})
    env.update(extra)
    return env


def dirs(base: Path) -> list[str]:
    return [
        f"--model-dir={base}/model/",
        f"--checkpoint-dir={base}/checkpoints/",
        f"--tensorboard-dir={base}/logs/",
    ]


def start_trainer(args: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "-m", "trainer.task", *args, *THREAD_FLAGS],
        env=env or trainer_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def run_trainer(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 180, threads: bool = True
) -> subprocess.CompletedProcess:
    cmd = [PYTHON, "-m", "trainer.task", *args, *(THREAD_FLAGS if threads else [])]
    return subprocess.run(cmd, env=env or trainer_env(), capture_output=True, text=True, timeout=timeout)


def read_metrics(base: Path) -> dict:
    return json.loads((base / "metrics.json").read_text())


def kill_all(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture(scope="session")
def synth_data(tmp_path_factory) -> Path:
    """128 train / 32 eval random 24x24 JPEGs in 4 classes, 4 + 1 shards: trainer.datagen's
    generator, written as `data synth` writes it (no TensorFlow in this process: the modules that
    only run trainer processes do not pay its import)."""
    from vertex_trainer.api import synthesize_data
    from vertex_trainer.settings import Settings

    out = tmp_path_factory.mktemp("synth")
    synthesize_data(
        str(out),
        examples=128,
        shards=4,
        image_size=24,
        num_classes=4,
        seed=1,
        eval_examples=32,
        settings=Settings(),
    )
    return out


@pytest.fixture(scope="session")
def corrupt_data(synth_data, tmp_path_factory) -> Path:
    """synth_data with a byte flipped in the middle of train-00002-of-00004 (a CRC error there)."""
    import shutil

    out = tmp_path_factory.mktemp("corrupt") / "data"
    shutil.copytree(synth_data, out)
    victim = out / "train-00002-of-00004"
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.write_bytes(bytes(raw))
    return out
