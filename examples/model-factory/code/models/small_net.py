"""A Keras model factory for the bundled trainer: `trainer.model: models.small_net:build`.

The trainer calls build(num_classes=..., image_size=..., dtype=...) under its distribution
strategy, with the mixed-precision policy already set (dtype is its compute dtype: float32,
float16 or bfloat16). The model takes float images [N, image_size, image_size, 3] scaled to
[-1, 1] and returns logits [N, num_classes]: the trainer adds the uint8 input, the rescaling and
a float32 softmax, and trains and exports it as it does its own models (docs/own-code.md).
"""


def build(num_classes: int, image_size: int, dtype: str):
    # The trainer's Keras (tf-keras, Keras 2), imported here rather than at the top of the
    # module: `vertex-trainer validate` imports this module to check build(), and stays fast.
    import tf_keras as keras

    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, 3), name="pixels")
    x = inputs
    for filters in (16, 32):
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        x = layers.MaxPooling2D()(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.1)(x)
    logits = layers.Dense(num_classes, name="logits")(x)  # logits: no softmax
    return keras.Model(inputs, logits, name="small_net")
