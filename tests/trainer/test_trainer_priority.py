"""trainer.priority: the threads started after the baseline get the nice increment, TensorFlow's
named runtime threads and the threads present before keep theirs (Linux: /proc/self/task)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from .conftest import Lazy

priority = Lazy("trainer.priority")  # imports Keras (5 s): not while collecting
TASKS = "/proc/self/task"  # trainer.priority.TASKS (checked below)

pytestmark = [
    pytest.mark.trainer,  # the callback is a Keras one: these import TensorFlow
    pytest.mark.skipif(not Path(TASKS).is_dir(), reason="needs Linux /proc/self/task"),
]


class Parked:
    """A thread that waits until released, its OS thread id known, optionally renamed."""

    def __init__(self, name: str | None = None):
        self.ready, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(name,), daemon=True)
        self.thread.start()
        assert self.ready.wait(30)

    def _run(self, name):
        if name:  # a thread may set its own comm, as TensorFlow does for its pools
            Path(f"{priority.TASKS}/{threading.get_native_id()}/comm").write_text(name)
        self.ready.set()
        self.release.wait(60)

    @property
    def nice(self) -> int:
        return os.getpriority(os.PRIO_PROCESS, self.thread.native_id)

    def stop(self):
        self.release.set()
        self.thread.join(30)


def test_new_unnamed_threads_get_the_increment_and_the_others_keep_theirs():
    assert priority.TASKS == TASKS
    base = os.getpriority(os.PRIO_PROCESS, 0)
    old = Parked()
    cb = priority.DataThreadPriority(5)
    new, runtime = Parked(), Parked("tf_Compute")
    try:
        cb.on_epoch_begin(0)
        assert new.nice == min(19, base + 5)
        assert runtime.nice == base and old.nice == base
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the caller's own
        assert cb.niced == 1
        cb.on_train_batch_end(0)  # seen once: not counted again
        assert cb.niced == 1
    finally:
        for t in (old, new, runtime):
            t.stop()


def test_scans_stop_after_the_first_executions_but_not_at_epoch_starts():
    cb = priority.DataThreadPriority(3)
    for batch in range(priority.SCANS):
        cb.on_train_batch_end(batch)
    late = Parked()
    try:
        cb.on_train_batch_end(priority.SCANS)  # past the first executions: no scan
        assert cb.niced == 0
        cb.on_epoch_begin(1)
        assert cb.niced == 1 and late.nice == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 3)
    finally:
        late.stop()


def test_increment_zero_changes_nothing():
    cb = priority.DataThreadPriority(0)
    t = Parked()
    try:
        cb.on_epoch_begin(0)
        assert cb.niced == 0 and t.nice == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        t.stop()


def test_the_nice_value_is_capped_at_19():
    t = Parked()
    try:
        assert priority.lower_priority([t.thread.native_id], 40) == 1
        assert t.nice == 19
        assert priority.lower_priority([2**22 + 12345], 1) == 0  # no such thread: skipped
    finally:
        t.stop()
