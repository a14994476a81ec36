"""Datasets in the Python API (docs/data.md): random images for a first run (`synthesize_data`,
the CLI's `data synth`), and class-per-folder images -> the trainer's TFRecords, on Apache Beam
here (DirectRunner) or on Dataflow (`convert_data`, the CLI's `data convert`).

    from vertex_trainer.api.data import Conversion, Runner, convert_data
    result = convert_data(Conversion("images/", "data/flowers"), Runner("direct"))
    result.manifest["splits"]["train"]["examples"]

`Conversion` (what to convert) and `Runner` (where) are vertex_trainer.dataprep's records.
`from vertex_trainer import api` loads this module when one of its names is first used.
"""

from __future__ import annotations

import math
import os
import re

from trainer import datagen
from vertex_trainer.api.core import _stderr, settings_from_env
from vertex_trainer.dataprep import convert, synth
from vertex_trainer.dataprep.launch import Conversion, Result, Runner
from vertex_trainer.errors import UserError
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings

__all__ = ["Conversion", "Result", "Runner", "convert_data", "synthesize_data"]


def convert_data(
    conversion: Conversion,
    runner: Runner,
    *,
    settings: Settings | None = None,
    log: Log | None = None,
) -> Result:
    """Convert class-per-folder images to sharded TFRecords (DirectRunner), or submit the
    conversion to Dataflow. The request and the input tree are checked before anything is
    written (exit 2 with the field and the fix).

    Args:
        conversion: what to convert and how (image_dir, out_dir, shards, eval split, marker...).
        runner: where it runs: "direct" (this machine) or "dataflow" (project, region, workers).
        settings: the process settings (default: read from the environment).
        log: where warnings and progress lines go (default: stderr).

    Returns:
        the Result: ``manifest`` of a finished conversion, or ``job_id`` and ``console_url`` of a
        submitted Dataflow job, with ``seconds`` and the Beam ``counters``.
    """
    return convert(conversion, runner, settings=settings or settings_from_env(), log=log or _stderr)


def synthesize_data(
    out_dir: str,
    *,
    examples: int = 1024,
    shards: int = 8,
    image_size: int = 64,
    num_classes: int = 10,
    eval_examples: int = 0,
    seed: int = 0,
    settings: Settings | None = None,
) -> list[str]:
    """Write random JPEG images as sharded TFRecords in the layout the trainer reads (ImageNet's:
    train-*-of-* and validation-*-of-*), locally or in Cloud Storage.

    Args:
        out_dir: a local directory (created if missing) or gs://bucket/prefix.
        examples: training examples.
        shards: train-*.tfrecord files (each holds at least one record).
        image_size: the square images' side in pixels.
        num_classes: how many labels the examples spread over.
        eval_examples: validation examples (validation-*.tfrecord; 0: none).
        seed: the random seed.
        settings: the process settings (default: read from the environment).

    Returns:
        the paths written.

    Raises:
        UserError: out_dir is a file, neither local nor gs://, or cannot be written (no
            credentials, network or bucket for gs://), or more shards than examples (exit 2).
    """
    cfg = settings or settings_from_env()
    remote = "://" in out_dir
    if not remote and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(
            f"OUT_DIR {out_dir!r} is a file, not a directory",
            hint="pass a directory to "
            "write the TFRecords into (it is created if missing), e.g. data/quickstart",
        )
    if remote and not out_dir.startswith("gs://"):
        raise UserError(
            f"OUT_DIR {out_dir!r}: data synth writes a local directory or gs://, not "
            f"{out_dir.split('://')[0]}://",
            hint="pass a local directory or gs://bucket/prefix",
        )
    if shards > examples:
        raise UserError(
            f"--shards {shards} is more than --examples {examples}: every shard needs at least one record",
            hint=f"use --shards {examples} or fewer",
        )
    try:  # an earlier dataset's shards there, locally or in Cloud Storage
        if remote:
            names = synth.shard_names(cfg, out_dir)
        else:
            names = os.listdir(out_dir) if os.path.isdir(out_dir) else []
    except synth.WriteFailed as e:
        raise UserError(f"cannot write to {out_dir}: {e}", hint=e.hint or _write_hint(out_dir, cfg)) from None
    _refuse_stale_shards(out_dir, names, shards, eval_examples)
    try:
        # One call: the eval split must come from the same class distribution as the train split.
        # The trainer's generator, with this package's encoder and writer: no TensorFlow here.
        paths: list[str] = datagen.synthesize(
            out_dir,
            examples=examples,
            shards=shards,
            image_size=image_size,
            num_classes=num_classes,
            seed=seed,
            prefix="train",
            eval_examples=eval_examples,
            encode=synth.encode_jpeg,
            write=synth.shard_writer(cfg),
        )
    except OSError as e:  # a local path we cannot write
        raise UserError(
            f"cannot write to {out_dir}: {e.strerror or e}", hint="pass a directory you can write to"
        ) from None
    except synth.WriteFailed as e:  # gs://: credentials, network, bucket or permission
        raise UserError(f"cannot write to {out_dir}: {e}", hint=e.hint or _write_hint(out_dir, cfg)) from None
    return paths


_SHARD = re.compile(r"(train|validation)-(\d{5})-of-(\d{5})")


def _refuse_stale_shards(out_dir: str, names: list[str], shards: int, eval_examples: int) -> None:
    """An OUT_DIR (local, or gs://) holding shards this run would not replace (an earlier
    synth's, with another --shards, or an eval split this run does not write) is refused (exit
    2): the trainer's `train-*` (and `validation-*`) would read them beside the new ones, a mix
    of two datasets, silently. The same command again replaces every file: that is fine.
    `names`: the files (objects) directly in OUT_DIR."""
    # The files this run writes (trainer.datagen.synthesize: one eval shard per 8 train shards)
    counts = {"train": shards}
    if eval_examples > 0:
        counts["validation"] = max(1, min(eval_examples, math.ceil(shards / 8)))
    stale = sorted(
        name for name in names if (m := _SHARD.fullmatch(name)) and counts.get(m.group(1)) != int(m.group(3))
    )
    if stale:
        shown = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
        raise UserError(
            f"OUT_DIR {out_dir} holds {len(stale)} shard(s) of an earlier dataset that this run would "
            f"not replace ({shown}): a trainer reading train-* or validation-* there would mix the two",
            hint="remove them first, or write to an empty directory",
        )


def _write_hint(out_dir: str, cfg: Settings) -> str:
    if out_dir.startswith("gs://") and not cfg.storage_emulator:
        return (
            "gs:// needs Cloud Storage: network access and credentials (gcloud auth "
            "application-default login), or run inside `vertex-trainer dev sandbox --bucket "
            "BUCKET` (the emulated bucket); a local directory needs neither"
        )
    return "check that the path exists and that you can write to it"
