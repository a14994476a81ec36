"""What measuring the host round trips costs (issue 43: `host_overhead_fraction`, under 1 % of
throughput), and the part of the round trip it cannot see.

In one process (CPU), tiny-cnn on synthetic batches through the trainer's own meter
(trainer/throughput.py), three ways, alternated in each repetition so load drifts hit all alike:

- `none`: the distributed dataset as it is, no meter;
- `wait only`: the meter as it was before issue 43 (`WaitOnlyMeter` below: per step two
  assign_adds, per execution two variable reads; no first-step record, no reset);
- `full`: the meter now (per step one read-modify-write of a host variable of 2 +
  steps_per_execution floats, per execution one read of it).

Each fit runs `--steps` steps; its rate is over the executions after the first (tracing), from a
timing callback every variant has. The cost of the host measure is `full` against `wait only`
(the median of the per-repetition ratios); `full` against `none` is the whole meter's.
Micro-measures beside them: the callbacks' per-execution time (hooks called directly, many times)
and the return path the figure misses (a tf.function returning tf.timestamp(): the host's
time.time() after the call minus it).

    .venv/bin/python benchmarks/host_overhead.py [--reps 7] [--steps 400] \
        [--out benchmarks/RESULTS-host-overhead.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "trainer_image"))
sys.path.insert(0, str(Path(__file__).parent))

import tensorflow as tf  # noqa: E402
from trainer_throughput import machine  # noqa: E402

from trainer import throughput  # noqa: E402  (selects tf-keras first)
from trainer._keras import keras  # noqa: E402
from trainer.model import build_model  # noqa: E402

# (label, image px, global batch, steps_per_execution)
CONFIGS = [
    ("tiny-cnn 8 px, batch 8, steps_per_execution 1 (the worst case: round trips dominate)", 8, 8, 1),
    ("tiny-cnn 8 px, batch 8, steps_per_execution 100 (auto for 200-400 steps)", 8, 8, 100),
    ("tiny-cnn 32 px, batch 32, steps_per_execution 1", 32, 32, 1),
]
VARIANTS = ("none", "wait only", "full")


class WaitOnlyMeter(throughput.InputWaitMeter):
    """The meter as it was before issue 43: the input wait only."""

    def __init__(self, global_batch: int):
        super().__init__(global_batch)
        with tf.device("/device:CPU:0"):
            self._waited = tf.Variable(0.0, dtype=tf.float64, trainable=False)
            self._batches = tf.Variable(0, dtype=tf.int64, trainable=False)

    def timed(self, get_next: Any) -> Any:
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            batch = get_next()
        with tf.control_dependencies(tf.nest.flatten(batch, expand_composites=True)):
            waited = tf.timestamp() - start
        self._waited.assign_add(waited)
        self._batches.assign_add(1)
        return batch

    def _read(self) -> tuple[float, int, float]:
        return float(self._waited.numpy()), int(self._batches.numpy()), float("inf")


class Ends(keras.callbacks.Callback):
    """perf_counter at the end of every execution (every variant has it)."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.ends.append(time.perf_counter())


def dataset(size: int, batch: int) -> Any:
    images = tf.random.uniform([batch, size, size, 3], maxval=255, dtype=tf.int32, seed=1)
    labels = tf.random.uniform([batch], maxval=4, dtype=tf.int32, seed=2)
    one = tf.data.Dataset.from_tensors((tf.cast(images, tf.uint8), labels))
    return one.cache().repeat().prefetch(tf.data.AUTOTUNE)


def fit_rate(variant: str, size: int, batch: int, spe: int, steps: int) -> float:
    """Examples/s over the executions after the first of one fit of `steps` steps."""
    strategy = tf.distribute.get_strategy()
    data = strategy.experimental_distribute_dataset(dataset(size, batch))
    callbacks: list[Any] = []
    if variant != "none":
        meter = throughput.InputWaitMeter(batch, spe) if variant == "full" else WaitOnlyMeter(batch)
        data = meter.wrap(data)
        callbacks.append(meter)
    ends = Ends()
    model = build_model("tiny-cnn", num_classes=4, image_size=size)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        steps_per_execution=spe,
    )
    model.fit(data, epochs=1, steps_per_epoch=steps, callbacks=[*callbacks, ends], verbose=0)
    seconds = ends.ends[-1] - ends.ends[0]
    return (steps - spe) * batch / seconds


def graph_step_seconds(variant: str, steps: int, reps: int) -> float:
    """Seconds per step of a compiled loop of timed get_nexts of a cached batch (no model): what
    each variant adds in the graph per step, without the step itself."""
    meter = {"none": None, "wait only": WaitOnlyMeter(8), "full": throughput.InputWaitMeter(8, 100)}[variant]
    iterator = iter(dataset(8, 8))

    @tf.function
    def loop(n: Any) -> Any:
        batch = next(iterator)
        for _ in tf.range(n):
            batch = meter.timed(lambda: next(iterator)) if meter else next(iterator)
        return batch

    loop(tf.constant(10))
    out = []
    for _ in range(reps):
        started = time.perf_counter()
        loop(tf.constant(steps))
        out.append((time.perf_counter() - started) / steps)
    return statistics.median(out)


