"""The exported SavedModel: serving signatures over encoded image bytes, and serving_config.json.

Signatures (all return float32 `probabilities` [N, num_classes] and int64 `classes` [N]):
  serving_default  image_bytes: string [N], JPEG or PNG bytes. The name ends in `_bytes`, so TF
                   Serving's and Vertex AI's JSON form `{"b64": "..."}` reaches it as bytes.
                   Decoded with exactly the evaluation preprocessing of trainer/data.py (center
                   crop of eval_crop_fraction, bilinear resize to image_size, uint8 pixels).
  serving_images   image: uint8 [N, image_size, image_size, 3], already preprocessed pixels.
  preprocess       image_bytes -> `images` uint8 [N, image_size, image_size, 3]: what the model
                   sees (for checking a client's own preprocessing).

Beside saved_model.pb the chief writes `serving_config.json` (SERVING_CONFIG): the values the
signature was built with, so a server or a client can describe the model without TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from typing import Any

SERVING_CONFIG = "serving_config.json"
INPUT_NAME = "image_bytes"
IMAGES_INPUT_NAME = "image"
BYTES_SIGNATURE = "serving_default"
IMAGES_SIGNATURE = "serving_images"
PREPROCESS_SIGNATURE = "preprocess"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ServingConfig:
    """What the serving signature needs from the run, written beside the SavedModel."""

    num_classes: int
    image_size: int
    eval_crop_fraction: float
    model: str = ""
    labels: tuple[str, ...] | None = None  # class names by index, when the run has them

    @classmethod
    def from_train_config(cls, cfg: Any) -> ServingConfig:  # a trainer.config.TrainConfig
        return cls(
            num_classes=cfg.num_classes,
            image_size=cfg.image_size,
            eval_crop_fraction=cfg.eval_crop_fraction,
            model=cfg.model,
        )

    def to_json(self, tensorflow_version: str) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "model": self.model,
            "num_classes": self.num_classes,
            "image_size": self.image_size,
            "eval_crop_fraction": self.eval_crop_fraction,
            "labels": list(self.labels) if self.labels is not None else None,
            "signature": BYTES_SIGNATURE,
            "input": INPUT_NAME,
            "input_formats": ["jpeg", "png"],
            "outputs": {"classes": "int64 [N]", "probabilities": f"float32 [N, {self.num_classes}]"},
            "images_signature": IMAGES_SIGNATURE,
            "preprocessing": (
                f"decode (3 channels), center crop {self.eval_crop_fraction:g} of the "
                f"shorter side, bilinear resize to {self.image_size}x{self.image_size}, "
                "round to uint8 (as evaluation)"
            ),
            "tensorflow": tensorflow_version,
        }


def save(model: Any, target: str, serving: ServingConfig, *, traces: bool | None = None) -> None:
    """model.save(target) with the serving signatures, then serving_config.json beside it (a Keras 3
    model: tf.saved_model.save with the same signatures).

    A built-in model is saved without its layers' traced call functions (save_traces=False): it
    is made of Keras's own layers, which load back from their config, and tracing every layer
    again was half of a tiny-cnn's export CPU and two thirds of a ResNet-50's
    (benchmarks/RESULTS-export.md).
    A factory's model keeps them, so its custom layers load back without their code. Serving
    reads the signatures either way. `traces` overrides the choice (benchmarks/export_traces.py).
    """
    import tensorflow as tf

    from trainer import factory
    from trainer._keras import KERAS3

    if traces is None:
        traces = factory.is_factory(serving.model)

    if KERAS3:
        # Keras 3 saves .keras files only; the SavedModel is TensorFlow's own, with the very same
        # signatures (a server loads it with tf.saved_model.load, never with Keras).
        tf.saved_model.save(model, target, signatures=signatures(model, serving))
    else:
        model.save(
            target,
            save_format="tf",
            include_optimizer=False,
            signatures=signatures(model, serving),
            save_traces=traces,
        )
    with tf.io.gfile.GFile(posixpath.join(target.rstrip("/"), SERVING_CONFIG), "w") as f:
        f.write(json.dumps(serving.to_json(tf.__version__), indent=2) + "\n")


def signatures(model: Any, serving: ServingConfig) -> dict[str, Any]:
    """The functions to export: {signature name: tf.function with an input_signature}."""
    import tensorflow as tf

    from trainer import data

    size = serving.image_size
    # The very function evaluation maps over its records (training=False: no augmentation).
    eval_cfg = data.PipelineConfig(
        image_size=size,
        num_classes=serving.num_classes,
        training=False,
        eval_crop_fraction=serving.eval_crop_fraction,
    )
    image_spec = tf.TensorSpec([size, size, 3], tf.uint8)

    def decode(image_bytes: Any) -> Any:
        return tf.map_fn(
            lambda encoded: data._decode_and_augment(encoded, eval_cfg),
            image_bytes,
            fn_output_signature=image_spec,
        )

    def classify(images: Any) -> dict[str, Any]:
        # The last layer is float32 under any mixed-precision policy; the cast is a no-op then.
        probabilities = tf.cast(model(images, training=False), tf.float32)
        return {
            "classes": tf.argmax(probabilities, axis=-1, output_type=tf.int64),
            "probabilities": probabilities,
        }

    # autograph=False: no Python control flow on tensors here (tf.map_fn is explicit), so
    # autograph's rewrite of these functions and of the decoding they call only cost CPU
    # (benchmarks/RESULTS-trainer-startup.md); the graphs are the same.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)], autograph=False)
    def preprocess(image_bytes: Any) -> dict[str, Any]:
        return {"images": decode(image_bytes)}

    @tf.function(
        input_signature=[tf.TensorSpec([None, size, size, 3], tf.uint8, name=IMAGES_INPUT_NAME)],
        autograph=False,
    )
    def serve_images(image: Any) -> dict[str, Any]:
        return classify(image)

    # The bytes signature is the other two composed: one decode graph, traced once, so the served
    # pixels are `preprocess`'s by construction (and the export traces the decoding once).
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)], autograph=False)
    def serve_bytes(image_bytes: Any) -> dict[str, Any]:
        served: dict[str, Any] = serve_images(preprocess(image_bytes)["images"])
        return served

    # The tf.functions themselves, not concrete functions: those cannot be saved when the model's
    # variables are distributed (MirroredStrategy, MultiWorkerMirroredStrategy).
    return {BYTES_SIGNATURE: serve_bytes, IMAGES_SIGNATURE: serve_images, PREPROCESS_SIGNATURE: preprocess}


def read_serving_config(model_dir: str) -> dict[str, Any] | None:
    """serving_config.json of an export (local or gs://), or None if it has none."""
    import tensorflow as tf

    path = posixpath.join(model_dir.rstrip("/"), SERVING_CONFIG)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        config: dict[str, Any] = json.loads(f.read())
        return config
