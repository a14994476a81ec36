"""The trainer's flags (CONTRACT section 4) -> one frozen TrainConfig.

Flags use the `--kebab-case=value` form the job renderer emits; snake_case spellings are
accepted too. Unknown flags and bad values raise UsageError (the trainer exits 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
from typing import Sequence

from trainer.model import MODELS
from trainer.precision import POLICIES
from trainer.strategy import STRATEGIES


OPTIMIZERS = ("sgd", "lamb", "adamw")


class UsageError(Exception):
    """Bad flags or values (exit 2)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    model: str
    train_data: str
    eval_data: str | None
    num_classes: int
    image_size: int
    epochs: int
    steps_per_epoch: int            # 0: from --train-examples or by counting the records
    batch_size: int                 # global
    learning_rate: float            # at base_batch_size
    base_batch_size: int
    warmup_epochs: float
    precision: str
    steps_per_execution: int        # 0: chosen from steps per epoch
    seed: int
    label_offset: int
    model_dir: str
    checkpoint_dir: str
    tensorboard_dir: str
    # Extras beyond the contract.
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 5e-5
    label_smoothing: float = 0.0
    train_examples: int = 0
    eval_steps: int = 0
    eval_examples: int = 0
    skip_corrupt: bool = False
    cache: bool = False
    augment: str = "standard"
    eval_crop_fraction: float = 0.875
    shuffle_buffer: int = 10_000
    read_parallelism: int = 16
    gcs_read_block_mb: int = 16
    data_threads: int = 0
    deterministic: bool = False
    sync_batch_norm: bool = False
    strategy: str = "auto"
    cpu_replicas: int = 1
    jit_compile: str = "auto"
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    log_interval_secs: float = 30.0
    hypertune_metric: str = "accuracy"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse hook
        raise UsageError(message)


def _parser() -> _Parser:
    p = _Parser(prog="python -m trainer.task", allow_abbrev=False,
                description="Train an image classifier from ImageNet-layout TFRecords.")

    def add(name: str, **kw):
        flags = [f"--{name}"]
        if "-" in name:
            flags.append(f"--{name.replace('-', '_')}")
        p.add_argument(*flags, dest=name.replace("-", "_"), **kw)

    def flag(name: str, help: str):
        add(name, type=_bool, nargs="?", const=True, default=False, help=help)

    add("model", default="resnet50", choices=MODELS, help="model name")
    add("train-data", required=True, help="TFRecord files: path, glob or comma-separated list")
    add("eval-data", default=None, help="eval TFRecords (default: no evaluation)")
    add("num-classes", type=int, required=True)
    add("image-size", type=int, default=224)
    add("epochs", type=int, default=1)
    add("steps-per-epoch", type=int, default=0, help="0: train examples / batch size")
    add("batch-size", type=int, default=256, help="GLOBAL batch size")
    add("learning-rate", type=float, default=0.1, help="LR at --base-batch-size, scaled linearly")
    add("base-batch-size", type=int, default=256)
    add("warmup-epochs", type=float, default=5.0)
    add("precision", default="auto", choices=POLICIES)
    add("steps-per-execution", type=int, default=0, help="0: chosen from steps per epoch")
    add("seed", type=int, default=0)
    add("label-offset", type=int, default=0, help="subtracted from stored labels (1 for 1-based)")
    add("model-dir", default=None, help="default $AIP_MODEL_DIR")
    add("checkpoint-dir", default=None, help="default $AIP_CHECKPOINT_DIR")
    add("tensorboard-dir", default=None, help="default $AIP_TENSORBOARD_LOG_DIR")
    add("optimizer", default="sgd", choices=OPTIMIZERS)
    add("momentum", type=float, default=0.9)
    add("weight-decay", type=float, default=5e-5, help="decoupled; not applied to BN and biases")
    add("label-smoothing", type=float, default=0.0)
    add("train-examples", type=int, default=0, help="train set size (saves counting records)")
    add("eval-steps", type=int, default=0, help="0: the whole eval set (whole batches)")
    add("eval-examples", type=int, default=0, help="eval set size (saves counting records)")
    flag("skip-corrupt", "count and skip corrupt or non-matching records instead of failing")
    flag("cache", "cache the records in memory after the first epoch (small data sets)")
    add("augment", default="standard", choices=("standard", "flip", "none"))
    add("eval-crop-fraction", type=float, default=0.875)
    add("shuffle-buffer", type=int, default=10_000)
    add("read-parallelism", type=int, default=16, help="files read at once")
    add("gcs-read-block-mb", type=int, default=16,
        help="GCS_READ_CACHE_BLOCK_SIZE_MB per open gs:// file (bounds host memory)")
    add("data-threads", type=int, default=0, help="tf.data private threadpool size; 0 = cores")
    flag("deterministic", "reproducible input order (slower)")
    flag("sync-batch-norm", "all-reduce batch-norm statistics across replicas (tiny-cnn only)")
    add("strategy", default="auto", choices=STRATEGIES)
    add("cpu-replicas", type=int, default=1, help="split the CPU into N replicas (tests, demos)")
    add("jit-compile", default="auto", choices=("auto", "true", "false"),
        help="XLA; auto = on GPUs only")
    add("intra-op-threads", type=int, default=0)
    add("inter-op-threads", type=int, default=0)
    add("log-interval-secs", type=float, default=30.0)
    add("hypertune-metric", default="accuracy", help="tag reported to Vertex hyperparameter tuning")
    return p


