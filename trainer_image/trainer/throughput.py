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

Host round trips (`host_overhead_fraction`): Keras returns to Python after every execution
(steps_per_execution steps), converts the logs, runs the callbacks' batch hooks, steps its loop
and dispatches the next execution (the tf.function call); meanwhile the device runs no step.
The meter measures that per execution with one clock on both sides (time.time() on the host and
tf.timestamp() in the graph both read the wall clock):

    round trip = [graph] the start of the execution's first step (before its get_next)
               - [host]  the meter's on_train_batch_end after the previous execution

The meter is fit()'s first callback, so the other callbacks, Keras' loop, the batch-begin hooks,
the tf.function call and the graph up to its first get_next are in the round trip; the function
returning its outputs and Keras converting the logs, before the meter runs, are not: the figure
is a lower bound (benchmarks/RESULTS-host-overhead.md measures that part). Each step's start
goes to a ring of steps_per_execution slots in the meter's one host variable, which the callback
reads once per execution (it read two before) and never writes: the execution's first step is
the batch count at the previous read.
`host_overhead_fraction` = the round trips / their cycles (round trip + execution), summed over
the executions but the first START_UP (the first traces and compiles; the round trip after it
holds the callbacks' first calls, e.g. ~0.5 s once for the TensorBoard callback's summary ops).
An epoch's first execution is counted from its own on_train_batch_begin: the epoch's end (its
checkpoint and logs, a new iterator) is a cost per epoch that steps_per_execution does not
remove. Checkpoints saved and profiles started or stopped in a round trip are left out.

On a CPU the host is the device: the round trip is time in which no step runs. A GPU runs
asynchronously: the host may return while the device still runs the execution's last step, and
the round trip would then overlap device work. With `sync_on` the meter's callback first reads
the model's smallest variable (the device has finished the execution) and each step's start
waits for the previous step, so the figure is the device's idle time between executions. The
GPU path is exercised on CPU in the tests, not measured on a GPU; TPUs get no sync.
docs/trainer.md ("Where the time goes") explains how to read them.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from trainer._keras import keras
from trainer.executions import choose_steps_per_execution

# Waiting for data at least this share of the step time makes a run "input-bound".
INPUT_BOUND = 0.10
# A CPU device whose process keeps this share of the vCPUs busy has none to spare for decoding.
CPU_CONTENDED = 0.90
# Host round trips between executions at least this share of the time (and more than the input
# wait) make a run "host-bound"; the verdict names the steps_per_execution that brings them to
# HOST_TARGET (their share falls as 1 / steps_per_execution).
HOST_BOUND = 0.10
HOST_TARGET = 0.05
# The executions whose round trips are start-up, not measured: the first (tracing, compiling) and
# the one after it, whose round trip holds the callbacks' first calls (Keras' TensorBoard callback
# loads its summary ops there: ~0.5 s here, once).
START_UP = 2
# The in-graph record of an execution's first step start before that step has run.
_NOT_STARTED = float("inf")


@dataclasses.dataclass(frozen=True)
class Execution:
    """One call into the training function (steps_per_execution steps)."""

    seconds: float  # wall time, host clock, from the callback before the call to the one after
    waited: float  # of which blocked in get_next
    steps: int
    started: float = 0.0  # time.perf_counter() at its start
    cpu: float = 0.0  # process CPU seconds (all threads) during it
    # The host round trip before its first step (module docstring) and the whole cycle (round
    # trip + execution), seconds; round_started: time.perf_counter() at the round trip's start.
    host: float = 0.0
    cycle: float = 0.0
    round_started: float = 0.0
    profiled: bool = False  # its round trip starts or stops the profiler (--profile-steps)


