"""The input pipeline's threads at a lower scheduling priority than the model's (Linux).

On a CPU host the decode threads and the model share the vCPUs. At the same priority a decode
thread that takes a core from one of the model's intra-op threads stalls the whole op: the op's
other shards finish and wait for that one. At a higher nice value the decode runs in the cycles
the model leaves (between ops and steps) and the prefetch buffer absorbs the delay; the model's
threads, and the thread that drives an accelerator, keep the cores. If the pipeline then cannot
keep up, that shows as input wait, which the run's verdict reports (trainer/throughput.py).
Measured on 2 vCPUs, tiny-cnn 64 px on real JPEGs: benchmarks/RESULTS-ab-idle.md.

tf.data starts its threads (its private threadpool and its interleave and prefetch workers) when
the iterator is first used, inside fit(). TensorFlow does not name them; its own runtime pools are
named `tf_*`. So `DataThreadPriority` notes the thread ids that exist before fit(). During the
first executions and at each epoch start, it gives the threads that have appeared since, and are
not named `tf_*`, the lower priority. Elsewhere than Linux (no /proc/self/task) it does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from trainer._keras import keras

TASKS = "/proc/self/task"
# Executions after which new threads are looked for (tf.data starts its workers lazily).
SCANS = 3


def thread_ids() -> set[int]:
    """This process's thread ids (empty where /proc/self/task does not exist)."""
    try:
        return {int(t) for t in os.listdir(TASKS)}
    except OSError:
        return set()


def thread_name(tid: int) -> str:
    try:
        with open(f"{TASKS}/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def lower_priority(tids: Iterable[int], increment: int) -> int:
    """Raise the nice value of each thread in `tids` by `increment` (capped at 19) from this
    process's own; threads that have ended are skipped. Returns how many were changed."""
    if increment <= 0:
        return 0
    target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + increment)
    changed = 0
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, target)
            changed += 1
        except OSError:
            pass  # ended, or not ours to change: the run goes on at the default priority
    return changed


class DataThreadPriority(keras.callbacks.Callback):
    """Gives the threads tf.data starts inside fit() `increment` more nice than the model's.

    Create it just before fit() (after the model and datasets are built, before any training
    iterator exists): the threads present then are the model's and the runtime's.
    """

    def __init__(self, increment: int):
        super().__init__()
        self.increment = increment
        self._before = thread_ids()
        self._seen: set[int] = set()
        self._executions = 0
        self.niced = 0

    def scan(self) -> None:
        if self.increment <= 0 or not self._before:
            return
        new = thread_ids() - self._before - self._seen
        self._seen |= new
        self.niced += lower_priority([t for t in new if not thread_name(t).startswith("tf_")], self.increment)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.scan()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._executions < SCANS:
            self.scan()
        self._executions += 1
