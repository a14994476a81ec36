"""Your model in the bundled trainer: `--model=package.module:function` (docs/own-code.md).

The factory is called with keyword arguments, under the run's strategy scope and with the
mixed-precision policy already set:

    function(num_classes: int, image_size: int, dtype: str) -> keras.Model

The model is tf-keras (Keras 2) or Keras 3, as the module imports it (`import tf_keras as
keras` or `import keras`; trainer/keras_choice.py reads it before TensorFlow loads, --keras
overrides it); the trainer frames and trains it with that same Keras.

`dtype` is the policy's compute dtype (float32, float16 or bfloat16). The model it returns takes
float images [N, image_size, image_size, 3] scaled to [-1, 1] and returns logits
[N, num_classes] (no softmax). The trainer wraps it as it builds its own models: uint8 pixels in,
cast and rescaled on the accelerator, a float32 softmax out (so the loss is float32 under any
policy), and then gives it everything else (LR scaling, steps_per_execution, the input pipeline,
checkpoints, telemetry, the serving export). The module is found on PYTHONPATH: the image puts
image.code there (/opt/code), a local run and the sandbox put the directory there.

The module and function are looked up with the standard library only (importlib); TensorFlow is
imported by the user's code itself, or by `build`.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from typing import Any

from trainer.config import UsageError
from trainer.flags import FACTORY_PATTERN

FACTORY_RE = re.compile(FACTORY_PATTERN)  # package.module:function (the spec checks the same)
ARGUMENTS = ("num_classes", "image_size", "dtype")  # the keyword arguments every factory takes
# The first component may not shadow the bundled trainer's own package.
RESERVED = ("trainer",)


def is_factory(model: str) -> bool:
    """True when --model names a factory (package.module:function), not a built-in model."""
    return bool(FACTORY_RE.fullmatch(model or ""))


def split(model: str) -> tuple[str, str]:
    """'package.module:function' -> ('package.module', 'function')."""
    module, _, function = model.partition(":")
    return module, function


def signature_problem(function: Callable[..., Any]) -> str | None:
    """Why `function` cannot be called as function(num_classes=, image_size=, dtype=) (None: it can)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # a builtin or C callable: nothing to inspect, the call will tell
    try:
        signature.bind(**dict.fromkeys(ARGUMENTS, 0))
    except TypeError as e:
        return f"its signature {signature} cannot take {', '.join(ARGUMENTS)} as keyword arguments ({e})"
    return None


def load(model: str) -> Callable[..., Any]:
    """Import the factory named by `model`; UsageError (exit 2) naming what is wrong."""
    module_name, function_name = split(model)
    if module_name.split(".")[0] in RESERVED:
        raise UsageError(
            f"--model={model}: the package {module_name.split('.')[0]!r} is the bundled trainer's own; "
            "rename your package"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise UsageError(
                f"--model={model}: no module {module_name!r} on the Python path "
                "(image.code must hold it: package/module.py)"
            ) from None
        raise UsageError(
            f"--model={model}: importing {module_name} failed: no module named {e.name!r}"
        ) from None
    function = getattr(module, function_name, None)
    if function is None:
        raise UsageError(f"--model={model}: {module_name} has no {function_name!r}")
    if not callable(function):
        raise UsageError(f"--model={model}: {module_name}.{function_name} is not callable")
    problem = signature_problem(function)
    if problem:
        raise UsageError(f"--model={model}: {problem}")
    return function  # type: ignore[no-any-return]


def build(model: str, *, num_classes: int, image_size: int) -> Any:
    """The factory's model inside the trainer's frame (uint8 in, float32 probabilities out)."""
    from trainer._keras import keras

    policy = keras.mixed_precision.global_policy()
    inner = load(model)(num_classes=num_classes, image_size=image_size, dtype=policy.compute_dtype)
    check_model(model, inner, num_classes=num_classes, image_size=image_size)
    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    x = layers.Rescaling(1.0 / 127.5, offset=-1.0, name="rescale")(inputs)
    logits = inner(x)
    # float32 outputs under any mixed-precision policy: a stable softmax and loss.
    probs = layers.Activation("softmax", dtype="float32", name="probabilities")(logits)
    return keras.Model(inputs, probs, name="factory_" + re.sub(r"\W", "_", model))


def check_model(model: str, inner: Any, *, num_classes: int, image_size: int) -> None:
    """What the factory returned must be a Keras model of the agreed shapes (UsageError if not):
    a model of the Keras the trainer runs (tf-keras or Keras 3, trainer._keras)."""
    from trainer._keras import KERAS3, NAME, keras

    where = f"--model={model}"
    if not isinstance(inner, keras.Model):
        hint = ""
        top = type(inner).__module__.split(".")[0]
        if top in ("keras", "tf_keras") and (top == "keras") != KERAS3:
            other = "3" if top == "keras" else "2"
            hint = (
                f" (a {'Keras 3' if top == 'keras' else 'tf-keras'} model, while the trainer runs "
                f"{NAME}: set trainer.keras: {other} (--keras={other}), or import one Keras only)"
            )
        raise UsageError(f"{where}: returned {type(inner).__name__}, not a {NAME} Model{hint}")
    try:
        out = inner.compute_output_shape((None, image_size, image_size, 3))
    except Exception as e:  # a model that cannot take [N, S, S, 3] at all
        raise UsageError(
            f"{where}: the model does not take images [N, {image_size}, {image_size}, 3]: {e}"
        ) from None
    shape = tuple(out.as_list() if hasattr(out, "as_list") else out)
    if len(shape) != 2 or shape[-1] != num_classes:
        raise UsageError(
            f"{where}: the model returns shape {list(shape)}; it must return logits [N, {num_classes}]"
        )
    activation = getattr(inner.layers[-1], "activation", None) if inner.layers else None
    if getattr(activation, "__name__", "") == "softmax":
        raise UsageError(
            f"{where}: the model ends in a softmax; return logits (the trainer adds a float32 "
            "softmax), e.g. classifier_activation=None"
        )