class InputWaitMeter(keras.callbacks.Callback):
    """Times every get_next of the training dataset; per-execution wait shares; the summary.

    Create it outside `strategy.scope()` (its counters are plain host variables), `wrap()` the
    distributed training dataset, call `sync_on(model)` on GPUs, and pass it to fit() as a
    callback before the progress callback.
    """

    def __init__(self, global_batch: int, steps_per_execution: int = 1):
        super().__init__()
        self.global_batch = global_batch
        self._ring = max(1, steps_per_execution)
        with tf.device("/device:CPU:0"):
            # [seconds waited in get_next, batches, then the start of step b at 2 + b % ring]: one
            # host variable, read once per execution and never written from the host; an
            # execution's first step is the batch count at the previous read, and its start stays
            # in the ring until steps_per_execution more steps have run
            self._state = tf.Variable(
                [0.0, 0.0] + [_NOT_STARTED] * self._ring,
                dtype=tf.float64,
                trainable=False,
                name="input_wait_state",
            )
        self._host = self._state.device
        self._device_variable: Any = None
        self.executions: list[Execution] = []
        self._epoch_first = 0
        self._last = (0.0, 0)
        self._began = 0.0
        self._cpu = 0.0
        # Where the next round trip started: (time.time(), time.perf_counter()); None: at the
        # next on_train_batch_begin (the first execution of an epoch)
        self._round: tuple[float, float] | None = None
        self._profiled = (0, -1)  # executions (from 1) whose round trips start or stop the profiler

    # -- in the graph ----------------------------------------------------------------------------

    def wrap(self, dataset: Any) -> _TimedDataset:
        """The distributed dataset, with every get_next of its iterators timed."""
        return _TimedDataset(dataset, self)

    def sync_on(self, model: Any) -> None:
        """Make each timed get_next first wait for the device to finish the previous step, and
        each execution's callback for the device to finish the execution (GPUs: the host would
        otherwise run ahead and count device time as waiting or as a round trip). Uses the
        model's smallest variable, which every step updates."""
        variables = list(model.trainable_variables)
        if variables:
            self._device_variable = min(variables, key=lambda v: v.shape.num_elements() or 0)

    def timed(self, get_next: Callable[[], Any]) -> Any:
        """`get_next()` between two host timestamps; the difference goes to the wait counter, the
        first timestamp (the step's start) to the ring slot of its batch number."""
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
        with tf.device(self._host):
            # in place, the fewest ops (a step of a small model is a millisecond)
            slot = 2 + tf.cast(tf.math.floormod(self._state[1], self._ring), tf.int32)
            tf.raw_ops.ResourceScatterNdAdd(
                ref=self._state.handle, indices=[[0], [1]], updates=tf.stack([waited, 1.0])
            )
            tf.raw_ops.ResourceScatterUpdate(resource=self._state.handle, indices=slot, updates=start)
        return batch

    def profiling(self, first: int, last: int) -> None:
        """Executions `first`..`last` (from 1) are traced (Keras' TensorBoard callback): the round
        trips that start the profiler (before `first`) and stop and write it (before `last` + 1)
        are its cost, not the loop's, and are left out."""
        self._profiled = (first, last + 1)

    # -- the callback: per execution ------------------------------------------------------------

    def _read(self) -> tuple[float, int, float]:
        """(seconds waited, batches, the start of the first step after the previous read: inf
        if more steps than the ring holds ran since, when it is overwritten)."""
        state = self._state.numpy()
        waited, batches = float(state[0]), int(state[1])
        first = float(state[2 + self._last[1] % self._ring])
        return waited, batches, first if batches - self._last[1] <= self._ring else _NOT_STARTED

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._last = (0.0, 0)
        self._last = self._read()[:2]

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch_first = len(self.executions)
        self._round = None

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._began, self._cpu = time.perf_counter(), time.process_time()
        if self._round is None:
            self._round = (time.time(), self._began)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._device_variable is not None:
            self._device_variable.numpy()  # the device has finished this execution
        ended, cpu, wall = time.perf_counter(), time.process_time(), time.time()
        waited, batches, first = self._read()
        round_wall, round_perf = self._round or (wall, ended)
        # not measured (cycle 0) when the first step's start is not in the ring
        measured = math.isfinite(first)
        host = min(max(0.0, first - round_wall), wall - round_wall) if measured else 0.0
        self.executions.append(
            Execution(
                ended - self._began,
                waited - self._last[0],
                batches - self._last[1],
                self._began,
                cpu - self._cpu,
                host=host,
                cycle=max(0.0, wall - round_wall) if measured else 0.0,
                round_started=round_perf,
                profiled=self._profiled[0] <= len(self.executions) + 1 <= self._profiled[1],
            )
        )
        self._last = (waited, batches)
        self._round = (wall, ended)

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

    def host_fraction(self, first: int = 0, saving: Saving | None = None) -> float | None:
        """Share of the cycles of the executions from `first` on spent on host round trips (never
        the run's first two: START_UP); `saving(start, end)`: checkpoint seconds in a span, left out."""
        host, cycles = _round_trips(self.executions[max(first, START_UP) :], saving)
        if cycles <= 0:
            return None
        return min(1.0, max(0.0, host / cycles))

    def epoch_host_fraction(self, saving: Saving | None = None) -> float | None:
        """The same over the current epoch so far (what the progress lines show)."""
        return self.host_fraction(self._epoch_first, saving)

    def summary(self, saving: Saving | None = None) -> dict[str, Any]:
        """The metrics.json fields: input_wait_fraction, host_overhead_fraction and what they
        were measured over; `saving`: PreemptionCheckpoint.seconds_between."""
        chosen = self._measured()
        seconds = sum(e.seconds for e in chosen)
        steps = sum(e.steps for e in chosen)
        fraction = self.fraction()
        busy = sum(e.cpu for e in chosen) / (seconds * vcpus()) if seconds > 0 else None
        host, cycles = _round_trips(self.executions[START_UP:], saving)
        trips = sum(1 for e in self.executions[START_UP:] if e.cycle > 0 and not e.profiled)
        host_fraction = self.host_fraction(saving=saving)
        return {
            "input_wait_fraction": _round(fraction),
            "input_wait_seconds": round(sum(e.waited for e in chosen), 4),
            "input_wait_measured_steps": steps,
            "input_wait_measured_seconds": round(seconds, 4),
            # this process's CPU time / (wall time x vCPUs) over the same executions
            "host_cpu_busy_fraction": round(min(1.0, busy), 4) if busy is not None else None,
            "host_overhead_fraction": _round(host_fraction),
            "host_overhead_seconds": round(host, 4),
            "host_round_trip_ms": round(1000 * host / trips, 3) if trips else None,
            "host_overhead_measured_executions": trips,
            "host_overhead_measured_seconds": round(cycles, 4),
            "bound": bound(fraction, host_fraction),
        }


