"""Where the training time goes: the measured input wait, and the verdict at the end of a run.

The input wait is measured inside the training function, not estimated. `InputWaitMeter.wrap`
puts the distributed dataset behind a thin wrapper whose iterator times every `get_next`: Keras
calls `next(iterator)` once per step inside its compiled training loop (also with
steps_per_execution > 1), so the wrapper's ops run once per step, in the graph:

    [GPU only: copy one float of a model variable to the host: the host waits for the device to
     finish the previous step]  ->  t0 = tf.timestamp()  ->  get_next  ->  t1 = tf.timestamp()

and `t1 - t0` is added to a host variable. While the input pipeline keeps up, its prefetch buffer
(on the device with MirroredStrategy) is full and get_next returns at once; when it does not, the
step blocks there, and nothing else can run: that blocked time is the time the device waited.
On a CPU the host is the device, so the timing needs nothing else. GPUs run asynchronously: the
host may queue steps ahead of the device and would then block in get_next while the device is
still busy, so there each step first waits for the previous one (a 4-byte read; the host can no
longer queue ahead, which costs well under a millisecond a step).

A Keras callback (this class) reads the accumulated wait after every execution (a host round
trip that Keras makes anyway) and divides by the execution's wall time. The run's first execution
(tracing, compilation, filling the shuffle buffer) is left out when there are others.

Waiting is not the only way the input pipeline slows training: on a CPU host the decode threads
and the model share the same cores, so a step can be slower with real data although it never
waits. The meter also reads the process's CPU time per execution (one clock read):
`host_cpu_busy_fraction` near 1 with little waiting means CPU contention, which a faster
pipeline or more vCPUs cure, and waiting cannot show. `rates` turns the executions (and the
checkpoints between them) into the throughput figures of metrics.json.
docs/trainer.md ("Where the time goes") explains how to read them.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from trainer._keras import keras

# Waiting for data at least this share of the step time makes a run "input-bound".
INPUT_BOUND = 0.10
# A CPU device whose process keeps this share of the vCPUs busy has none to spare for decoding.
CPU_CONTENDED = 0.90


@dataclasses.dataclass(frozen=True)
class Execution:
    """One call into the training function (steps_per_execution steps)."""

    seconds: float  # wall time, host clock, from the callback before the call to the one after
    waited: float  # of which blocked in get_next
    steps: int
    started: float = 0.0  # time.perf_counter() at its start
    cpu: float = 0.0  # process CPU seconds (all threads) during it


class InputWaitMeter(keras.callbacks.Callback):
    """Times every get_next of the training dataset; per-execution wait shares; the summary.

    Create it outside `strategy.scope()` (its counters are plain host variables), `wrap()` the
    distributed training dataset, call `sync_on(model)` on GPUs, and pass it to fit() as a
    callback before the progress callback.
    """

    def __init__(self, global_batch: int):
        super().__init__()
        self.global_batch = global_batch
        with tf.device("/device:CPU:0"):
            self._waited = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="input_wait_seconds")
            self._batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="input_batches")
        self._host = self._waited.device
        self._device_variable = None
        self.executions: list[Execution] = []
        self._epoch_first = 0
        self._last = (0.0, 0)
        self._began = 0.0

    # -- in the graph ----------------------------------------------------------------------------

    def wrap(self, dataset: Any) -> _TimedDataset:
        """The distributed dataset, with every get_next of its iterators timed."""
        return _TimedDataset(dataset, self)

    def sync_on(self, model: Any) -> None:
        """Make each timed get_next first wait for the device to finish the previous step (GPUs:
        the host would otherwise run ahead and count device time as waiting). Uses the model's
        smallest variable, which every step updates."""
        variables = list(model.trainable_variables)
        if variables:
            self._device_variable = min(variables, key=lambda v: v.shape.num_elements() or 0)

    def timed(self, get_next: Callable[[], Any]) -> Any:
        """`get_next()` between two host timestamps; the difference goes to the wait counter."""
        deps: list[Any] = []
        if self._device_variable is not None:
            piece = tf.reshape(tf.convert_to_tensor(self._device_variable), [-1])[:1]
            with tf.device(self._host):
                deps = [tf.identity(piece)]  # device -> host: waits for the previous step
        with tf.control_dependencies(deps):
            start = tf.timestamp()
        with tf.control_dependencies([start]):
            batch = get_next()
        with tf.control_dependencies(tf.nest.flatten(batch, expand_composites=True)):
            waited = tf.timestamp() - start
        self._waited.assign_add(waited)
        self._batches.assign_add(1)
        return batch

    # -- the callback: per execution ------------------------------------------------------------

    def _read(self) -> tuple[float, int]:
        return float(self._waited.numpy()), int(self._batches.numpy())

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._last = self._read()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch_first = len(self.executions)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._began, self._cpu = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        ended, cpu = time.perf_counter(), time.process_time()
        waited, batches = self._read()
        self.executions.append(
            Execution(
                ended - self._began,
                waited - self._last[0],
                batches - self._last[1],
                self._began,
                cpu - self._cpu,
            )
        )
        self._last = (waited, batches)

    # -- results ---------------------------------------------------------------------------------

    def _measured(self, first: int = 0) -> list[Execution]:
        chosen = self.executions[first:]
        if first == 0 and len(chosen) > 1:
            chosen = chosen[1:]  # the run's first: tracing, compilation, pipeline start-up
        return chosen

    def fraction(self, first: int = 0) -> float | None:
        """Share of the wall time of the executions from `first` on spent waiting for input."""
        chosen = self._measured(first)
        seconds = sum(e.seconds for e in chosen)
        if seconds <= 0:
            return None
        return min(1.0, max(0.0, sum(e.waited for e in chosen) / seconds))

    def epoch_fraction(self) -> float | None:
        """The same over the current epoch so far (what the progress lines show)."""
        return self.fraction(self._epoch_first)

    def summary(self) -> dict[str, Any]:
        """The metrics.json fields: input_wait_fraction and what it was measured over."""
        chosen = self._measured()
        seconds = sum(e.seconds for e in chosen)
        steps = sum(e.steps for e in chosen)
        fraction = self.fraction()
        busy = sum(e.cpu for e in chosen) / (seconds * vcpus()) if seconds > 0 else None
        return {
            "input_wait_fraction": round(fraction, 4) if fraction is not None else None,
            "input_wait_seconds": round(sum(e.waited for e in chosen), 4),
            "input_wait_measured_steps": steps,
            "input_wait_measured_seconds": round(seconds, 4),
            # this process's CPU time / (wall time x vCPUs) over the same executions
            "host_cpu_busy_fraction": round(min(1.0, busy), 4) if busy is not None else None,
            "bound": bound(fraction),
        }


def rates(
    executions: list[Execution],
    global_batch: int,
    fit_seconds: float,
    checkpoint_seconds_between: Callable[[float, float], float] | None = None,
) -> dict[str, Any]:
    """The throughput fields of metrics.json from the timed executions of one fit().

    Args:
        executions: InputWaitMeter.executions, in order.
        global_batch: examples per step.
        fit_seconds: the wall time of the whole fit() call.
        checkpoint_seconds_between: f(start, end) -> seconds spent saving checkpoints in that
            span (PreemptionCheckpoint.seconds_between), or None.

    Returns `steady_examples_per_sec` (from the end of the first execution to the end of the
    last, less checkpoint time: what the hardware sustains; with one execution, that one,
    compile included), `wall_examples_per_sec` (all steps over all of fit()), `compile_seconds`
    (the first execution's excess over a steady one: tracing, compiling, filling buffers; None
    with one execution) and `steady_step_time_ms`.
    """
    steps = sum(e.steps for e in executions)
    out: dict[str, float | None] = {
        "steady_examples_per_sec": None,
        "wall_examples_per_sec": None,
        "compile_seconds": None,
        "steady_step_time_ms": None,
    }
    if not executions:
        return out
    if fit_seconds > 0:
        out["wall_examples_per_sec"] = round(steps * global_batch / fit_seconds, 2)
    first, last = executions[0], executions[-1]
    if len(executions) == 1:
        seconds, counted = first.seconds, first.steps
    else:
        start, end = first.started + first.seconds, last.started + last.seconds
        saving = checkpoint_seconds_between(start, end) if checkpoint_seconds_between else 0.0
        seconds, counted = end - start - saving, steps - first.steps
    if seconds > 0 and counted > 0:
        step = seconds / counted
        out["steady_examples_per_sec"] = round(global_batch / step, 2)
        out["steady_step_time_ms"] = round(1000 * step, 3)
        if len(executions) > 1:
            out["compile_seconds"] = round(max(0.0, first.seconds - first.steps * step), 4)
    return out


class _TimedDataset(tf.distribute.DistributedDataset):
    """A distributed dataset whose iterators time get_next (Keras accepts any DistributedDataset)."""

    def __init__(self, dataset: Any, meter: InputWaitMeter) -> None:
        self._dataset, self._meter = dataset, meter

    def __iter__(self) -> _TimedIterator:
        return _TimedIterator(iter(self._dataset), self._meter)

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec

    def reduce(self, initial_state: Any, reduce_func: Any) -> Any:
        return self._dataset.reduce(initial_state, reduce_func)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dataset, name)


class _TimedIterator:
    """Passed to Keras' training function as a Python object: its __next__ runs while the
    function is traced, so the timing ops are part of the compiled loop, once per step."""

    def __init__(self, iterator: Any, meter: InputWaitMeter) -> None:
        self._iterator, self._meter = iterator, meter

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> Any:
        return self._meter.timed(lambda: next(self._iterator))

    def get_next(self) -> Any:
        return self.__next__()

    @property
    def element_spec(self) -> Any:
        return self._iterator.element_spec


def vcpus() -> int:
    """vCPUs this process may use (the container's share on Vertex AI)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def describe_devices(count: int, device: str) -> str:
    """'4 GPUs', '8 TPU cores', '1 CPU replica'."""
    noun = {"gpu": "GPU", "tpu": "TPU core"}.get(device, "CPU replica")
    return f"{count} {noun}{'s' if count != 1 else ''}"


def bound(fraction: float | None) -> str | None:
    """'input' or 'compute' for a measured input wait (None: nothing measured)."""
    if fraction is None:
        return None
    return "input" if fraction >= INPUT_BOUND else "compute"


def verdict(
    summary: dict[str, Any],
    *,
    synthetic: bool,
    devices: int,
    device: str,
    cpus: int | None = None,
    data_threads: int = 0,
) -> str:
    """The one line a run ends with: input-bound or compute-bound, the measured share, and what
    to try. `summary` holds InputWaitMeter.summary()'s fields (metrics.json does); `devices` are
    this machine's replicas."""
    cpus = cpus or vcpus()
    what = describe_devices(devices, device)
    fraction, rate = summary.get("input_wait_fraction"), summary.get("steady_examples_per_sec")
    if fraction is None:
        return "throughput: no training step ran in this process, so no input wait was measured"
    share = f"{100 * fraction:.0f}% of the time waiting for data"
    speed = f"{rate:,.0f} examples/s" if rate else "throughput unknown"
    if synthetic:
        return (
            f"throughput: synthetic data, the compute ceiling of {what}: {speed}, {share}; "
            "compare a real-data run (vertex-trainer bench runs both)"
        )
    if bound(fraction) == "input":
        threads = f" (now {data_threads})" if data_threads else ""
        return (
            f"throughput: input-bound: {share} ({speed}); this machine has {cpus} vCPUs for "
            f"{what}: try a machine type with more vCPUs, or --read-parallelism/--data-threads"
            f"{threads}"
        )
    text = (
        f"throughput: compute-bound: {share} ({speed}); the input pipeline keeps up with {what} "
        f"({cpus} vCPUs)"
    )
    busy = summary.get("host_cpu_busy_fraction")
    if device == "cpu" and busy is not None and busy >= CPU_CONTENDED:
        # No waiting, yet the decode threads run on the cores the model computes on.
        text += (
            f", but the vCPUs are {100 * busy:.0f}% busy: decoding shares them with the model "
            "(CPU contention, not waiting; --synthetic-data shows the ceiling without it)"
        )
    return text
