"""Fixtures for the throughput tests: one `bench --local` run shared by the session.

The bench runs the trainer twice (synthetic batches, then real TFRecords), so one run gives both
trainer runs the tests look at: a synthetic run, and a run starved of input (one data thread
decoding 512 px JPEGs for a tiny model at 32 px). Training runs in subprocesses, as on Vertex.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_support import cli_command

REPO = Path(__file__).resolve().parents[2]
STEPS = 64  # 4 executions of 16 steps: the first (tracing) is not measured
SYNTH = (
    "import sys; from trainer.datagen import synthesize; "
    "synthesize(sys.argv[1], examples=64, shards=4, image_size=512, num_classes=4, seed=5)"
)


def quiet_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("CLUSTER_SPEC", "TF_CONFIG", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")
    }
    return env | {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "400"} | extra


@dataclass
class BenchRun:
    result: dict  # the JSON the command printed
    stderr: str  # both trainer runs' lines (prefixed `workerpool0-0 | `) and notes
    runs: dict[str, Path]  # kind -> output directory

    def metrics(self, kind: str) -> dict:
        return json.loads((self.runs[kind] / "metrics.json").read_text())

    def trainer_lines(self, kind: str) -> list[str]:
        """The trainer's own lines of one run, in order, without the replica prefix."""
        name = self.result["runs"][kind]["name"]
        start = self.stderr.index(f"Running {name} locally")
        end = self.stderr.find("Running ", start + 1)
        block = self.stderr[start : end if end > 0 else None]
        return [line.split(" | ", 1)[1] for line in block.splitlines() if " | " in line]


@pytest.fixture(scope="session")
def big_jpegs(tmp_path_factory) -> Path:
    """64 noise JPEGs of 512 x 512 px in 4 shards: expensive to decode for a 32 px model."""
    out = tmp_path_factory.mktemp("big-jpegs")
    proc = subprocess.run(
        [sys.executable, "-c", SYNTH, str(out)], capture_output=True, text=True, env=quiet_env(), timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def bench_run(big_jpegs, tmp_path_factory) -> BenchRun:
    """`vertex-trainer bench SPEC --local --steps 64 --output json` on a starved job."""
    base = tmp_path_factory.mktemp("bench")
    spec = base / "starved.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        name: starved
        region: us-central1
        hardware: cpu
        image: {{uri: example.com/trainer:v1}}
        output_dir: {base}/out
        trainer:
          model: tiny-cnn
          train_data: {big_jpegs}/train-*
          num_classes: 4
          image_size: 32
          batch_size: 16           # the decode/compute ratio of any batch, at half the decoding of 32
          data_threads: 1          # one thread decodes: the run is starved of input
          intra_op_threads: 2
          inter_op_threads: 2
          log_interval_secs: 0
        """)
    )
    proc = subprocess.run(
        [*cli_command(), "bench", str(spec), "--local", "--steps", str(STEPS), "--output", "json"],
        capture_output=True,
        text=True,
        env=quiet_env(),
        timeout=400,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    result = json.loads(proc.stdout)
    runs = {kind: Path(run["output_dir"]) for kind, run in result["runs"].items()}
    return BenchRun(result, proc.stderr, runs)