Saving = Callable[[float, float], float]


def _round(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def _round_trips(executions: list[Execution], saving: Saving | None) -> tuple[float, float]:
    """(seconds of host round trips, seconds of their cycles), checkpoint saves left out."""
    host = cycles = 0.0
    for e in executions:
        if e.cycle <= 0 or e.profiled:
            continue
        saved = saving(e.round_started, e.started + e.seconds) if saving else 0.0
        host += max(0.0, e.host - saved)
        cycles += max(0.0, e.cycle - saved)
    return host, cycles


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


def bound(fraction: float | None, host: float | None = None) -> str | None:
    """'input', 'host' or 'compute' for a measured input wait and host round-trip share (None:
    nothing measured): the larger of the two once it reaches its threshold."""
    if fraction is None:
        return None
    if host is not None and host >= HOST_BOUND and host >= fraction:
        return "host"
    return "input" if fraction >= INPUT_BOUND else "compute"


def steps_per_execution_for(fraction: float, steps_per_execution: int, target: float = HOST_TARGET) -> int:
    """The steps_per_execution (a power of two) at which host round trips that took `fraction`
    of the time at `steps_per_execution` take at most `target` of it: a round trip costs the same
    per execution, so with r = round trip / step time = spe * f / (1 - f), the share at n steps
    is r / (r + n) <= target when n >= r * (1 - target) / target."""
    if fraction >= 1.0:
        return 2 * max(1, steps_per_execution)
    ratio = steps_per_execution * fraction / (1.0 - fraction)
    needed = max(1.0, ratio * (1.0 - target) / target)
    return 1 << math.ceil(math.log2(needed))


def host_clause(summary: dict[str, Any]) -> str | None:
    """'host-bound: 31% of the time between executions at steps_per_execution=1: use 0 (auto:
    100 here) or >= 16', from metrics.json's fields; None unless the run is host-bound."""
    host = summary.get("host_overhead_fraction")
    spe = summary.get("steps_per_execution")
    if host is None or not spe or bound(summary.get("input_wait_fraction") or 0.0, host) != "host":
        return None
    needed = steps_per_execution_for(host, int(spe))
    epoch = summary.get("steps_per_epoch")
    auto = f" (auto: {choose_steps_per_execution(int(epoch), 0)[0]} here)" if epoch else " (auto)"
    fix = f"use trainer.steps_per_execution: 0{auto} or >= {needed}"
    if epoch and needed > int(epoch):
        fix = (
            f"the round trip outweighs the steps even at {needed} per execution: use "
            f"trainer.steps_per_execution: {epoch} (the whole epoch) and fewer, longer epochs"
        )
    return f"host-bound: {100 * host:.0f}% of the time between executions at steps_per_execution={spe}: {fix}"


def verdict(
    summary: dict[str, Any],
    *,
    synthetic: bool,
    devices: int,
    device: str,
    cpus: int | None = None,
    data_threads: int = 0,
) -> str:
    """The one line a run ends with: host-bound, input-bound or compute-bound, the measured
    shares, and what to try. `summary` holds InputWaitMeter.summary()'s fields (metrics.json
    does, with steps_per_execution and steps_per_epoch); `devices` are this machine's replicas."""
    cpus = cpus or vcpus()
    what = describe_devices(devices, device)
    fraction, rate = summary.get("input_wait_fraction"), summary.get("steady_examples_per_sec")
    if fraction is None:
        return "throughput: no training step ran in this process, so no input wait was measured"
    share = f"{100 * fraction:.0f}% of the time waiting for data"
    host = summary.get("host_overhead_fraction")
    # the round trips' share, last (the lines before it keep their words for their readers)
    between = f"; {100 * host:.0f}% of the time between executions" if host is not None else ""
    speed = f"{rate:,.0f} examples/s" if rate else "throughput unknown"
    trips = host_clause(summary)
    if synthetic:
        text = (
            f"throughput: synthetic data, the compute ceiling of {what}: {speed}, {share}; "
            "compare a real-data run (vertex-trainer bench runs both)"
        )
        return f"{text}; {trips}" if trips else text + between
    if trips:  # the wait's share is of the executions' time, the round trips' of the whole cycle
        waiting = f"waiting for data: {100 * fraction:.0f}% of the executions' time"
        return f"throughput: {trips} ({speed}; {waiting})"
    if bound(fraction) == "input":
        threads = f" (now {data_threads})" if data_threads else ""
        return (
            f"throughput: input-bound: {share} ({speed}); this machine has {cpus} vCPUs for {what}: "
            f"try a machine type with more vCPUs, or --read-parallelism/--data-threads{threads}{between}"
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
    return text + between
