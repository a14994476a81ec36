"""Every flag of `python -m trainer.task`, as data (docs/contract.md section 4).

The one description of the trainer's flags: `trainer.config` builds its argparse parser and its
range checks from `FLAGS`, and vertex-trainer builds the spec's `trainer:` block from the flags
marked `spec=True`, so the two cannot drift. Pure data: stdlib only, no TensorFlow, no other
trainer module (the client imports it to validate specs).

The choice tuples live here too; the modules that implement them (model.py, precision.py,
strategy.py, schedules.py) import them, and a unit test checks each registry against its tuple.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Models built by trainer.model (tiny-cnn plus keras.applications, trained from scratch).
MODELS = (
    "tiny-cnn",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnet50v2",
    "mobilenet-v2",
    "efficientnet-b0",
    "efficientnet-b1",
    "convnext-tiny",
)
# --model may instead name your own Keras model factory, package.module:function, found on the
# Python path (trainer.factory; image.code in the spec). Checked by trainer.config, not argparse.
FACTORY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
# Keras mixed-precision policies (trainer.precision); auto picks one per device.
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
# tf.distribute strategies (trainer.strategy); auto picks one from the machine and the cluster.
STRATEGIES = ("auto", "tpu", "multi-worker", "mirrored", "default")
# Optimizers (trainer.schedules.make_optimizer).
OPTIMIZERS = ("sgd", "lamb", "adamw")
AUGMENTATIONS = ("standard", "flip", "none")
# How the pipeline decodes (trainer.data): auto sniffs the data's first records.
IMAGE_FORMATS = ("auto", "jpeg", "png", "any")
JIT_COMPILE = ("auto", "true", "false")
# The Keras that trains the model (trainer.keras_choice): auto reads a factory's imports.
KERAS = ("auto", "2", "3")


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag: `--kebab-case` on the command line, `snake_case` in TrainConfig and the spec."""

    name: str  # snake_case
    type: type = str  # str | int | float | bool
    default: Any = None
    help: str = ""
    required: bool = False
    choices: tuple[str, ...] | None = None
    ge: float | None = None  # value >= ge
    gt: float | None = None  # value > gt
    le: float | None = None  # value <= le
    lt: float | None = None  # value < lt
    spec: bool = True  # belongs in the spec's `trainer:` block
    env: str | None = None  # unset -> this environment variable (Vertex AI sets it)
    also: str | None = None  # a regex accepted besides `choices` (--model: a factory)

    @property
    def option(self) -> str:
        """The command-line spelling, e.g. --batch-size."""
        return "--" + self.name.replace("_", "-")


def _dir(name: str, env: str, what: str) -> Flag:
    # The directories come from the spec's output_dir (Vertex AI sets AIP_*), never from trainer:.
    return Flag(name, help=f"{what}; default ${env}", env=env, spec=False)