def hook_seconds(meter: throughput.InputWaitMeter, calls: int) -> float:
    """Seconds per execution in the meter's own batch hooks (called directly)."""
    meter.on_epoch_begin(0)
    started = time.perf_counter()
    for i in range(calls):
        meter.on_train_batch_begin(i)
        meter.on_train_batch_end(i)
    return (time.perf_counter() - started) / calls


def return_path_seconds(calls: int) -> list[float]:
    """time.time() after a tf.function returns - the tf.timestamp() its graph took last."""

    @tf.function
    def stamp(x: Any) -> Any:
        with tf.control_dependencies([x]):
            return tf.timestamp()

    x = tf.constant(1.0)
    stamp(x)
    out = []
    for _ in range(calls):
        inside = stamp(x)
        out.append(time.time() - float(inside.numpy()))  # the read is after time.time()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    load_before = os.getloadavg()[0]
    lines = [
        "# What measuring host round trips costs (`host_overhead_fraction`, issue 43)",
        "",
        f"Machine: {machine()}. Load average (1 min) before/after: {load_before:.1f}/{{after}} "
        "(other jobs shared the cores).",
        "Command: `.venv/bin/python benchmarks/host_overhead.py "
        f"--reps {args.reps} --steps {args.steps}" + (f" --out {args.out}`" if args.out else "`"),
        "",
        "Each fit: tiny-cnn on one cached synthetic batch, repeated, 1 intra-op and 1 inter-op "
        f"thread, {args.steps} steps; examples/s over the executions after the first. `wait only` is "
        "the meter before issue 43, `full` the meter now; the ratios are the medians of the "
        f"per-repetition ratios over {args.reps} repetitions (variants alternated), their range in "
        "brackets.",
        "",
        "| configuration | none | wait only | full | full / wait only | full / none |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    none_rates: dict[str, list[float]] = {}
    for label, size, batch, spe in CONFIGS:
        rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
        none_rates[label] = rates["none"]
        for rep in range(args.reps):
            order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                rates[variant].append(fit_rate(variant, size, batch, spe, args.steps))
            print(label, rep, {v: round(r[-1]) for v, r in rates.items()}, flush=True)
        cells = [f"{statistics.median(rates[v]):,.0f}" for v in VARIANTS]
        for base in ("wait only", "none"):
            ratios = [f / b for f, b in zip(rates["full"], rates[base], strict=True)]
            cells.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    calls = 3000
    hooks: dict[str, list[float]] = {}
    graph: dict[str, list[float]] = {}
    for _ in range(3):
        for name, cls in (("wait only", WaitOnlyMeter), ("full", throughput.InputWaitMeter)):
            hooks.setdefault(name, []).append(hook_seconds(cls(8), calls))
        for name in VARIANTS:
            graph.setdefault(name, []).append(graph_step_seconds(name, 5000, 3))
    hook = {k: statistics.median(v) for k, v in hooks.items()}
    step = {k: statistics.median(v) for k, v in graph.items()}
    back = sorted(return_path_seconds(calls))
    lines += [
        "",
        "Measured apart (medians of 3 alternated rounds):",
        "",
        f"- in the graph, per step (a compiled loop of 5,000 get_nexts of a cached batch, no model): "
        f"none {1e6 * step['none']:.1f} µs, wait only {1e6 * step['wait only']:.1f} µs, full "
        f"{1e6 * step['full']:.1f} µs: the host measure adds "
        f"{1e6 * (step['full'] - step['wait only']):.1f} µs a step;",
        f"- the meter's batch hooks, per execution (called directly, {calls} times): wait only "
        f"{1e6 * hook['wait only']:.0f} µs (two variable reads), full {1e6 * hook['full']:.0f} µs "
        "(one read): the host measure adds "
        f"{1e6 * (hook['full'] - hook['wait only']):.0f} µs an execution;",
        "- the return path the figure cannot see (a tf.function's last tf.timestamp() to the host's "
        f"time.time() after the call, {calls} calls): median {1e6 * back[len(back) // 2]:.0f} µs, "
        f"90th percentile {1e6 * back[int(0.9 * len(back))]:.0f} µs.",
        "",
        "So the host measure costs (steps_per_execution x per-step + per-execution) over "
        "(steps_per_execution x the step time): per configuration, with the step time of its `none` "
        "median above:",
        "",
    ]
    for label, _size, batch, spe in CONFIGS:
        step_seconds = batch / statistics.median(none_rates[label])
        extra = spe * (step["full"] - step["wait only"]) + (hook["full"] - hook["wait only"])
        cost = 100 * extra / (spe * step_seconds)
        cheaper = " (negative: cheaper than the meter before it, whose hooks read two variables)"
        noise = cheaper if cost < 0 else ""
        lines.append(f"- {label}: step {1e3 * step_seconds:.2f} ms, cost {cost:.2f} %{noise}")
    text = "\n".join(lines).replace("{after}", f"{os.getloadavg()[0]:.1f}") + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