def parse_flags(argv: Sequence[str], environ=None) -> TrainConfig:
    """Parse `argv` (without the program name) into a validated TrainConfig."""
    env = os.environ if environ is None else environ
    parser = _parser()
    args, unknown = parser.parse_known_args(list(argv))
    if unknown:
        known = [s for a in parser._actions for s in a.option_strings]
        hints = []
        for u in unknown:
            name = u.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1)
            hints.append(f"{u} (did you mean {close[0]}?)" if close and name.startswith("--") else u)
        raise UsageError("unknown flags: " + ", ".join(hints))
    values = vars(args)
    for name, var in (("model_dir", "AIP_MODEL_DIR"), ("checkpoint_dir", "AIP_CHECKPOINT_DIR"),
                      ("tensorboard_dir", "AIP_TENSORBOARD_LOG_DIR")):
        if not values[name]:
            values[name] = env.get(var) or None
        if not values[name]:
            raise UsageError(f"--{name.replace('_', '-')} is not set and ${var} is empty: "
                             f"pass --{name.replace('_', '-')}=DIR or set {var}")
    cfg = TrainConfig(**values)
    _validate(cfg)
    return cfg


def _validate(cfg: TrainConfig) -> None:
    positive = ["num_classes", "image_size", "epochs", "batch_size", "base_batch_size",
                "shuffle_buffer", "read_parallelism", "gcs_read_block_mb", "cpu_replicas"]
    non_negative = ["steps_per_epoch", "steps_per_execution", "train_examples", "eval_steps",
                    "eval_examples", "data_threads", "intra_op_threads", "inter_op_threads",
                    "label_offset"]
    for name in positive:
        if getattr(cfg, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    for name in non_negative:
        if getattr(cfg, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(cfg, name)}")
    if cfg.learning_rate <= 0:
        raise UsageError(f"--learning-rate must be > 0, got {cfg.learning_rate}")
    if cfg.warmup_epochs < 0:
        raise UsageError(f"--warmup-epochs must be >= 0, got {cfg.warmup_epochs}")
    if not 0.0 <= cfg.label_smoothing < 1.0:
        raise UsageError(f"--label-smoothing must be in [0, 1), got {cfg.label_smoothing}")
    if not 0.0 < cfg.eval_crop_fraction <= 1.0:
        raise UsageError(f"--eval-crop-fraction must be in (0, 1], got {cfg.eval_crop_fraction}")
    if cfg.num_classes < 2:
        raise UsageError(f"--num-classes must be >= 2, got {cfg.num_classes}")
    if cfg.sync_batch_norm and cfg.model != "tiny-cnn":
        raise UsageError(f"--sync-batch-norm is only implemented for tiny-cnn, not {cfg.model}")
    if cfg.weight_decay < 0 or cfg.momentum < 0:
        raise UsageError("--weight-decay and --momentum must be >= 0")


def choose_steps_per_execution(steps_per_epoch: int, requested: int, *, cap: int = 100) -> tuple[int, int]:
    """(steps_per_execution, steps_per_epoch) with steps_per_epoch a multiple of the first.

    Requested (> 0): clipped to the epoch, and the epoch rounded down to a multiple of it.
    Automatic (0): the epoch is split into ceil(steps/cap) equal executions; the epoch is
    rounded to the nearest multiple (a few steps at most), so callbacks still run a few
    times an epoch while the host rarely waits on the accelerator.
    """
    if steps_per_epoch < 1:
        raise UsageError("steps per epoch must be >= 1 (too few examples for the batch size?)")
    if requested > 0:
        spe = min(requested, steps_per_epoch)
        return spe, (steps_per_epoch // spe) * spe
    executions = -(-steps_per_epoch // cap)
    spe = max(1, round(steps_per_epoch / executions))
    return spe, max(spe, round(steps_per_epoch / spe) * spe)