FLAGS: tuple[Flag, ...] = (
    # -- the contract's flags (docs/contract.md section 4) -----------------------------------------------
    Flag(
        "model",
        default="resnet50",
        choices=MODELS,
        also=FACTORY_PATTERN,
        help="model name: " + ", ".join(MODELS) + "; or package.module:function, your own Keras model "
        "factory (docs/own-code.md)",
    ),
    Flag(
        "train_data",
        required=True,
        help="TFRecord files: a path, glob or comma-separated list (local, gs:// or /gcs/)",
    ),
    Flag("eval_data", help="TFRecord files for evaluation (default: no evaluation)"),
    Flag("num_classes", int, required=True, ge=2, help="number of classes"),
    Flag("image_size", int, 224, ge=1, help="square input size in pixels"),
    Flag("epochs", int, 1, ge=1, help="training epochs"),
    Flag("steps_per_epoch", int, 0, ge=0, help="0: train examples / global batch size"),
    Flag("batch_size", int, 256, ge=1, help="GLOBAL batch size (all replicas)"),
    Flag(
        "learning_rate",
        float,
        0.1,
        gt=0,
        help="learning rate at base_batch_size; scaled linearly to batch_size",
    ),
    Flag("base_batch_size", int, 256, ge=1, help="the batch size learning_rate is given for"),
    Flag("warmup_epochs", float, 5.0, ge=0, help="epochs of linear learning-rate warmup"),
    Flag(
        "precision",
        default="auto",
        choices=PRECISIONS,
        help="auto: mixed_bfloat16 on TPUs and Ampere+ GPUs, mixed_float16 on older GPUs, float32 on CPUs",
    ),
    Flag(
        "steps_per_execution",
        int,
        0,
        ge=0,
        help="steps per host round trip; 0 (the spec's auto): chosen from steps per epoch",
    ),
    Flag("seed", int, 0, help="random seed"),
    Flag("label_offset", int, 0, ge=0, help="subtracted from stored labels (1 for 1-based ImageNet labels)"),
    _dir("model_dir", "AIP_MODEL_DIR", "where the exported model goes"),
    _dir("checkpoint_dir", "AIP_CHECKPOINT_DIR", "where checkpoints go"),
    _dir("tensorboard_dir", "AIP_TENSORBOARD_LOG_DIR", "where TensorBoard logs go"),
    # -- extras beyond the contract ---------------------------------------------------------------
    Flag(
        "optimizer",
        default="sgd",
        choices=OPTIMIZERS,
        help="sgd (Nesterov momentum), lamb (large batches) or adamw",
    ),
    Flag("momentum", float, 0.9, ge=0, help="SGD momentum"),
    Flag("weight_decay", float, 5e-5, ge=0, help="decoupled; not applied to batch norm and biases"),
    Flag("label_smoothing", float, 0.0, ge=0, lt=1, help="label smoothing, in [0, 1)"),
    Flag("train_examples", int, 0, ge=0, help="train set size (saves counting records)"),
    Flag("eval_steps", int, 0, ge=0, help="0: the whole eval set (whole batches)"),
    Flag("eval_examples", int, 0, ge=0, help="eval set size (saves counting records)"),
    Flag(
        "skip_corrupt", bool, False, help="count and skip corrupt or non-matching records instead of failing"
    ),
    Flag("cache", bool, False, help="cache the records in memory after the first epoch (small data sets)"),
    Flag(
        "cache_decoded",
        bool,
        False,
        help="cache the decoded pixels instead (small images: no decoding after the first epoch; "
        "memory = height x width x 3 bytes per image)",
    ),
    Flag(
        "augment",
        default="standard",
        choices=AUGMENTATIONS,
        help="training augmentation: standard (random crop + flip), flip or none",
    ),
    Flag(
        "image_format",
        default="auto",
        choices=IMAGE_FORMATS,
        help="auto: JPEG or PNG as the data's first records are (one decoder, the fastest); "
        "any: decide per record (for data sets mixing both; a quarter more CPU per image)",
    ),
    Flag("eval_crop_fraction", float, 0.875, gt=0, le=1, help="central crop kept for evaluation"),
    Flag("shuffle_buffer", int, 10_000, ge=1, help="examples in the shuffle buffer"),
    Flag("read_parallelism", int, 16, ge=1, help="files read at once"),
    Flag(
        "gcs_read_block_mb",
        int,
        16,
        ge=1,
        help="GCS_READ_CACHE_BLOCK_SIZE_MB per open gs:// file (bounds host memory)",
    ),
    Flag(
        "data_threads",
        int,
        0,
        ge=0,
        help="the input pipeline's private threadpool size; 0 = one per vCPU, at least 4",
    ),
    Flag(
        "data_nice",
        int,
        19,
        ge=0,
        le=19,
        help="how much lower the input pipeline's threads run than the model's (Linux nice increment): "
        "decoding takes the CPU time the model leaves instead of stalling its parallel ops; 0 = the same",
    ),
    Flag("deterministic", bool, False, help="reproducible input order (slower)"),
    Flag(
        "synthetic_data",
        bool,
        False,
        help="train on one random batch of the configured shape, repeated (no files, no decode): "
        "the compute ceiling of this model on this hardware (vertex-trainer bench)",
    ),
    Flag(
        "sync_batch_norm",
        bool,
        False,
        help="all-reduce batch-norm statistics across replicas (tiny-cnn only)",
    ),
    Flag(
        "strategy",
        default="auto",
        choices=STRATEGIES,
        help="tf.distribute strategy; auto follows the machine and the cluster",
    ),
    Flag("cpu_replicas", int, 1, ge=1, help="split the CPU into N replicas (tests, demos)"),
    Flag("jit_compile", default="auto", choices=JIT_COMPILE, help="XLA; auto = on GPUs only"),
    Flag("intra_op_threads", int, 0, ge=0, help="TensorFlow intra-op threads; 0 = default"),
    Flag("inter_op_threads", int, 0, ge=0, help="TensorFlow inter-op threads; 0 = default"),
    Flag(
        "profile_steps",
        default="",
        help="'A,B': trace steps A to B (from 1) with TensorFlow's profiler into the TensorBoard "
        "folder (plugins/profile/, TensorBoard's Profile tab); whole executions are traced, those "
        "holding steps A..B; empty: no profile",
    ),
    Flag("log_interval_secs", float, 30.0, help="seconds between progress lines"),
    Flag(
        "checkpoint_interval_secs",
        float,
        600.0,
        ge=0,
        help="seconds of training between checkpoints for preemption (also saved at every epoch "
        "end and on SIGTERM); 0 = epoch ends only",
    ),
    Flag("hypertune_metric", default="accuracy", help="tag reported to Vertex hyperparameter tuning"),
    Flag(
        "keras",
        default="auto",
        choices=KERAS,
        help="the Keras that trains the model: 2 (tf-keras) or 3; auto: a factory's own imports "
        "(import keras: 3; tf_keras or tf.keras: 2), tf-keras for the built-in models",
    ),
)

BY_NAME = {flag.name: flag for flag in FLAGS}
