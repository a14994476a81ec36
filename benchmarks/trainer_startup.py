"""A short trainer run's CPU (user+sys) beyond TensorFlow's import: this tree's trainer against
another revision's, in alternating fresh processes, and a check that both give the same results.

Each round runs, in an order that alternates between rounds:
  import   `python -c "import trainer._keras"` (TensorFlow + tf-keras: the floor of any trainer process)
  before   `python -m trainer.task` with the trainer package of --before (a git revision)
  after    the same command with this tree's trainer_image/trainer
The command is the test suite's common one (tests/trainer: tiny-cnn, 16 px, 128 records in 4
files, 2 epochs of 8 steps, eval, export, 2 threads). The CPU of each process is its own
rusage (os.wait4), so other work on the machine changes it less than wall time; the figures are
medians. Then one deterministic run of each (`--deterministic=true --augment=none`) must give
the same losses and accuracies, the same signatures in the SavedModel, and the same
`serving_default` probabilities on the same JPEG bytes (to 1e-6).

Usage:
  .venv/bin/python benchmarks/trainer_startup.py --before HEAD~1 [--rounds 5]
Prints a Markdown table; benchmarks/RESULTS-trainer-startup.md holds the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The compared fields of metrics.json (the rest are timings).
RESULT_FIELDS = ("final_train_loss", "final_train_accuracy", "eval_loss", "eval_accuracy", "steps")

# Prints an export's SignatureDefs and serving_default's answer to fixed JPEG bytes.
SERVE = r"""
import io, json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from trainer._keras import tf
import numpy as np
from PIL import Image
rng = np.random.default_rng(0)
jpegs = []
for _ in range(4):
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(buf, format="JPEG")
    jpegs.append(buf.getvalue())
from google.protobuf import json_format
from tensorflow.python.saved_model import loader_impl
# The SignatureDefs as saved; their inputs and outputs are maps, whose order varies by process.
saved = loader_impl.parse_saved_model(sys.argv[1]).meta_graphs[0].signature_def
specs = {name: json_format.MessageToDict(sig) for name, sig in saved.items()}
loaded = tf.saved_model.load(sys.argv[1])
served = loaded.signatures["serving_default"](image_bytes=tf.constant(jpegs))
print(json.dumps({"signatures": specs, "probabilities": served["probabilities"].numpy().tolist()}))
"""


def trainer_args(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--model=tiny-cnn",
        f"--train-data={data}/train-*",
        f"--eval-data={data}/validation-*",
        "--num-classes=4",
        "--image-size=16",
        "--epochs=2",
        "--batch-size=16",
        "--learning-rate=0.1",
        "--base-batch-size=16",
        "--warmup-epochs=0.5",
        "--seed=1",
        f"--model-dir={out}/model/",
        f"--checkpoint-dir={out}/checkpoints/",
        f"--tensorboard-dir={out}/logs/",
        "--intra-op-threads=2",
        "--inter-op-threads=2",
        "--data-threads=2",
        *extra,
    ]


def cpu_of(cmd: list[str], pythonpath: Path, log: Path) -> float:
    """user+sys CPU seconds of one process (exits non-zero: SystemExit with its log)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(pythonpath),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
    }
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{log.read_text()[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def checkout(rev: str, into: Path) -> Path:
    """trainer_image/ of git revision `rev`, extracted under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "trainer_image/trainer"], check=True, capture_output=True
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "trainer_image"


def same_results(trees: dict[str, Path], data: Path, work: Path) -> list[str]:
    """One deterministic run per tree; the differences between them (empty: none)."""
    seen = {}
    for name, tree in trees.items():
        out = work / f"same-{name}"
        cmd = [
            sys.executable,
            "-m",
            "trainer.task",
            *trainer_args(data, out, "--deterministic=true", "--augment=none"),
        ]
        cpu_of(cmd, tree, work / f"same-{name}.log")
        metrics = json.loads((out / "metrics.json").read_text())
        served = subprocess.run(
            [sys.executable, "-c", SERVE, str(out / "model")],
            env={**os.environ, "PYTHONPATH": str(tree), "TF_CPP_MIN_LOG_LEVEL": "2"},
            check=True,
            capture_output=True,
            text=True,
        )
        seen[name] = ({k: metrics[k] for k in RESULT_FIELDS}, json.loads(served.stdout.splitlines()[-1]))
    (m1, s1), (m2, s2) = seen.values()
    problems = [f"{k}: {m1[k]} != {m2[k]}" for k in RESULT_FIELDS if m1[k] != m2[k]]
    if json.dumps(s1["signatures"], sort_keys=True) != json.dumps(s2["signatures"], sort_keys=True):
        problems.append(f"signatures differ: {s1['signatures']} != {s2['signatures']}")
    pairs = zip(s1["probabilities"], s2["probabilities"], strict=True)
    worst = max(abs(a - b) for r1, r2 in pairs for a, b in zip(r1, r2, strict=True))
    if worst > 1e-6:
        problems.append(f"serving_default probabilities differ by up to {worst:g}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision of the trainer to compare against")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="trainer-startup-"))
    try:
        from vertex_trainer.api import synthesize_data
        from vertex_trainer.settings import Settings

        data = work / "data"
        synthesize_data(
            str(data),
            examples=128,
            shards=4,
            image_size=24,
            num_classes=4,
            seed=1,
            eval_examples=32,
            settings=Settings(),
        )
        trees = {"before": checkout(args.before, work / "before"), "after": REPO / "trainer_image"}
        cpu: dict[str, list[float]] = {"import": [], "before": [], "after": []}
        for i in range(args.rounds):
            order = ["import", "before", "after"] if i % 2 == 0 else ["after", "before", "import"]
            for name in order:
                if name == "import":
                    cmd = [sys.executable, "-c", "import trainer._keras"]
                    tree = trees["after"]
                else:
                    out = work / f"{name}-{i}"
                    cmd = [sys.executable, "-m", "trainer.task", *trainer_args(data, out)]
                    tree = trees[name]
                cpu[name].append(cpu_of(cmd, tree, work / f"{name}-{i}.log"))
                if name != "import":
                    shutil.rmtree(work / f"{name}-{i}")
        problems = same_results(trees, data, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    floor = statistics.median(cpu["import"])
    machine = f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"{machine}; before = {args.before}\n")
    print("| process | CPU user+sys (s), median | beyond the import (s) | runs (s) |")
    print("|---|---:|---:|---|")
    for name, runs in cpu.items():
        med = statistics.median(runs)
        beyond = "" if name == "import" else f"{med - floor:.2f}"
        print(f"| {name} | {med:.2f} | {beyond} | {', '.join(f'{r:.2f}' for r in runs)} |")
    print()
    print("same results: " + ("yes" if not problems else "NO: " + "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
