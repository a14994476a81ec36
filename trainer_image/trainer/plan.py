"""The run's plan: files, input configs, steps and learning rate, resolved once from the flags and
the data (task.py's third stage, after the strategy and the precision policy).

Steps per epoch come from --steps-per-epoch, else --train-examples, else by counting the records;
steps_per_execution is the one choice of trainer/executions.py (vertex-trainer's bench cuts its
epoch with it too); the peak learning rate is scaled to the global batch (trainer/schedules.py).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from typing import TYPE_CHECKING, Any

from trainer.config import TrainConfig, UsageError
from trainer.executions import choose_steps_per_execution
from trainer.log import log

if TYPE_CHECKING:
    from trainer.strategy import StrategyInfo


@dataclasses.dataclass(frozen=True)
class Plan:
    """Files, steps and learning rate, resolved once from the flags and the data."""

    train_files: list[str]
    eval_files: list[str]
    train_cfg: Any  # data.PipelineConfig (trainer.data imports TensorFlow: not at import time)
    eval_cfg: Any
    steps_per_epoch: int
    eval_steps: int
    steps_per_execution: int
    total_steps: int
    warmup_steps: int
    peak_lr: float
    jit_compile: bool

    def schedule(self) -> Any:
        """The learning-rate schedule: warmup, then cosine decay to the last step."""
        from trainer import schedules

        return schedules.WarmupCosineDecay(self.peak_lr, self.warmup_steps, self.total_steps)


def check_local_data(cfg: TrainConfig) -> None:
    """Fail fast, before TensorFlow loads (~4.5 s of CPU): a local --train-data or --eval-data
    pattern that matches nothing raises UsageError with data.list_files' message ("no files match
    <pattern>"), for the patterns plan_training will list. Patterns with a scheme (gs://: TF's
    filesystem) or whose glob syntax Python reads differently (a backslash escape, [^...]) are
    left to data.list_files."""
    synthetic_only = cfg.synthetic_data and (cfg.steps_per_epoch or cfg.train_examples)
    listed = [] if synthetic_only else [cfg.train_data]
    if cfg.eval_data and not cfg.synthetic_data:
        listed.append(cfg.eval_data)
    for patterns in listed:
        for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
            if "://" in pattern or "\\" in pattern or "[^" in pattern:
                continue
            if not _matches_any(pattern):
                raise UsageError(f"no files match {pattern}")


def _matches_any(pattern: str) -> bool:
    """Whether a local glob matches a path, as TensorFlow's does: one component at a time, `*`
    matching names that start with a dot too (Python's glob leaves those out)."""
    paths = ["/" if pattern.startswith("/") else "."]
    for part in [p for p in pattern.split("/") if p]:
        found = []
        for base in paths:
            if not any(c in part for c in "*?["):
                found += [os.path.join(base, part)] if os.path.lexists(os.path.join(base, part)) else []
                continue
            try:
                names = os.listdir(base)
            except OSError:  # not a directory, or unreadable: TensorFlow lists nothing there either
                continue
            found += [os.path.join(base, n) for n in names if fnmatch.fnmatchcase(n, part)]
        if not found:
            return False
        paths = found
    return True


def plan_training(cfg: TrainConfig, info: StrategyInfo) -> Plan:
    """The run's files, input configs, steps and learning rate (`info`: from strategy.create)."""
    from trainer import data, schedules
    from trainer.corrupt import data_errors

    # Synthetic data reads no files (unless they are needed to count the steps) and evaluates nothing.
    synthetic_only = cfg.synthetic_data and (cfg.steps_per_epoch or cfg.train_examples)
    train_files = [] if synthetic_only else data.list_files(cfg.train_data)
    eval_files = data.list_files(cfg.eval_data) if cfg.eval_data and not cfg.synthetic_data else []
    train_cfg = data.PipelineConfig(
        image_size=cfg.image_size,
        num_classes=cfg.num_classes,
        training=True,
        label_offset=cfg.label_offset,
        seed=cfg.seed,
        skip_corrupt=cfg.skip_corrupt,
        cache=cfg.cache,
        augment=cfg.augment,
        eval_crop_fraction=cfg.eval_crop_fraction,
        shuffle_buffer=cfg.shuffle_buffer,
        read_parallelism=cfg.read_parallelism,
        deterministic=cfg.deterministic,
        threads=cfg.data_threads or data.default_threads(),
        image_format=cfg.image_format,
        cache_decoded=cfg.cache_decoded,
    )
    eval_cfg = data.PipelineConfig(**{**train_cfg.__dict__, "training": False})
    # One decoder for data of one format (a per-record JPEG/PNG branch costs a quarter more CPU).
    train_cfg = data.resolve_format(train_files, train_cfg) if train_files else train_cfg
    eval_cfg = data.resolve_format(eval_files, eval_cfg) if eval_files else eval_cfg
    if cfg.image_format == "auto" and (train_files or eval_files):
        log(
            f"image format: {train_cfg.image_format if train_files else '-'} (train), "
            f"{eval_cfg.image_format if eval_files else '-'} (eval), from the first records; "
            "--image-format=any for data that mixes JPEG and PNG"
        )
    with data_errors(train_files + eval_files, train_cfg):
        steps_per_epoch, eval_steps = count_steps(cfg, train_files, eval_files)
    spe, steps_per_epoch = choose_steps_per_execution(
        steps_per_epoch, _steps_per_execution(cfg, info.replicas, info.workers)
    )
    total_steps = steps_per_epoch * cfg.epochs
    warmup_steps = round(cfg.warmup_epochs * steps_per_epoch)
    if warmup_steps >= total_steps:
        warmup_steps = total_steps // 2
        log(f"warmup longer than training: warming up over {warmup_steps} steps instead")
    return Plan(
        train_files=train_files,
        eval_files=eval_files,
        train_cfg=train_cfg,
        eval_cfg=eval_cfg,
        steps_per_epoch=steps_per_epoch,
        eval_steps=eval_steps,
        steps_per_execution=spe,
        total_steps=total_steps,
        warmup_steps=warmup_steps,
        peak_lr=schedules.scaled_learning_rate(cfg.learning_rate, cfg.batch_size, cfg.base_batch_size),
        jit_compile={"true": True, "false": False}.get(cfg.jit_compile, info.device == "gpu"),
    )


def _steps_per_execution(cfg: TrainConfig, replicas: int, workers: int) -> int:
    """--steps-per-execution, or 1 where the model's Keras needs it (Keras 3 on several replicas:
    trainer/keras_choice.py); UsageError where that Keras cannot train here at all."""
    from trainer import keras_choice

    major = cfg.keras if cfg.keras in keras_choice.NAMES else keras_choice.DEFAULT
    refusal = keras_choice.limits(
        major, replicas=replicas, workers=workers, steps_per_execution=cfg.steps_per_execution
    )
    if refusal:
        fix = (
            "train on one machine (MirroredStrategy over its devices), or write the model with tf_keras"
            if workers > 1
            else "use --steps-per-execution=1 (or leave it to the trainer), or write the model with tf_keras"
        )
        raise UsageError(
            f"--model={cfg.model} is a {keras_choice.NAMES[major]} model on {replicas} replicas "
            f"({workers} workers) with --steps-per-execution={cfg.steps_per_execution}: {refusal}; {fix}"
        )
    cap = keras_choice.cap_steps_per_execution(major, replicas) if not cfg.steps_per_execution else None
    if cap:
        log(f"{keras_choice.NAMES[major]} on {replicas} replicas: {cap}")
        return 1
    return cfg.steps_per_execution


def count_steps(cfg: TrainConfig, train_files: list[str], eval_files: list[str]) -> tuple[int, int]:
    """(train steps per epoch, eval steps) from the flags, else from counting the records."""
    from trainer import data

    steps_per_epoch = cfg.steps_per_epoch
    if not steps_per_epoch:
        examples = cfg.train_examples
        if not examples:
            log(
                f"counting records in {len(train_files)} train files "
                "(pass --steps-per-epoch or --train-examples to skip this)"
            )
            examples = data.count_records(train_files, skip_corrupt=cfg.skip_corrupt)
        steps_per_epoch = examples // cfg.batch_size
        if steps_per_epoch < 1:
            raise data.DataError(f"{examples} train examples make no full batch of {cfg.batch_size}")
    eval_steps = cfg.eval_steps
    if eval_files and not eval_steps:
        examples = cfg.eval_examples or data.count_records(eval_files, skip_corrupt=cfg.skip_corrupt)
        eval_steps = examples // cfg.batch_size
        if eval_steps < 1:
            raise data.DataError(
                f"{examples} eval examples make no full batch of {cfg.batch_size}; "
                "use a smaller --batch-size or more eval data"
            )
        left_out = examples - eval_steps * cfg.batch_size
        if left_out:  # whole global batches only (static shapes for XLA/TPU): say so, never silently
            log(
                f"evaluation uses {examples - left_out} of {examples} eval examples (whole global "
                f"batches of {cfg.batch_size}); {left_out} are left out: a global batch that divides "
                "the eval set evaluates them all"
            )
    return steps_per_epoch, eval_steps
