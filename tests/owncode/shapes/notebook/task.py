"""A training script in the shape of a Vertex AI sample notebook's (written for these tests): one
file, its strategy picked by --distribute, its data made in memory, the model saved where Vertex
AI says (AIP_MODEL_DIR). --no-save trains nothing and writes nothing (no TensorFlow imported)."""

import argparse
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--lr", dest="lr", default=0.01, type=float)
parser.add_argument("--epochs", dest="epochs", default=1, type=int)
parser.add_argument("--steps", dest="steps", default=2, type=int)
parser.add_argument(
    "--distribute", dest="distribute", default="single", choices=["single", "mirror", "multi"]
)
parser.add_argument("--no-save", dest="save", action="store_false")
args = parser.parse_args()
print("arguments", vars(args))
if not args.save:
    print("nothing to save")
    sys.exit(0)

import tensorflow as tf  # noqa: E402

if args.distribute == "single":
    strategy = tf.distribute.get_strategy()
elif args.distribute == "mirror":
    strategy = tf.distribute.MirroredStrategy()
else:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
print("replicas in sync", strategy.num_replicas_in_sync)

images = tf.random.stateless_uniform((64, 8, 8, 1), seed=(1, 2))
labels = tf.cast(tf.reduce_sum(images, axis=[1, 2, 3]) > 32.0, tf.int64)
data = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(16)

with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((8, 8, 1)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(2)]
    )
    model.compile(
        optimizer=tf.keras.optimizers.SGD(args.lr),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
model.fit(data, epochs=args.epochs, steps_per_epoch=args.steps, verbose=2)

model_dir = os.environ["AIP_MODEL_DIR"]
if hasattr(model, "export"):  # Keras 3 (TensorFlow's tf.keras since 2.16): a SavedModel by export
    model.export(model_dir)
else:
    model.save(model_dir)
print("saved the model to", model_dir)
