"""Large-batch training: linear LR scaling, linear warmup then cosine decay, and LAMB.

lr(step) = peak * step / warmup_steps                                   for step < warmup_steps
         = peak * 0.5 * (1 + cos(pi * (step - warmup) / (total - warmup)))  afterwards
with peak = learning_rate * global_batch / base_batch (Goyal et al. 2017).
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from trainer._keras import KERAS3, keras
from trainer.config import OPTIMIZERS


def scaled_learning_rate(learning_rate: float, batch_size: int, base_batch_size: int) -> float:
    return learning_rate * batch_size / base_batch_size


def lr_at(step: int, *, peak: float, warmup_steps: int, total_steps: int) -> float:
    """The schedule in plain Python (the reference for tests and logs)."""
    if warmup_steps > 0 and step < warmup_steps:
        return peak * step / warmup_steps
    decay_steps = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps, 0), decay_steps) / decay_steps
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


class WarmupCosineDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak` over `warmup_steps`, then cosine decay to 0 at `total_steps`."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        super().__init__()
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)

    def __call__(self, step: Any) -> Any:
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        decay_steps = float(max(self.total_steps - self.warmup_steps, 1))
        progress = tf.clip_by_value((step - self.warmup_steps) / decay_steps, 0.0, 1.0)
        cosine = self.peak * 0.5 * (1.0 + tf.cos(math.pi * progress))
        if self.warmup_steps <= 0:
            return cosine
        return tf.where(step < self.warmup_steps, self.peak * step / warmup, cosine)

    def get_config(self) -> dict[str, Any]:
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


class LAMB(keras.optimizers.Optimizer):
    """LAMB (You et al. 2019): Adam moments with a per-layer trust ratio, for very large batches.

    tf-keras ships no LAMB; a Keras 3 model gets Keras 3's own (keras.optimizers.Lamb).
    Weight decay is added to the update before the trust ratio, as in the paper; variables
    excluded with `exclude_from_weight_decay` get none.
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        lamb_weight_decay: float = 0.0,
        name: str = "LAMB",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.lamb_weight_decay = lamb_weight_decay

    def build(self, var_list: list[Any]) -> None:
        super().build(var_list)
        if getattr(self, "_built", False):
            return
        self._built = True
        self._m = [self.add_variable_from_reference(v, "m") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "v") for v in var_list]

    def update_step(self, gradient: Any, variable: Any) -> None:
        lr = tf.cast(self.learning_rate, variable.dtype)
        step = tf.cast(self.iterations + 1, variable.dtype)
        b1, b2 = tf.cast(self.beta_1, variable.dtype), tf.cast(self.beta_2, variable.dtype)
        index = self._index_dict[self._var_key(variable)]
        m, v = self._m[index], self._v[index]
        gradient = tf.convert_to_tensor(gradient)
        m.assign(b1 * m + (1 - b1) * gradient)
        v.assign(b2 * v + (1 - b2) * tf.square(gradient))
        m_hat = m / (1 - tf.pow(b1, step))
        v_hat = v / (1 - tf.pow(b2, step))
        update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
        if self.lamb_weight_decay and self._use_weight_decay(variable):
            update += tf.cast(self.lamb_weight_decay, variable.dtype) * variable
        w_norm = tf.norm(variable)
        u_norm = tf.norm(update)
        trust = tf.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, tf.ones_like(w_norm))
        variable.assign_sub(lr * trust * update)

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()
        config.update(
            {
                "learning_rate": self._serialize_hyperparameter(self._learning_rate),
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "lamb_weight_decay": self.lamb_weight_decay,
            }
        )
        return config


def make_optimizer(name: str, schedule: Any, *, momentum: float = 0.9, weight_decay: float = 0.0) -> Any:
    """SGD with Nesterov momentum (default), LAMB or AdamW; no weight decay on BN/bias."""
    if name == "sgd":
        opt = keras.optimizers.SGD(
            schedule, momentum=momentum, nesterov=True, weight_decay=weight_decay or None
        )
    elif name == "lamb" and KERAS3:  # Keras 3 ships LAMB (its weight decay is decoupled)
        opt = keras.optimizers.Lamb(schedule, weight_decay=weight_decay or None)
    elif name == "lamb":
        opt = LAMB(schedule, lamb_weight_decay=weight_decay)
    elif name == "adamw":
        opt = keras.optimizers.AdamW(schedule, weight_decay=weight_decay)
    else:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    if weight_decay:
        opt.exclude_from_weight_decay(var_names=["bn", "batch_norm", "bias", "beta", "gamma"])
    return opt
