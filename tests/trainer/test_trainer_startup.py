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
