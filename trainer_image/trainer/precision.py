"""Mixed precision: pick the policy per device kind, set it globally.

auto -> mixed_bfloat16 on TPUs and GPUs with compute capability >= 8.0 (A100, L4, H100, H200,
B200); mixed_float16 (with dynamic loss scaling) on older GPUs (V100, T4); float32 on CPUs,
where bf16 runs slower than float32. The model's last layer always outputs float32.
"""

from __future__ import annotations

from trainer.flags import PRECISIONS as POLICIES  # the one list of policies (the --precision flag)


def resolve(requested: str, device: str, compute_capability: tuple[int, int] | None = None) -> str:
    """The Keras policy name for `requested` on `device` (tpu | gpu | cpu)."""
    if requested not in POLICIES:
        raise ValueError(f"unknown precision {requested!r}; choose one of {', '.join(POLICIES)}")
    if requested != "auto":
        return requested
    if device == "tpu":
        return "mixed_bfloat16"
    if device == "gpu":
        if compute_capability is not None and tuple(compute_capability) >= (8, 0):
            return "mixed_bfloat16"
        return "mixed_float16"
    return "float32"


def gpu_compute_capability() -> tuple[int, int] | None:
    """The smallest compute capability among the visible GPUs (None without GPUs)."""
    import tensorflow as tf

    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        cc = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if cc:
            capabilities.append(tuple(cc))
    return min(capabilities) if capabilities else None


def apply(policy: str) -> None:
    """Set the global Keras dtype policy (before building the model)."""
    from trainer._keras import keras

    keras.mixed_precision.set_global_policy(policy)
