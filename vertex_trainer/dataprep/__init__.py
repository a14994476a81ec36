"""Class-per-folder images -> the trainer's TFRecords, on Apache Beam (DirectRunner or Dataflow).

    from vertex_trainer.dataprep import Conversion, Runner, convert
    result = convert(Conversion("images/", "data/"), Runner("direct"), settings=settings)

Worker modules (run on Dataflow; standard library, apache_beam, Pillow, google-crc32c only):
`records` (Example protobuf + TFRecord framing), `images` (check/resize one image), `pipeline`
(the Beam graph). Launcher modules: `request` (Conversion, Runner, Result and their checks),
`launch` (listing, runners, summary), `staging` (the wheel the workers install). `synth` gives
`data synth` the same records without TensorFlow (its encoder and shard writer). This file
stays import-free so a worker can import the package; the launcher's names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["DEFAULT_MARKER", "Conversion", "Result", "Runner", "convert", "dry_run_text", "summary_text"]

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.dataprep.launch import (
        DEFAULT_MARKER,
        Conversion,
        Result,
        Runner,
        convert,
        dry_run_text,
        summary_text,
    )


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'vertex_trainer.dataprep' has no attribute {name!r}")
    return getattr(importlib.import_module("vertex_trainer.dataprep.launch"), name)
