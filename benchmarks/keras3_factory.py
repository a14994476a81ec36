"""A Keras 3 model factory against the same model in tf-keras, trained by the bundled trainer.

Two factory modules, identical but for their import (`import keras` / `import tf_keras as
keras`): small_net, examples/model-factory's model (two conv/BN/ReLU/pool blocks, dropout, a
dense head). Each run is a fresh `python -m trainer.task` on synthetic data (the compute ceiling:
no decoding), alternating the two, and reads metrics.json: the steady examples/s (every execution
but the first), the step time, the first execution's compile excess. The trainer picks the
Keras from the module's imports (--keras=auto) and logs it; the script checks that it did.

With --plain, each run is instead a bare `model.fit` of the same model (the factory's build()
inside a uint8 -> rescale frame, SGD, one fixed batch repeated, the same steps_per_execution,
no trainer): how much of a difference is Keras's own, not the trainer's.

Usage:
  .venv/bin/python benchmarks/keras3_factory.py [--steps 300] [--runs 3] [--replicas 1] [--plain]
Prints a Markdown table; benchmarks/RESULTS-keras3.md holds a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NET = """
import {import_line}


def build(num_classes, image_size, dtype):
    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, 3))
    x = inputs
    for filters in (16, 32):
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        x = layers.MaxPooling2D()(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.1)(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
"""
FLAVOURS = {"tf-keras": "tf_keras as keras", "Keras 3": "keras"}
# --plain: one process, `python -c PLAIN MODULE STEPS SPE`, TF_USE_LEGACY_KERAS set for its Keras.
PLAIN = r"""
import importlib, json, sys, time
import tensorflow as tf
module, steps, spe = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
net = importlib.import_module(module)
keras = net.keras
inputs = keras.Input((32, 32, 3), dtype="uint8")
x = keras.layers.Rescaling(1 / 127.5, offset=-1.0)(inputs)
probs = keras.layers.Activation("softmax", dtype="float32")(net.build(10, 32, "float32")(x))
model = keras.Model(inputs, probs)
model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True),
              loss=keras.losses.SparseCategoricalCrossentropy(), steps_per_execution=spe,
              jit_compile=False)
images = tf.cast(tf.random.uniform([32, 32, 32, 3], 0, 256, seed=1), tf.uint8)
labels = tf.random.uniform([32], 0, 10, tf.int32, seed=2)
data = tf.data.Dataset.from_tensors((images, labels)).repeat()
ends = []
class Clock(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ends.append(time.perf_counter())
model.fit(data, epochs=1, steps_per_epoch=steps, callbacks=[Clock()], verbose=0)
steady = (len(ends) - 1) * spe * 32 / (ends[-1] - ends[0])
print(json.dumps({"train_examples_per_sec": steady, "keras": keras.__version__}))
"""


def run_once(code: Path, module: str, work: Path, args: argparse.Namespace) -> dict:
    out = work / module
    flags = [
        f"--model={module}:build",
        "--train-data=unused",
        "--synthetic-data",
        "--num-classes=10",
        "--image-size=32",
        "--batch-size=32",
        f"--steps-per-epoch={args.steps}",
        "--epochs=1",
        "--warmup-epochs=0",
        f"--cpu-replicas={args.replicas}",
        "--checkpoint-interval-secs=0",
        f"--model-dir={out}/model",
        f"--checkpoint-dir={out}/checkpoints",
        f"--tensorboard-dir={out}/logs",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'trainer_image'}:{code}",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
    }
    done = subprocess.run(
        [sys.executable, "-m", "trainer.task", *flags], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{module}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    metrics = json.loads((out / "metrics.json").read_text())
    config = json.loads((out / "trainer_config.json").read_text())
    return {**metrics, "keras_flag": config["flags"]["keras"], "keras_version": config["keras"]}


def plain_once(code: Path, module: str, keras3: bool, args: argparse.Namespace) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
        "TF_USE_LEGACY_KERAS": "0" if keras3 else "1",
    }
    spe = 100 if args.steps >= 100 else args.steps
    done = subprocess.run(
        [sys.executable, "-c", PLAIN, module, str(args.steps), str(spe)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{module}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "steps_per_execution": spe}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--plain", action="store_true", help="a bare model.fit, no trainer (1 replica)")
    args = ap.parse_args()
    if args.plain:
        plain(args)
        return
    results: dict[str, list[dict]] = {name: [] for name in FLAVOURS}
    with tempfile.TemporaryDirectory(prefix="keras3-bench-") as tmp:
        code = Path(tmp) / "code"
        code.mkdir()
        for i, line in enumerate(FLAVOURS.values()):
            (code / f"net{i}.py").write_text(NET.format(import_line=line))
        for _ in range(args.runs):
            for i, name in enumerate(FLAVOURS):
                result = run_once(code, f"net{i}", Path(tmp) / "runs", args)
                expected = "3" if name == "Keras 3" else "2"
                assert result["keras_flag"] == expected, (name, result["keras_flag"])
                results[name].append(result)
    print(
        f"| Keras | version | replicas | steps_per_execution | examples/s, median | step ms, median "
        f"| compile s, median | runs ({args.steps} steps of 32) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        rate = statistics.median(r["train_examples_per_sec"] for r in runs)
        step = statistics.median(r["step_time_ms"] for r in runs)
        compile_s = statistics.median(r["compile_seconds"] for r in runs)
        spe = sorted({r["steps_per_execution"] for r in runs})
        print(
            f"| {name} | {runs[0]['keras_version']} | {runs[0]['replicas']} | {','.join(map(str, spe))} "
            f"| {rate:.0f} | {step:.2f} | {compile_s:.2f} | {len(runs)} |"
        )


def plain(args: argparse.Namespace) -> None:
    results: dict[str, list[dict]] = {name: [] for name in FLAVOURS}
    with tempfile.TemporaryDirectory(prefix="keras3-plain-") as tmp:
        code = Path(tmp)
        for i, line in enumerate(FLAVOURS.values()):
            (code / f"net{i}.py").write_text(NET.format(import_line=line))
        for _ in range(args.runs):
            for i, name in enumerate(FLAVOURS):
                results[name].append(plain_once(code, f"net{i}", name == "Keras 3", args))
    print(
        "| Keras (bare model.fit) | version | steps_per_execution | examples/s, median "
        f"| runs ({args.steps} steps) |"
    )
    print("|---|---|---:|---:|---:|")
    for name, runs in results.items():
        rate = statistics.median(r["train_examples_per_sec"] for r in runs)
        print(
            f"| {name} | {runs[0]['keras']} | {runs[0]['steps_per_execution']} | {rate:.0f} | {len(runs)} |"
        )


if __name__ == "__main__":
    main()
