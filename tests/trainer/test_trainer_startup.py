"""The trainer's fixed start-up cost: what a run builds before its first step and after its last.

The functions trainer/data.py hands to tf.data and the export's signature functions branch on
Python values only, so they are traced as written, not rewritten by autograph first (~1 s of CPU
per trainer process: benchmarks/RESULTS-trainer-startup.md). Autograph loads every function it
rewrites as a module named `__autograph_generated_file...` in sys.modules: none may appear.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from .conftest import Lazy

pytestmark = pytest.mark.trainer

data = Lazy("trainer.data")  # imports TensorFlow
export = Lazy("trainer.export")
models = Lazy("trainer.model")


def rewritten() -> set[str]:
    return {name for name in sys.modules if name.startswith("__autograph_generated_file")}


@pytest.mark.parametrize(
    "variant",
    [
        {"training": True},  # random resized crop + flip, shuffle, label check per batch
        {"training": False},  # central crop
        {"training": True, "skip_corrupt": True},  # per-record checks, filter, a counter
        {"training": True, "cache_decoded": True, "skip_corrupt": True},
        {"training": False, "image_format": "any"},  # a tf.cond per record
    ],
    ids=["train", "eval", "skip-corrupt", "cache-decoded", "any-format"],
)
def test_input_pipelines_are_not_rewritten_by_autograph(synth_data, variant):
    import tensorflow as tf

    files = sorted(str(p) for p in synth_data.glob("train-*"))
    settings = {"image_format": "jpeg", **variant}
    cfg = data.PipelineConfig(image_size=16, num_classes=4, seed=1, threads=2, **settings)
    skipped = tf.Variable(0, dtype=tf.int64) if cfg.skip_corrupt else None
    before = rewritten()
    ds = data.build_dataset(files, cfg, 8, skipped=skipped)
    images, labels = next(iter(ds))
    assert rewritten() == before
    # The graphs as written give what the pipeline promises.
    assert images.shape == (8, 16, 16, 3) and images.dtype == tf.uint8
    assert labels.dtype == tf.int32 and set(labels.numpy()) <= {0, 1, 2, 3}


def test_counting_records_and_synthetic_batches_are_not_rewritten_by_autograph(synth_data):
    files = sorted(str(p) for p in synth_data.glob("train-*"))
    cfg = data.PipelineConfig(image_size=16, num_classes=4, seed=1, training=True)
    before = rewritten()
    assert data.count_records(files) == 128
    images, labels = next(iter(data.synthetic_dataset(cfg, 4)))
    assert rewritten() == before
    assert images.shape == (4, 16, 16, 3) and set(labels.numpy()) <= {0, 1, 2, 3}


def test_export_signatures_are_not_rewritten_by_autograph(synth_data):
    import tensorflow as tf

    from trainer import datagen

    model = models.build_model("tiny-cnn", num_classes=4, image_size=16)
    serving = export.ServingConfig(num_classes=4, image_size=16, eval_crop_fraction=0.875, model="tiny-cnn")
    before = rewritten()
    functions = export.signatures(model, serving)
    concrete = {name: fn.get_concrete_function() for name, fn in functions.items()}
    assert rewritten() == before
    assert set(concrete) == {export.BYTES_SIGNATURE, export.IMAGES_SIGNATURE, export.PREPROCESS_SIGNATURE}
    # serving_default is preprocess then serving_images, on JPEG bytes from the data set.
    records = datagen.iter_records(sorted(str(p) for p in synth_data.glob("validation-*")))
    encoded = [record_image(r) for r in records][:3]
    served = concrete[export.BYTES_SIGNATURE](tf.constant(encoded))
    pixels = concrete[export.PREPROCESS_SIGNATURE](tf.constant(encoded))["images"]
    direct = concrete[export.IMAGES_SIGNATURE](pixels)
    assert served["probabilities"].shape == (3, 4) and served["classes"].dtype == tf.int64
    np.testing.assert_allclose(served["probabilities"].numpy(), direct["probabilities"].numpy(), atol=1e-6)


def record_image(record: bytes) -> bytes:
    import tensorflow as tf

    example = tf.train.Example.FromString(record)
    return example.features.feature["image/encoded"].bytes_list.value[0]


def compiled(steps_per_execution: int, *, own_loop: bool):
    """A seeded tiny-cnn compiled as trainer.task compiles it, with a train_step trace counter."""
    from trainer import loops
    from trainer._keras import keras

    keras.utils.set_random_seed(3)
    model = models.build_model("tiny-cnn", num_classes=4, image_size=16)
    model.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        steps_per_execution=steps_per_execution,
    )
    traces = {"train": 0, "test": 0}
    train_step, test_step = model.train_step, model.test_step

    def counted_train(batch):
        traces["train"] += 1
        return train_step(batch)

    def counted_test(batch):
        traces["test"] += 1
        return test_step(batch)

    model.train_step, model.test_step = counted_train, counted_test
    if own_loop:  # as trainer.task does for a built-in model
        loops.build_optimizer(model)
        loops.trace_once(model, ["loss", "accuracy"])
    return model, traces


def test_multi_step_executions_trace_the_step_once_with_the_same_results():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 16, 16, 3), dtype=np.uint8)
    labels = rng.integers(0, 4, 64).astype(np.int32)
    batches = tf.data.Dataset.from_tensor_slices((images, labels)).batch(8)
    seen = {}
    for own_loop in (False, True):
        model, traces = compiled(4, own_loop=own_loop)
        history = model.fit(batches.repeat(), epochs=2, steps_per_epoch=8, verbose=0, shuffle=False)
        # 3 eval steps at 4 per execution: Keras shortens the execution, the loop reads it
        evaluated = model.evaluate(batches, steps=3, verbose=0, return_dict=True)
        seen[own_loop] = (history.history, evaluated, [w.numpy() for w in model.weights], dict(traces))
        assert int(model._train_counter.numpy()) == 16 and int(model._test_counter.numpy()) == 3
    (keras_history, keras_eval, keras_weights, keras_traces), (history, evaluated, weights, traces) = (
        seen[False],
        seen[True],
    )
    assert history == keras_history and evaluated == keras_eval
    for ours, theirs in zip(weights, keras_weights, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    # tf-keras traces each loop body a second time to learn what it returns, and its first
    # training call creates the optimizer's variables, so tf.function traces that call again
    # (2 x 2); ours: the loop's outputs defined first, the optimizer built before fit().
    assert (keras_traces, traces) == ({"train": 4, "test": 2}, {"train": 1, "test": 1})


def test_one_step_per_execution_keeps_keras_functions():
    model, _ = compiled(1, own_loop=True)
    assert model.train_function is None and model.test_function is None  # fit() makes Keras's own
