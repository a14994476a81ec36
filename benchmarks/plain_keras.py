"""The baseline: the plain `model.fit` script a competent user would write, on the same data.

Same model builder (`trainer.model.build_model`), same tf-keras, optimizer
(`trainer.schedules.make_optimizer`, warmup + cosine), loss, metric, global batch and
steps_per_execution as `python -m trainer.task`; its own input pipeline (tf.data with its
defaults on: parallel reads, parallel map, prefetch; or `--naive`: none of them), no checks, no
checkpoints, no telemetry. It writes a metrics.json with the same throughput fields the trainer
writes, measured the same way (benchmarks/ab_compare.py runs the two alternately):

  train_examples_per_sec  examples/s from the end of the first (tracing, compiling) execution to
                          the end of training
  wall_examples_per_sec   every example over the whole of fit()

    python benchmarks/plain_keras.py --train-data 'DIR/train-*' --num-classes 10 --image-size 64 \
        --batch-size 128 --epochs 3 --steps-per-epoch 64 --steps-per-execution 32 --out DIR/metrics.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def make_dataset(files, *, image_size: int, batch_size: int, augment: str, naive: bool, seed: int):
    """TFRecords -> (uint8 image, int32 label) batches, JPEG decode with random crop + flip."""
    import tensorflow as tf

    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record):
        parsed = tf.io.parse_single_example(record, features)
        encoded = parsed["image/encoded"]
        if augment == "standard":
            shape = tf.image.extract_jpeg_shape(encoded)
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                shape,
                bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
                min_object_covered=0.1,
                aspect_ratio_range=(3 / 4, 4 / 3),
                area_range=(0.08, 1.0),
                max_attempts=10,
                use_image_if_no_bounding_boxes=True,
                seed=seed,
            )
            window = tf.stack([begin[0], begin[1], size[0], size[1]])
            image = tf.image.decode_and_crop_jpeg(encoded, window, channels=3)
        else:
            image = tf.io.decode_jpeg(encoded, channels=3)
        image = tf.image.resize(image, [image_size, image_size])
        image = tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)
        if augment in ("standard", "flip"):
            image = tf.image.random_flip_left_right(image, seed=seed)
        return image, tf.cast(parsed["image/class/label"], tf.int32)

    if naive:  # what a first script looks like: no parallel reads or map, no explicit prefetch
        ds = tf.data.TFRecordDataset(files).repeat().shuffle(10_000, seed=seed).map(parse)
        return ds.batch(batch_size, drop_remainder=True)
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
    ds = ds.repeat().shuffle(10_000, seed=seed)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train-data", required=True)
    p.add_argument("--num-classes", type=int, required=True)
    p.add_argument("--model", default="tiny-cnn")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, required=True)
    p.add_argument("--steps-per-execution", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--augment", default="standard", choices=("standard", "flip", "none"))
    p.add_argument("--naive", action="store_true", help="no parallel reads or map, no prefetch")
    p.add_argument("--synthetic-data", action="store_true", help="one random batch, repeated")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="write metrics.json here")
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from trainer import (
        _keras,  # noqa: F401 - tf-keras, as the trainer uses
        schedules,
    )
    from trainer._keras import keras
    from trainer.model import build_model

    keras.utils.set_random_seed(args.seed)
    if args.synthetic_data:
        images = tf.random.uniform(
            [args.batch_size, args.image_size, args.image_size, 3], maxval=256, dtype=tf.int32
        )
        labels = tf.random.uniform([args.batch_size], maxval=args.num_classes, dtype=tf.int32)
        ds = tf.data.Dataset.from_tensors((tf.cast(images, tf.uint8), labels)).repeat()
    else:
        files = sorted(tf.io.gfile.glob(args.train_data))
        ds = make_dataset(
            files,
            image_size=args.image_size,
            batch_size=args.batch_size,
            augment=args.augment,
            naive=args.naive,
            seed=args.seed,
        )
    total = args.steps_per_epoch * args.epochs
    model = build_model(args.model, num_classes=args.num_classes, image_size=args.image_size)
    optimizer = schedules.make_optimizer(
        "sgd", schedules.WarmupCosineDecay(args.learning_rate, 0, total), momentum=0.9, weight_decay=5e-5
    )
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        steps_per_execution=args.steps_per_execution,
        jit_compile=False,
    )

    class FirstExecution(keras.callbacks.Callback):
        """Notes when the first execution ends (a Python call per execution, no sync)."""

        def __init__(self):
            super().__init__()
            self._supports_tf_logs = True  # no conversion of the logs to numpy per execution
            self.end = None

        def on_train_batch_end(self, batch, logs=None):
            if self.end is None:
                self.end, self.steps = time.perf_counter(), batch + 1

    first = FirstExecution()
    started = time.perf_counter()
    model.fit(ds, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, callbacks=[first], verbose=0)
    ended = time.perf_counter()
    steady_steps = total - first.steps
    metrics = {
        "train_examples_per_sec": (
            steady_steps * args.batch_size / (ended - first.end) if steady_steps > 0 else None
        ),
        "wall_examples_per_sec": total * args.batch_size / (ended - started),
        "train_seconds": ended - started,
        "steps": total,
        "global_batch_size": args.batch_size,
        "steps_per_execution": args.steps_per_execution,
        "baseline": "naive" if args.naive else "plain",
    }
    with open(args.out, "w") as f:
        json.dump(metrics, f, indent=2, sort_keys=True)
    print(
        f"plain keras: {metrics['train_examples_per_sec'] or 0:.1f} examples/s steady, "
        f"{metrics['wall_examples_per_sec']:.1f} over fit()"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
