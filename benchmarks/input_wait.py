"""Where the training time goes on this machine (CPU): synthetic data vs TFRecords, and the
measured input wait with one data thread vs all of them.

Each row is a real `python -m trainer.task` run (one epoch; the figures are over the executions
after the first, as in metrics.json: `steady_examples_per_sec`, `input_wait_fraction`); each
configuration is repeated and the median run (by examples/s) is shown. "Implied wait" is
1 - real/synthetic examples/s: what the wait would be if the step took the same time with and
without the pipeline; it is a cross-check of the measurement, not the measurement.

    .venv/bin/python benchmarks/input_wait.py [--repeats 3] [--out benchmarks/RESULTS-throughput.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from trainer_throughput import machine

# (title, model, model input px, JPEG px, global batch, steps, steps_per_execution)
CONFIGS = [
    ("small model, large JPEGs", "tiny-cnn", 32, 256, 32, 128, 16),
    ("larger model, same JPEGs", "mobilenet-v2", 96, 256, 32, 48, 8),
]
RUNS = [
    ("synthetic data", ["--synthetic-data"]),
    ("TFRecords, --data-threads=1", ["--data-threads=1"]),
    ("TFRecords, all data threads (0 = cores)", ["--data-threads=0"]),
]


def run(
    data: Path, out: Path, model: str, size: int, batch: int, steps: int, spe: int, extra: list[str]
) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "trainer.task",
        f"--model={model}",
        f"--train-data={data}/train-*",
        "--num-classes=10",
        f"--image-size={size}",
        "--epochs=1",
        f"--steps-per-epoch={steps}",
        f"--batch-size={batch}",
        f"--steps-per-execution={spe}",
        "--log-interval-secs=0",
        f"--model-dir={out}/model",
        f"--checkpoint-dir={out}/ckpt",
        f"--tensorboard-dir={out}/logs",
        *extra,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    )
    if proc.returncode:
        raise SystemExit(f"trainer failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    verdict = [line for line in proc.stdout.splitlines() if line.startswith("trainer: throughput:")][-1]
    return {**metrics, "verdict": verdict.removeprefix("trainer: ")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", help="write the results as Markdown here")
    args = p.parse_args()

    from trainer import datagen

    load_before = os.getloadavg()[0]
    tables = []
    with tempfile.TemporaryDirectory(prefix="input-wait-") as tmp:
        tmp = Path(tmp)
        data = tmp / "data"
        datagen.synthesize(str(data), examples=512, shards=8, image_size=256, num_classes=10, seed=2)
        for title, model, size, jpeg, batch, steps, spe in CONFIGS:
            rows = []
            for label, extra in RUNS:
                runs = [
                    run(data, tmp / f"{model}-{len(rows)}-{i}", model, size, batch, steps, spe, extra)
                    for i in range(args.repeats)
                ]
                runs.sort(key=lambda m: m["steady_examples_per_sec"])
                median = runs[len(runs) // 2]
                waits = [m["input_wait_fraction"] for m in runs]
                rows.append((label, median, min(waits), max(waits)))
                print(
                    f"{title} / {label}: {median['steady_examples_per_sec']:.0f} examples/s, input wait "
                    f"{median['input_wait_fraction']:.3f} ({min(waits):.3f}-{max(waits):.3f})",
                    flush=True,
                )
            tables.append((title, model, size, jpeg, batch, steps, spe, rows))

    lines = [
        "# Where the training time goes (CPU): synthetic data vs TFRecords, measured input wait",
        "",
        f"Machine: {machine()}. Load average (1 min) before/after: "
        f"{load_before:.1f}/{os.getloadavg()[0]:.1f} (other jobs shared the 2 cores).",
        f"Command: `.venv/bin/python benchmarks/input_wait.py --repeats {args.repeats}"
        f"{' --out ' + args.out if args.out else ''}`",
        "",
        "Every row: `python -m trainer.task` for one epoch; examples/s and input wait over the executions "
        f"after the first (metrics.json); the median of {args.repeats} runs by examples/s, the wait's range "
        "over the runs in brackets. Implied wait = 1 - (examples/s) / (synthetic examples/s).",
        "",
    ]
    for title, model, size, jpeg, batch, steps, spe, rows in tables:
        synthetic = rows[0][1]["steady_examples_per_sec"]
        lines += [
            f"## {title}: {model} at {size} px from {jpeg} px JPEGs (random resized crop + flip), "
            f"global batch {batch}, {steps} steps, steps_per_execution {spe}",
            "",
            "| input | examples/s | vs synthetic | measured input wait | implied wait | verdict |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for label, m, lo, hi in rows:
            rate = m["steady_examples_per_sec"]
            implied = "-" if label.startswith("synthetic") else f"{max(0.0, 1 - rate / synthetic):.0%}"
            lines.append(
                f"| {label} | {rate:,.0f} | {rate / synthetic:.2f} | {m['input_wait_fraction']:.0%} "
                f"({lo:.0%}-{hi:.0%}) | {implied} | {m['bound']}-bound |"
            )
        lines += (
            ["", "Verdict lines (median runs):", ""] + [f"- `{m['verdict']}`" for _, m, _, _ in rows] + [""]
        )
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
