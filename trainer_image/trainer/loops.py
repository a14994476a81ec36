"""tf-keras's multi-step train and test functions, traced once instead of twice.

For steps_per_execution N > 1, tf-keras's `make_train_function` (and `make_test_function`) is

    for _ in tf.range(self._steps_per_execution):
        outputs = step_function(self, iterator)
    return outputs

with `outputs` undefined before the loop, so autograph first traces the loop body in a scratch
graph to learn what it returns: the whole training step (forward, backward, optimizer) was traced
twice per run, about 0.5-0.9 s of CPU for a tiny-cnn (benchmarks/RESULTS-trainer-startup.md).
`trace_once` builds the same loop around tf-keras's own one-step function (what it makes for
N = 1: its step, counters and cross-replica reduction), with `outputs` defined before the loop
as what the compiled model's steps return: {"loss", metric names: float32 scalars}. The steps
run are the same, so are the results.

`build_optimizer` creates the optimizer's slot variables before fit(): made inside the first
training call instead, they made tf.function trace that call a second time (it traces a function
that created variables again), ~0.2-0.3 s of CPU.

Only for tf-keras models compiled by trainer.task (their outputs are known). A model factory's,
Keras 3's, a TPU's or a single-step execution keep Keras's own functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def trace_once(model: Any, output_names: Sequence[str]) -> None:
    """Give a compiled tf-keras `model` train and test functions whose loop is traced once.

    `output_names`: the keys of what one step returns ("loss" and the compiled metrics' names).
    Call after compile() (which drops these functions), before fit(); a no-op at one step per
    execution.
    """
    from trainer._keras import tf

    steps = model._steps_per_execution
    if steps is None or int(steps.numpy()) == 1 or model._cluster_coordinator is not None:
        return
    n = int(steps.numpy())
    # tf-keras's own one-step functions: what make_*_function returns at steps_per_execution 1.
    steps.assign(1)
    try:
        train_step = model.make_train_function(force=True).python_function
        test_step = model.make_test_function(force=True).python_function
    finally:
        steps.assign(n)

    def looped(one_step: Any) -> Any:
        def execution(iterator: Any) -> Any:
            outputs = {name: tf.zeros([], tf.float32) for name in output_names}
            for _ in tf.range(steps):  # read when called: Keras shortens an epoch's last execution
                outputs = one_step(iterator)
            return outputs

        return tf.function(execution, reduce_retracing=True)

    model.train_function = model.train_tf_function = looped(train_step)
    model.test_function = looped(test_step)


def build_optimizer(model: Any) -> None:
    """Create the compiled tf-keras `model`'s optimizer variables now (inside strategy.scope()),
    for the variables it trains: what its first apply_gradients would do."""
    model.optimizer.build(model.trainable_variables)  # LossScaleOptimizer: its inner optimizer's
