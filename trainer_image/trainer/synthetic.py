"""The synthetic run's input (--synthetic-data): one batch, handed to every step without tf.data.

`data.synthetic_dataset` makes one random batch per input pipeline (uint8 images, int32 labels,
the real pipeline's shapes); the strategy distributes it as it would a real batch (to each
replica's device). `FixedBatches` takes that batch once and gives it to every step.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class FixedBatches(tf.distribute.DistributedDataset):  # type: ignore[misc]  # TensorFlow is Any to mypy
    """The synthetic run's input: one distributed batch, taken once from `dataset` (the
    distributed `synthetic_dataset`, already on each replica's device) and handed out again at
    every step, with no tf.data iterator in the step.

    A tf.data get_next (IteratorGetNext) is an asynchronous op: the step hands it to a tf.data
    thread and waits for that thread to be scheduled, then for an inter-op thread to take the step
    up again. Idle, that is ~55 us; with both cores busy it was 1.3-1.9 ms a step, which the
    meter rightly counted as waiting for input (a synthetic run "waited" 5-6% of a tiny-cnn step
    at load 9, and 26% once in the suite). Here the batch is a tensor the training function
    captures, so the step's input costs nothing and the run is the compute ceiling: measured on
    the same machine and load, a wait of 0.0 ms per execution against 24-100 ms
    (benchmarks/RESULTS-sweep.md). Keras takes any tf.distribute.DistributedDataset; its
    iterator is a plain object, as the meter's own wrapper is.
    """

    def __init__(self, dataset: tf.distribute.DistributedDataset) -> None:
        self._spec = dataset.element_spec
        self._batch = next(iter(dataset))  # eager: made, copied to the devices, once

    def __iter__(self) -> _FixedIterator:
        return _FixedIterator(self._batch, self._spec)

    @property
    def element_spec(self) -> Any:
        return self._spec

    def reduce(self, initial_state: Any, reduce_func: Any) -> Any:
        raise TypeError("FixedBatches repeats forever: it cannot be reduced")


class _FixedIterator:
    def __init__(self, batch: Any, spec: Any) -> None:
        self._batch, self.element_spec = batch, spec

    def __iter__(self) -> _FixedIterator:
        return self

    def __next__(self) -> Any:
        return self._batch

    def get_next(self) -> Any:
        return self._batch


def source(dataset: tf.distribute.DistributedDataset, strategy_kind: str) -> tf.distribute.DistributedDataset:
    """What a synthetic run's steps read: `FixedBatches` of the distributed synthetic dataset,
    except under TPUStrategy, which keeps the dataset itself (cached and repeated; a captured
    batch on TPU devices is untested here)."""
    return dataset if strategy_kind == "tpu" else FixedBatches(dataset)
