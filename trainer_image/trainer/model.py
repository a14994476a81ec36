"""Models by name. All take uint8 images [N, S, S, 3] and output float32 class probabilities.

A name of the form package.module:function is your own Keras model factory (trainer/factory.py),
framed the same way.

Inputs are cast and rescaled inside the model (on the accelerator). The softmax runs in float32
whatever the mixed-precision policy, so the loss is computed in float32.
"""

from __future__ import annotations

from typing import Any

from trainer.flags import MODELS  # the --model choices; a unit test checks them against the registry

# name -> keras.applications constructor (no pretrained weights: we train from scratch).
_APPLICATIONS = {
    "resnet50": "ResNet50",
    "resnet101": "ResNet101",
    "resnet152": "ResNet152",
    "resnet50v2": "ResNet50V2",
    "mobilenet-v2": "MobileNetV2",
    "efficientnet-b0": "EfficientNetB0",
    "efficientnet-b1": "EfficientNetB1",
    "convnext-tiny": "ConvNeXtTiny",
}
# These include their own input rescaling.
_SELF_RESCALING = {"efficientnet-b0", "efficientnet-b1", "convnext-tiny"}


def build_model(name: str, *, num_classes: int, image_size: int, sync_batch_norm: bool = False) -> Any:
    """The classifier `name` (see MODELS), built under the current dtype policy and strategy."""
    from trainer import factory
    from trainer._keras import keras

    if factory.is_factory(name):
        return factory.build(name, num_classes=num_classes, image_size=image_size)
    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    if name == "tiny-cnn":
        features = _tiny_cnn(layers, _rescale(layers, inputs), sync_batch_norm)
    elif name in _APPLICATIONS:
        if sync_batch_norm:
            raise ValueError(f"--sync-batch-norm is only implemented for tiny-cnn, not {name}")
        if name in _SELF_RESCALING:  # cast only: these rescale 0..255 themselves
            x = layers.Rescaling(1.0, name="to_float")(inputs)
        else:
            x = _rescale(layers, inputs)
        backbone = getattr(keras.applications, _APPLICATIONS[name])(
            include_top=False, weights=None, input_shape=(image_size, image_size, 3), pooling="avg"
        )
        features = backbone(x)
    else:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    logits = layers.Dense(num_classes, name="logits")(features)
    # float32 outputs under any mixed-precision policy: a stable softmax and loss.
    probs = layers.Activation("softmax", dtype="float32", name="probabilities")(logits)
    return keras.Model(inputs, probs, name=name.replace("-", "_"))


def _rescale(layers: Any, x: Any) -> Any:
    return layers.Rescaling(1.0 / 127.5, offset=-1.0, name="rescale")(x)


def _tiny_cnn(layers: Any, x: Any, sync_batch_norm: bool = False) -> Any:
    """Three conv/BN/ReLU blocks and global pooling: fast on a CPU, still learns small images.

    With `sync_batch_norm`, batch statistics are all-reduced across replicas, which makes a
    multi-replica step compute exactly what one replica with the global batch computes.
    """
    for i, (filters, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
        x = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"conv{i}")(x)
        x = layers.BatchNormalization(synchronized=sync_batch_norm, name=f"bn{i}")(x)
        x = layers.ReLU(name=f"relu{i}")(x)
    return layers.GlobalAveragePooling2D(name="pool")(x)
