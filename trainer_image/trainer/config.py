"""The trainer's flags (docs/contract.md section 4) -> one frozen TrainConfig.

The flags are described once, as data, in `trainer.flags`; the parser and the range checks
below are built from that table (and so is the spec's `trainer:` block in vertex-trainer).
Flags use the `--kebab-case=value` form the job renderer emits; snake_case spellings are
accepted too. Unknown flags and bad values raise UsageError (the trainer exits 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from trainer.executions import choose_steps_per_execution, parse_profile_steps
from trainer.flags import FLAGS, OPTIMIZERS, Flag

__all__ = ["OPTIMIZERS", "TrainConfig", "UsageError", "choose_steps_per_execution", "parse_flags"]


class UsageError(Exception):
    """Bad flags or values (exit 2)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The resolved flags; one field per entry of trainer.flags.FLAGS (a unit test checks it)."""

    model: str
    train_data: str
    eval_data: str | None
    num_classes: int
    image_size: int
    epochs: int
    steps_per_epoch: int  # 0: from --train-examples or by counting the records
    batch_size: int  # global
    learning_rate: float  # at base_batch_size
    base_batch_size: int
    warmup_epochs: float
    precision: str
    steps_per_execution: int  # 0: chosen from steps per epoch
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
    cache_decoded: bool = False
    augment: str = "standard"
    image_format: str = "auto"  # trainer.data.sniff_format resolves auto
    eval_crop_fraction: float = 0.875
    shuffle_buffer: int = 10_000
    read_parallelism: int = 16
    gcs_read_block_mb: int = 16
    data_threads: int = 0
    data_nice: int = 19  # trainer/priority.py
    deterministic: bool = False
    synthetic_data: bool = False  # random batches instead of the input pipeline (trainer/throughput.py)
    sync_batch_norm: bool = False
    strategy: str = "auto"
    cpu_replicas: int = 1
    jit_compile: str = "auto"
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    profile_steps: str = ""  # "A,B": trainer.executions.parse_profile_steps
    log_interval_secs: float = 30.0
    checkpoint_interval_secs: float = 600.0  # trainer/checkpoint.py
    hypertune_metric: str = "accuracy"
    keras: str = "auto"  # trainer.keras_choice; task.py resolves auto to 2 or 3

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _int(text: str) -> int:
    # Vertex AI hyperparameter tuning passes DISCRETE values as doubles ("--batch-size=256.0"):
    # a whole number written as a float is that integer; 2.5 is still an error.
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if value.is_integer():
            return int(value)
        raise ValueError(text) from None


_int.__name__ = "int"  # argparse names the type in its message: "invalid int value: '2.5'"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="python -m trainer.task",
        allow_abbrev=False,
        description="Train an image classifier from ImageNet-layout TFRecords.",
    )
    for flag in FLAGS:
        options = [flag.option]
        if "_" in flag.name:
            options.append(f"--{flag.name}")  # snake_case spelling too
        kw: dict[str, Any] = {"dest": flag.name, "help": flag.help or None}
        if flag.type is bool:
            # --cache, --cache=true, --cache=false
            kw.update(type=_bool, nargs="?", const=True, default=bool(flag.default))
        else:
            kw.update(type=_int if flag.type is int else flag.type, default=flag.default)
            if flag.required:
                kw["required"] = True
            if flag.choices and not flag.also:  # `also`: checked in _validate
                kw["choices"] = flag.choices
        p.add_argument(*options, **kw)
    return p


def parse_flags(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> TrainConfig:
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
    for flag in FLAGS:
        if flag.env is None:
            continue
        if not values[flag.name]:
            values[flag.name] = env.get(flag.env) or None
        if not values[flag.name]:
            raise UsageError(
                f"{flag.option} is not set and ${flag.env} is empty: pass {flag.option}=DIR or set {flag.env}"
            )
    cfg = TrainConfig(**values)
    _validate(cfg)
    return cfg


def _range_problem(flag: Flag, value: Any) -> str | None:
    """'--x must be >= 1, got 0' when `value` is outside the flag's bounds, else None."""
    low = (flag.ge, "[") if flag.ge is not None else (flag.gt, "(") if flag.gt is not None else None
    high = (flag.le, "]") if flag.le is not None else (flag.lt, ")") if flag.lt is not None else None
    ok = (
        (flag.ge is None or value >= flag.ge)
        and (flag.gt is None or value > flag.gt)
        and (flag.le is None or value <= flag.le)
        and (flag.lt is None or value < flag.lt)
    )
    if ok or (low is None and high is None):
        return None
    if low and high:
        rule = f"in {low[1]}{low[0]:g}, {high[0]:g}{high[1]}"
    elif low:
        rule = f"{'>=' if low[1] == '[' else '>'} {low[0]:g}"
    elif high:
        rule = f"{'<=' if high[1] == ']' else '<'} {high[0]:g}"
    return f"{flag.option} must be {rule}, got {value}"


def _validate(cfg: TrainConfig) -> None:
    for flag in FLAGS:
        if flag.type in (int, float):
            problem = _range_problem(flag, getattr(cfg, flag.name))
            if problem:
                raise UsageError(problem)
    for flag in FLAGS:
        value = getattr(cfg, flag.name)
        if flag.also and flag.choices and value not in flag.choices and not re.fullmatch(flag.also, value):
            # argparse's own words (--model: a factory is any package.module:function)
            choices = ", ".join(repr(m) for m in flag.choices)
            raise UsageError(
                f"argument {flag.option}: invalid choice: {value!r} (choose from {choices}; "
                "or package.module:function, your own model factory)"
            )
    try:  # the window's steps against the run's, when the flags fix them
        parse_profile_steps(cfg.profile_steps, cfg.steps_per_epoch * cfg.epochs)
    except ValueError as e:
        raise UsageError(f"--profile-steps {e}") from None
    if cfg.sync_batch_norm and cfg.model != "tiny-cnn":
        raise UsageError(f"--sync-batch-norm is only implemented for tiny-cnn, not {cfg.model}")
