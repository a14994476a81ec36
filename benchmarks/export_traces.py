"""What the trainer's SavedModel export costs with and without the layers' traced call functions.

trainer.export.save saves a built-in model with `save_traces=False` (a factory's model keeps them).
This measures that choice: one fresh process per (model, traces) pair, each building the model,
running one batch, then timing only `export.save` (CPU seconds of the process, wall seconds), and
checking every export answers alike (the same seed, so the same weights: the same
`serving_default` probabilities on the same JPEG bytes, to 1e-6) and loads back as a Keras model.

Usage:
  .venv/bin/python benchmarks/export_traces.py [--models tiny-cnn,resnet50] [--runs 3]
Prints a Markdown table; benchmarks/RESULTS-export.md holds a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# One measurement, run in a fresh process: `python export_traces.py --child MODEL TRACES DIR`.
CHILD = r"""
import io, json, os, resource, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from trainer._keras import keras
import numpy as np
import tensorflow as tf
from PIL import Image
from trainer import export, model as models

name, traces, target = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
keras.utils.set_random_seed(1)  # the same weights in every process: the exports must agree
m = models.build_model(name, num_classes=10, image_size=32)
m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
m.predict(tf.zeros([2, 32, 32, 3], tf.uint8), verbose=0)
serving = export.ServingConfig(num_classes=10, image_size=32, eval_crop_fraction=0.875, model=name)
usage = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
cpu, wall = usage(), time.perf_counter()
export.save(m, target, serving, traces=traces)
cpu, wall = usage() - cpu, time.perf_counter() - wall
rng = np.random.default_rng(0)
jpegs = []
for _ in range(8):
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(buf, format="JPEG")
    jpegs.append(buf.getvalue())
served = tf.saved_model.load(target).signatures["serving_default"](image_bytes=tf.constant(jpegs))
keras.models.load_model(target, compile=False)
print(json.dumps({"cpu": cpu, "wall": wall, "probabilities": served["probabilities"].numpy().tolist()}))
"""


def measure(model: str, traces: bool, target: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "trainer_image")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, model, "1" if traces else "0", str(target)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny-cnn,resnet50")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/vertex-trainer-export-bench")
    args = ap.parse_args()
    print("| model | traces | export CPU (s), median | export wall (s), median | runs |")
    print("|---|---|---:|---:|---:|")
    for model in args.models.split(","):
        results: dict[bool, list[dict]] = {True: [], False: []}
        for run in range(args.runs):
            for traces in (True, False):  # alternating, so load drifts hit both alike
                target = Path(args.work) / f"{model}-{int(traces)}-{run}"
                results[traces].append(measure(model, traces, target))
        for traces in (True, False):
            rows = results[traces]
            print(
                f"| {model} | {'kept' if traces else 'skipped'} "
                f"| {statistics.median(r['cpu'] for r in rows):.2f} "
                f"| {statistics.median(r['wall'] for r in rows):.2f} | {len(rows)} |"
            )
        kept = results[True][0]["probabilities"]
        for r in results[True] + results[False]:  # the same seed: every export answers alike
            pairs = zip(kept, r["probabilities"], strict=True)
            assert all(abs(a - b) <= 1e-6 for x, y in pairs for a, b in zip(x, y, strict=True))


if __name__ == "__main__":
    main()
