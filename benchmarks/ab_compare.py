"""Trainer vs plain Keras, A/B alternating, on this machine; the ratios go to a results file.

Each job runs `python -m trainer.task` (checkpointing, input-wait telemetry, TensorBoard and
progress all on, as shipped) and benchmarks/plain_keras.py (the script a user would write: same
model builder, optimizer, batch and steps_per_execution, tf.data defaults, nothing else) one
after the other, the order swapped every repeat, so drifting load hits both alike. The figure
is each run's metrics.json `train_examples_per_sec` (after the first, compiling execution;
the trainer's leaves out its checkpoint time), and `wall_examples_per_sec` (all of fit()).
The ratio is taken per pair; the table shows the medians. The real/synthetic row compares the
trainer with itself (`--synthetic-data`). /proc/loadavg is recorded around every run.

    .venv/bin/python benchmarks/ab_compare.py --repeats 3 --out benchmarks/RESULTS-ab.md
    # against another copy of the trainer:
    .venv/bin/python benchmarks/ab_compare.py --jobs tiny-spe32 --trainer-path /tmp/old
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from trainer_throughput import machine  # noqa: E402 - the same machine line as the other results


@dataclasses.dataclass(frozen=True)
class Job:
    name: str
    title: str
    model: str
    image_size: int
    batch: int
    spe: int
    steps: int  # per epoch
    epochs: int
    a: tuple = ()  # extra trainer flags
    b: str = "plain"  # plain | naive | synthetic (the trainer itself on synthetic data) | trainer (b_flags)
    b_flags: tuple = ()


JOBS = [
    Job("tiny-spe32", "tiny-cnn 64 px, batch 128, spe 32", "tiny-cnn", 64, 128, 32, 64, 3),
    Job("tiny-spe1", "tiny-cnn 64 px, batch 128, spe 1", "tiny-cnn", 64, 128, 1, 64, 3),
    Job(
        "tiny-noaug",
        "tiny-cnn 64 px, no augmentation, spe 32",
        "tiny-cnn",
        64,
        128,
        32,
        64,
        3,
        a=("--augment=none",),
        b_flags=("--augment=none",),
    ),
    Job(
        "tiny-naive",
        "tiny-cnn 64 px, spe 32, vs a naive plain pipeline",
        "tiny-cnn",
        64,
        128,
        32,
        64,
        3,
        b="naive",
        b_flags=("--naive",),
    ),
    Job("resnet50", "ResNet-50 64 px, batch 32, spe 8", "resnet50", 64, 32, 8, 16, 3),
    Job(
        "real-vs-synthetic",
        "tiny-cnn 64 px, spe 32: real / synthetic (trainer)",
        "tiny-cnn",
        64,
        128,
        32,
        64,
        3,
        b="synthetic",
    ),
    Job(
        "nice-vs-nice0",
        "tiny-cnn 64 px, spe 32: --data-nice 19 (default) / --data-nice 0 (trainer)",
        "tiny-cnn",
        64,
        128,
        32,
        64,
        3,
        b="trainer",
        b_flags=("--data-nice=0",),
    ),
    Job(
        "real-cached-vs-synthetic",
        "tiny-cnn 64 px, spe 32, --cache-decoded: real / synthetic (trainer)",
        "tiny-cnn",
        64,
        128,
        32,
        64,
        3,
        a=("--cache-decoded",),
        b="synthetic",
    ),
]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run_trainer(job: Job, data: Path, out: Path, env: dict, extra=()) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "trainer.task",
        f"--model={job.model}",
        f"--train-data={data}/train-*",
        "--num-classes=10",
        f"--image-size={job.image_size}",
        f"--epochs={job.epochs}",
        f"--steps-per-epoch={job.steps}",
        f"--batch-size={job.batch}",
        f"--steps-per-execution={job.spe}",
        "--learning-rate=0.1",
        f"--base-batch-size={job.batch}",
        "--warmup-epochs=0",
        f"--model-dir={out}/model",
        f"--checkpoint-dir={out}/ckpt",
        f"--tensorboard-dir={out}/logs",
        *job.a,
        *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"trainer failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    m = json.loads((out / "metrics.json").read_text())
    # An older trainer (before issue 26) has no wall_examples_per_sec: derive it from train_seconds.
    wall = m.get("wall_examples_per_sec") or m["steps"] * m["global_batch_size"] / m["train_seconds"]
    return {"steady": m["train_examples_per_sec"], "wall": wall}


def run_plain(job: Job, data: Path, out: Path, env: dict) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        str(HERE / "plain_keras.py"),
        f"--model={job.model}",
        f"--train-data={data}/train-*",
        "--num-classes=10",
        f"--image-size={job.image_size}",
        f"--epochs={job.epochs}",
        f"--steps-per-epoch={job.steps}",
        f"--batch-size={job.batch}",
        f"--steps-per-execution={job.spe}",
        f"--out={out}/metrics.json",
        *job.b_flags,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"baseline failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    m = json.loads((out / "metrics.json").read_text())
    return {"steady": m["train_examples_per_sec"], "wall": m["wall_examples_per_sec"]}


def measure(job: Job, data: Path, work: Path, repeats: int, env: dict) -> dict:
    pairs = []
    for i in range(repeats):
        # i bound as a default: the closures are run within this iteration, but bound, they cannot
        # pick up a later one's index
        def a(i: int = i):
            return run_trainer(job, data, work / f"{job.name}-a{i}", env)

        def b(i: int = i):
            if job.b == "synthetic":
                return run_trainer(job, data, work / f"{job.name}-b{i}", env, extra=("--synthetic-data",))
            if job.b == "trainer":
                return run_trainer(job, data, work / f"{job.name}-b{i}", env, extra=job.b_flags)
            return run_plain(job, data, work / f"{job.name}-b{i}", env)

        before = loadavg()
        first, second = (a, b) if i % 2 == 0 else (b, a)
        r1 = first()
        r2 = second()
        ra, rb = (r1, r2) if i % 2 == 0 else (r2, r1)
        pair = {
            "a": ra,
            "b": rb,
            "ratio": ra["steady"] / rb["steady"],
            "wall_ratio": ra["wall"] / rb["wall"],
            "load": f"{before} -> {loadavg()}",
            "order": "AB" if i % 2 == 0 else "BA",
        }
        pairs.append(pair)
        print(
            f"{job.name} #{i} {pair['order']}: trainer {ra['steady']:.1f} vs {job.b} {rb['steady']:.1f} "
            f"= {pair['ratio']:.3f} (wall {pair['wall_ratio']:.3f}); load {pair['load']}",
            flush=True,
        )
    med = statistics.median
    return {
        "job": dataclasses.asdict(job),
        "pairs": pairs,
        "a": med(p["a"]["steady"] for p in pairs),
        "b": med(p["b"]["steady"] for p in pairs),
        "ratio": med(p["ratio"] for p in pairs),
        "wall_ratio": med(p["wall_ratio"] for p in pairs),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--jobs", default=",".join(j.name for j in JOBS), help="comma-separated job names")
    p.add_argument("--jpeg-size", type=int, default=80, help="stored JPEG side (px)")
    p.add_argument("--trainer-path", help="PYTHONPATH of another copy of the trainer package (before/after)")
    p.add_argument("--label", default="", help="a name for this trainer in the results")
    p.add_argument("--out", help="write the results as Markdown here (and the raw pairs as .json beside it)")
    args = p.parse_args()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    if args.trainer_path:
        env["PYTHONPATH"] = os.pathsep.join([args.trainer_path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    chosen = [j for j in JOBS if j.name in args.jobs.split(",")]

    from trainer import datagen

    load_start = loadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        data = Path(tmp) / "data"
        datagen.synthesize(
            str(data), examples=4096, shards=16, image_size=args.jpeg_size, num_classes=10, seed=3
        )
        for job in chosen:
            results.append(measure(job, data, Path(tmp), args.repeats, env))

    lines = [
        f"# Trainer vs plain Keras, A/B alternating{' (' + args.label + ')' if args.label else ''}",
        "",
        f"Machine: {machine()}. /proc/loadavg at start {load_start}, at end {loadavg()} (per pair below).",
        f"Data: 4,096 synthetic {args.jpeg_size} px JPEGs in 16 TFRecord shards (random resized crop + flip "
        "unless said). Command: `.venv/bin/python benchmarks/ab_compare.py --repeats "
        f"{args.repeats}{' --jobs ' + args.jobs if args.jobs != ','.join(j.name for j in JOBS) else ''}"
        f"{' --out ' + args.out if args.out else ''}`",
        "",
        "A = `python -m trainer.task` as shipped; B = benchmarks/plain_keras.py (or the trainer on synthetic "
        "data). examples/s = metrics.json `train_examples_per_sec` (after the first execution); ratio = "
        f"median over {args.repeats} alternating pairs of A/B; wall = the same over all of fit().",
        "",
        "| job | A ex/s | B ex/s | A/B (steady) | A/B (wall) | pairs (steady) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        each = ", ".join(f"{q['ratio']:.3f}" for q in r["pairs"])
        lines.append(
            f"| {r['job']['title']} | {r['a']:,.0f} | {r['b']:,.0f} | {r['ratio']:.3f} | "
            f"{r['wall_ratio']:.3f} | {each} |"
        )
    lines += ["", "Load per pair (1, 5, 15 min, before -> after):", ""]
    lines += [f"- {r['job']['name']}: " + "; ".join(q["load"] for q in r["pairs"]) for r in results]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
