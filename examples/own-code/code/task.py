"""A small Keras training script written to Vertex AI's training code requirements.

It relies on nothing from vertex-trainer: only what Vertex AI gives every replica
(https://cloud.google.com/vertex-ai/docs/training/code-requirements):

- AIP_MODEL_DIR, AIP_CHECKPOINT_DIR: where the model and the checkpoints go (gs:// on Vertex AI,
  written through its Cloud Storage FUSE mount as /gcs/...);
- TF_CONFIG: the cluster (chief and workers), read by MultiWorkerMirroredStrategy;
- its own arguments (the spec's `args:`).

It trains a tiny classifier on synthetic data for a few steps, keeps a BackupAndRestore
checkpoint (so a restarted replica resumes), and saves the model from the chief only, as
Google's multi-worker samples do (the other workers write to a scratch directory).
"""

import argparse
import json
import os

# Keras 2 (tf-keras, requirements.txt): Keras 3's fit does not take MultiWorkerMirroredStrategy's
# distributed datasets. TensorFlow's own switch, read when TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import tensorflow as tf


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    return parser.parse_args()


def is_chief(tf_config: dict) -> bool:
    task = tf_config.get("task", {})
    # A single replica has no TF_CONFIG cluster of workers: it is the chief.
    return task.get("type", "chief") == "chief"


def dataset(batch_size: int, seed: int) -> tf.data.Dataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(512, 8)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512, seed=seed).repeat().batch(batch_size)


def main() -> None:
    args = parse_args()
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    # As Google's samples do: Vertex AI mounts every bucket at /gcs/ (Cloud Storage FUSE), so the
    # gs:// directories it gives are written as files there.
    model_dir = os.environ["AIP_MODEL_DIR"].replace("gs://", "/gcs/")
    checkpoint_dir = os.environ["AIP_CHECKPOINT_DIR"].replace("gs://", "/gcs/")
    if not is_chief(tf_config):
        # Every worker must save too (the save is a collective), each to a directory of its own.
        index = tf_config.get("task", {}).get("index", 0)
        model_dir = os.path.join(checkpoint_dir, f"worker-{index}-model")
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input(shape=(8,)),
                tf.keras.layers.Dense(16, activation="relu"),
                tf.keras.layers.Dense(2),
            ]
        )
        model.compile(
            optimizer=tf.keras.optimizers.SGD(args.learning_rate),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    backup = tf.keras.callbacks.BackupAndRestore(backup_dir=os.path.join(checkpoint_dir, "backup"))
    model.fit(
        dataset(args.batch_size, seed=0),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[backup],
        verbose=2,
    )
    os.makedirs(model_dir, exist_ok=True)
    model.save(os.path.join(model_dir, "model.keras"))
    print(f"saved the model to {model_dir}")


if __name__ == "__main__":
    main()
