"""Fixtures for the throughput tests: a run starved of input (one data thread decoding 512 px
JPEGs for a tiny model at 32 px), the real-data run of a bench of that job, shared by the session;
the two host-overhead runs (steps_per_execution 1 and auto, each profiled), whose spe1 run's trace
`profile` and `tensorboard` read (test_profile_run.py).

The synthetic run of a bench and the bench's report are those of README.md's bench block
(`bench job_specs/quickstart-local.yaml --local --steps 64`), which test_throughput_bench.py runs
as the docs harness would: the suite trains each of them once. Training runs in subprocesses, as
on Vertex.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.cli_support import cli_command, invoke

REPO = Path(__file__).resolve().parents[2]
STEPS = 64  # README.md's bench: 4 executions of 16 steps, the first (tracing) not measured
# The starved job's bench: 4 executions of 8 steps, as starved as 64 steps are (0.55-0.71 in 7 runs here,
# busy) at half the decoding; at 16 steps (3 measured executions of 4) one run of 3 waited 0.25.
STARVED_STEPS = 32
# `data synth` (no TensorFlow in its process): 64 examples of 512 px in 4 shards.
SYNTH = "data synth --examples 64 --shards 4 --image-size 512 --num-classes 4 --seed 5".split()


def quiet_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("CLUSTER_SPEC", "TF_CONFIG", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")
    }
    return env | {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "400"} | extra


@dataclass
class TrainerRuns:
    """The trainer runs one command made: what it printed, and each run's output and name."""

    stdout: str
    stderr: str  # the runs' trainer lines (prefixed `workerpool0-0 | `) and notes
    runs: dict[str, Path]  # kind -> output directory
    names: dict[str, str]  # kind -> the job's name

    def metrics(self, kind: str) -> dict:
        return json.loads((self.runs[kind] / "metrics.json").read_text())

    def trainer_lines(self, kind: str) -> list[str]:
        """The trainer's own lines of one run, in order, without the replica prefix."""
        start = self.stderr.index(f"Running {self.names[kind]} locally")
        end = self.stderr.find("Running ", start + 1)
        block = self.stderr[start : end if end > 0 else None]
        return [line.split(" | ", 1)[1] for line in block.splitlines() if " | " in line]


@pytest.fixture(scope="session")
def big_jpegs(tmp_path_factory) -> Path:
    """64 noise JPEGs of 512 x 512 px in 4 shards: expensive to decode for a 32 px model."""
    out = tmp_path_factory.mktemp("big-jpegs")
    proc = invoke([*SYNTH, out], env=quiet_env())  # the CLI in this process
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def starved_run(big_jpegs, tmp_path_factory) -> TrainerRuns:
    """The real-data run of `vertex-trainer bench SPEC --local --steps 32` on a starved job: the
    bench plan's own job (performance.benchmark.plan: one epoch of 32 steps, 8 per execution, no
    evaluation, no warmup), run alone with `submit --local --output json`. A bench's synthetic
    run and its report: README.md's bench block, which test_throughput_bench.py runs."""
    from vertex_trainer.performance import benchmark
    from vertex_trainer.spec import load_spec

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
    plan = benchmark.plan(load_spec(spec), steps=STARVED_STEPS, local=True)
    assert [run.kind for run in plan.runs] == ["synthetic", "real"]
    real = plan.runs[1].spec
    job = base / "starved-bench-real.yaml"
    job.write_text(yaml.safe_dump(real.to_dict()))
    # The CLI in this process; the trainer it starts runs in its own, as on Vertex AI.
    proc = invoke(["submit", job, "--local", "--output", "json"], env=quiet_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-5000:]
    result = json.loads(proc.stdout)
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    return TrainerRuns(proc.stdout, proc.stderr, {"real": Path(result["output_dir"])}, {"real": real.name})


HOST_STEPS = 500  # auto: 5 executions of 100; the first two are start-up, the profiled one's trips left out
# spe1: 300 steps (293 measured round trips), as 500 were: auto is still 100 per execution (its
# verdict says so), and the steps per execution the verdict asks for (256 up to 93% of the time in
# round trips; 0.63-0.88 measured, busy) fit in the epoch, or the verdict reads differently.
SPE1_STEPS = 300
PROFILED = "3,6"  # the spe1 run's profiled steps, one an execution: what `profile` reads


@dataclass
class HostRun:
    output: Path
    stderr: str

    @property
    def metrics(self) -> dict:
        return json.loads((self.output / "metrics.json").read_text())

    def lines(self) -> list[str]:
        return [line.split(" | ", 1)[1] for line in self.stderr.splitlines() if " | " in line]


@pytest.fixture(scope="session")
def host_runs(tmp_path_factory) -> dict[str, HostRun]:
    """Two `submit --local` runs of tiny-cnn on 8 px synthetic batches of 8, side by side:
    steps_per_execution 1 (SPE1_STEPS steps, PROFILED traced) and auto (HOST_STEPS, step 1)."""
    base = tmp_path_factory.mktemp("host-overhead")
    data = base / "data"
    synth = ["data", "synth", "--examples", "16", "--shards", "1", "--image-size", "8"]
    made = invoke([*synth, "--num-classes", "4", data], env=quiet_env())  # the CLI in this process
    assert made.returncode == 0, made.stderr[-3000:]
    procs = {}
    for kind, spe, profile, steps in (
        ("spe1", "1", PROFILED, SPE1_STEPS),
        ("auto", "auto", "1,1", HOST_STEPS),
    ):
        spec = base / f"{kind}.yaml"
        spec.write_text(
            textwrap.dedent(f"""\
            name: host-{kind}
            region: us-central1
            hardware: cpu
            image: {{uri: example.com/trainer:v1}}
            output_dir: {base}/out/{kind}
            trainer:
              model: tiny-cnn
              train_data: {data}/train-*
              num_classes: 4
              image_size: 8
              batch_size: 8
              steps_per_epoch: {steps}
              warmup_epochs: 0
              synthetic_data: true
              steps_per_execution: {spe}
              profile_steps: "{profile}"
              intra_op_threads: 1
              inter_op_threads: 1
              log_interval_secs: 0
            """)
        )
        procs[kind] = subprocess.Popen(
            [*cli_command(), "submit", str(spec), "--local", "--output", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=quiet_env(),
            cwd=REPO,
        )
    out = {}
    for kind, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=400)
        assert proc.returncode == 0, stderr[-5000:]
        result = json.loads(stdout)
        assert result["state"] == "JOB_STATE_SUCCEEDED"
        out[kind] = HostRun(Path(result["output_dir"]), stderr)
    return out
