"""The Keras the trainer uses: tf-keras (Keras 2), or Keras 3 for a Keras 3 model factory.

Keras 3.15 fails with steps_per_execution > 1 on MirroredStrategy (2 replicas) and under
MultiWorkerMirroredStrategy at any steps_per_execution (see docs/trainer.md). tf-keras runs both,
so the built-in models are tf-keras. A factory written with `import keras` is trained with Keras 3
(trainer/keras_choice.py decides; `trainer.task` sets TF_USE_LEGACY_KERAS from --keras before
anything imports this module). TF_USE_LEGACY_KERAS set before TensorFlow is imported also makes
`tf.keras` mean the same Keras, so nothing in the process mixes the two. Unset, it is tf-keras.
`tf` is TensorFlow imported so, for code that needs no Keras (the server): a bare `import
tensorflow` first would load Keras 3 (and matplotlib).

The image has both. Outside it (a pip install of vertex-trainer without make), a missing one is
a ModuleNotFoundError that says how to install it, which `trainer.task` prints as one line.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TensorFlow reads "1", "true" or "True" as tf-keras; anything else is Keras 3.
KERAS3 = os.environ["TF_USE_LEGACY_KERAS"] not in ("1", "true", "True")
MAJOR = "3" if KERAS3 else "2"
NAME = "Keras 3" if KERAS3 else "tf-keras"

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
if KERAS3:
    try:
        import keras  # type: ignore[no-redef,unused-ignore]
    except ModuleNotFoundError as e:
        if e.name != "keras":
            raise
        raise ModuleNotFoundError(
            "the trainer needs Keras 3 for this model, which is not installed here: pip install keras",
            name="keras",
        ) from None
else:
    try:
        import tf_keras as keras  # type: ignore[no-redef,unused-ignore]
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

__all__ = ["KERAS3", "MAJOR", "NAME", "keras", "tf"]
