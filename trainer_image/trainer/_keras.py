"""The Keras the trainer uses: tf-keras (Keras 2), never Keras 3.

Keras 3.15 fails with steps_per_execution > 1 on MirroredStrategy (2 replicas) and
MultiWorkerMirroredStrategy (see docs/trainer.md). tf-keras runs both. Setting
TF_USE_LEGACY_KERAS before TensorFlow is imported also makes `tf.keras` mean tf-keras, so
nothing in the process mixes the two. `tf` is TensorFlow imported so, for code that needs no
Keras (the server): a bare `import tensorflow` first would load Keras 3 (and matplotlib).
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf
import tf_keras as keras

__all__ = ["keras", "tf"]
