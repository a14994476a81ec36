"""Trainer throughput on this machine (CPU).

(a) examples/s of the same tiny-cnn job at steps_per_execution 1, 8, 64 and one whole epoch,
    each a real `python -m trainer.task` run (steady state: median of the epochs after the first);
(b) the input pipeline alone (trainer.data.build_dataset) against what a user writes (tf.data
    defaults on, with and without a parallel map) and a sequential pipeline (tf.data's
    optimisations off), over the same TFRecords, with the CPU time each takes.

    .venv/bin/python benchmarks/trainer_throughput.py [--out benchmarks/RESULTS-trainer.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import tensorflow as tf

    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"TensorFlow {tf.__version__}, {platform.system()} {platform.release()}"
    )


def bench_steps_per_execution(
    data_dir: Path, work: Path, *, batch: int, steps: int, epochs: int, image_size: int
) -> list[tuple[str, float, float]]:
    rows = []
    for spe in sorted({s for s in (1, 8, 64) if s < steps} | {steps}):
        label = f"{spe}" + (" (whole epoch)" if spe == steps else "")
        out = work / f"spe{spe}"
        cmd = [
            sys.executable,
            "-m",
            "trainer.task",
            "--model=tiny-cnn",
            f"--train-data={data_dir}/train-*",
            "--num-classes=10",
            f"--image-size={image_size}",
            f"--epochs={epochs}",
            f"--steps-per-epoch={steps}",
            f"--batch-size={batch}",
            f"--steps-per-execution={spe}",
            "--warmup-epochs=0",
            "--cache",
            f"--model-dir={out}/model",
            f"--checkpoint-dir={out}/ckpt",
            f"--tensorboard-dir={out}/logs",
        ]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        result = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if result.returncode:
            raise SystemExit(f"trainer failed at steps_per_execution={spe}:\n{result.stderr[-3000:]}")
        metrics = json.loads((out / "metrics.json").read_text())
        rows.append((label, metrics["train_examples_per_sec"], metrics["step_time_ms"]))
        print(
            f"  steps_per_execution={label}: {metrics['train_examples_per_sec']:.0f} examples/s", flush=True
        )
    return rows


def bench_pipeline(
    files: list[str], *, batch: int, image_size: int, batches: int
) -> list[tuple[str, float, float]]:
    """(name, examples/s, process CPU-ms per 100 examples) of each pipeline over the same files."""
    from trainer import data

    cfg = data.PipelineConfig(image_size=image_size, num_classes=10, training=True, seed=0)
    rows = []
    for name, make in (
        ("trainer.data", lambda: data.build_dataset(files, cfg, batch)),
        (
            "plain (tf.data defaults, parallel map, prefetch)",
            lambda: data.build_plain_dataset(files, cfg, batch),
        ),
        (
            "naive (tf.data defaults, no parallel map)",
            lambda: data.build_plain_dataset(files, cfg, batch, parallel=False),
        ),
        ("sequential (tf.data optimisations off)", lambda: data.build_sequential_dataset(files, cfg, batch)),
    ):
        it = iter(make())
        for _ in range(5):  # warm up: threads, autotuning, shuffle buffer fill
            next(it)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(batches):
            next(it)
        rate = batches * batch / (time.perf_counter() - start)
        cpu_ms = 1000 * (time.process_time() - cpu) / (batches * batch) * 100
        rows.append((name, rate, cpu_ms))
        print(f"  {name}: {rate:.0f} examples/s, {cpu_ms:.1f} CPU-ms/100 examples", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the results as Markdown here")
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = p.parse_args()

    from trainer import datagen

    q = args.quick
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as tmp:
        tmp = Path(tmp)
        steps, epochs = (16 if q else 128), (2 if q else 4)
        # Two regimes: a step that is mostly compute (host overhead hidden), and a tiny step where
        # the per-step host round trip dominates, which is what a fast accelerator sees.
        regimes = [("compute-bound step", 32, 32), ("dispatch-bound step", 8, 16)]
        spe_tables = []
        for title, batch, size in regimes:
            train_dir = tmp / f"small-{batch}-{size}"
            print(f"(a) {title}: writing {batch * steps} synthetic {size}px JPEGs", flush=True)
            datagen.synthesize(
                str(train_dir), examples=batch * steps, shards=8, image_size=size, num_classes=10
            )
            rows = bench_steps_per_execution(
                train_dir,
                tmp / f"runs-{batch}-{size}",
                batch=batch,
                steps=steps,
                epochs=epochs,
                image_size=size,
            )
            spe_tables.append((title, batch, size, rows))

        big_dir = tmp / "big"
        n_big, big_size, out_size = (256 if q else 2048), 160, 128
        print(f"(b) writing {n_big} synthetic {big_size}px JPEGs in 16 shards", flush=True)
        files = datagen.synthesize(
            str(big_dir), examples=n_big, shards=16, image_size=big_size, num_classes=10
        )
        pipe_rows = bench_pipeline(files, batch=64, image_size=out_size, batches=(10 if q else 60))

    lines = [
        "# Trainer throughput (CPU)",
        "",
        f"Machine: {machine()}. Load average (1 min) before/after: "
        f"{load_before:.1f}/{os.getloadavg()[0]:.1f} (other jobs shared the 2 cores).",
        f"Command: `.venv/bin/python benchmarks/trainer_throughput.py{' --quick' if q else ''}"
        f"{' --out ' + args.out if args.out else ''}`",
        "",
    ]
    for title, batch, size, spe_rows in spe_tables:
        lines += [
            f"## (a) steps_per_execution, {title}: tiny-cnn, {size}px, global batch {batch}, {steps} "
            f"steps/epoch, {epochs} epochs, cached records; median examples/s of the epochs after the first",
            "",
            "| steps_per_execution | examples/s | step time (ms, all epochs) | vs 1 |",
            "|---|---:|---:|---:|",
        ]
        base = spe_rows[0][1]
        lines += [
            f"| {label} | {rate:,.0f} | {ms:.2f} | {rate / base:.2f}x |" for label, rate, ms in spe_rows
        ]
        lines.append("")
    lines += [
        f"## (b) input pipeline alone: {big_size}px JPEG -> random resized crop {out_size}px + flip, "
        "batch 64, 16 shards",
        "",
        "| pipeline | examples/s | vs plain | CPU-ms / 100 examples |",
        "|---|---:|---:|---:|",
    ]
    plain = pipe_rows[1][1]
    lines += [f"| {name} | {rate:,.0f} | {rate / plain:.2f}x | {cpu:.1f} |" for name, rate, cpu in pipe_rows]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
