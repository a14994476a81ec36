"""Naming a corrupt record: which errors are a record failing in the input pipeline, and the scan
that finds the file, the record's position and the reason.

The hot path says only that a record failed (trainer/data.py: a decoder given foreign bytes, the
one label check per batch); building reasons per record would cost more CPU than the checks.
`data_errors` wraps fit/evaluate (and the record counts): such an error becomes a DataError that
names the record (exit 2), found by `find_corrupt_record` afterwards.
"""

from __future__ import annotations

import dataclasses
import re
import time
from types import TracebackType
from typing import Literal

import tensorflow as tf

from trainer import data
from trainer.data import DataError
from trainer.log import log

# A record whose image bytes are missing or of another format fails in its decoder.
_DECODER_FAILED = re.compile(r"\{\{node [^}]*(ExtractJpegShape|Decode(AndCrop)?Jpeg|DecodePng|DecodeImage)")


def is_bad_record(error: BaseException) -> bool:
    """Whether `error` is a record failing in the pipeline: the label check, or a decoder given
    bytes that are missing or not its format (find_corrupt_record names the record)."""
    text = str(getattr(error, "message", error))
    return data.BAD_RECORD in text or bool(_DECODER_FAILED.search(text))


def find_corrupt_record(
    files: list[str], cfg: data.PipelineConfig, *, budget_secs: float = 120.0
) -> str | None:
    """Scan `files` in order for the first record that cannot be read, parsed or decoded.

    Used after a data error whose message does not name a file (CRC errors, undecodable image
    bytes). Returns "<file> record <n>: <reason>", or None if nothing was found within the
    time budget.
    """
    check_cfg = dataclasses.replace(cfg, training=False, skip_corrupt=False)

    def check_one(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        encoded, _, ok, reason = data.parse_record(record, check_cfg)
        # Returning a value computed from the decoded image keeps the decode from being pruned.
        pixels = tf.cond(
            ok,
            lambda: tf.reduce_sum(tf.cast(data._decode_and_augment(encoded, check_cfg), tf.int64)),
            lambda: tf.constant(0, tf.int64),
        )
        return ok, reason, pixels

    check = tf.function(check_one)
    deadline = time.monotonic() + budget_secs
    for path in files:
        n = 0
        try:
            for record in tf.data.TFRecordDataset(path):
                try:
                    ok, reason, _ = check(record)
                except tf.errors.OpError as e:
                    return f"{path} record {n}: {_first_line(e)}"
                if not bool(ok):
                    return f"{path} record {n}: {reason.numpy().decode().rstrip('; ')}"
                if time.monotonic() > deadline:
                    return None
                n += 1
        except tf.errors.OpError as e:  # raised by the reader: CRC mismatch, truncation
            return f"{path} record {n}: {_first_line(e)}"
    return None


def _first_line(error: tf.errors.OpError) -> str:
    text = (error.message or type(error).__name__).strip().splitlines()[0]
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", text)
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", text)


class data_errors:
    """Turn a data error raised inside fit/evaluate into a DataError naming the bad file."""

    def __init__(self, files: list[str], pipeline_cfg: data.PipelineConfig) -> None:
        self.files, self.cfg = files, pipeline_cfg

    def __enter__(self) -> data_errors:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None or not isinstance(exc, (tf.errors.InvalidArgumentError, tf.errors.DataLossError)):
            return False
        text = str(getattr(exc, "message", exc))
        if not (
            is_bad_record(exc)
            or isinstance(exc, tf.errors.DataLossError)
            or "Iterator" in text
            or "Dataset" in text
        ):
            return False
        # The hot path says only that a record failed; a scan names the file, the record and why.
        log("a record could not be read, parsed or decoded; scanning the input files to name it")
        found = find_corrupt_record(self.files, self.cfg)
        found = f"corrupt record in {found}" if found else None
        if found is None:
            return False
        raise DataError(f"{found} (pass --skip-corrupt to count and skip such records)") from None
