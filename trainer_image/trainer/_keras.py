"""The Keras the trainer uses: tf-keras (Keras 2), never Keras 3.

Keras 3.15 fails with steps_per_execution > 1 on MirroredStrategy (2 replicas) and
MultiWorkerMirroredStrategy (see docs/trainer.md). tf-keras runs both. Setting
TF_USE_LEGACY_KERAS before TensorFlow is imported also makes `tf.keras` mean tf-keras, so
nothing in the process mixes the two. `tf` is TensorFlow imported so, for code that needs no
Keras (the server): a bare `import tensorflow` first would load Keras 3 (and matplotlib).

The image has both. Outside it (a pip install of vertex-trainer without make), a missing one is
a ModuleNotFoundError that says how to install it, which `trainer.task` prints as one line.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

try:
    import tensorflow as tf
except ModuleNotFoundError as e:
    if e.name != "tensorflow":
        raise
    raise ModuleNotFoundError(
        "the trainer needs TensorFlow, which is not installed here: "
        "pip install 'vertex-trainer[trainer]' (or tensorflow itself)",
        name="tensorflow",
    ) from None
try:
    import tf_keras as keras
except ModuleNotFoundError as e:
    if e.name != "tf_keras":
        raise
    # tf-keras tracks TensorFlow minor for minor; --no-deps because it names the `tensorflow`
    # distribution, whose dependencies would install a second TensorFlow beside tensorflow-cpu.
    _minor = ".".join(tf.__version__.split(".")[:2])
    raise ModuleNotFoundError(
        f"the trainer needs tf-keras (Keras 2) for TensorFlow {tf.__version__}, which is not "
        f"installed here: pip install --no-deps 'tf-keras=={_minor}.*'",
        name="tf_keras",
    ) from None

__all__ = ["keras", "tf"]
