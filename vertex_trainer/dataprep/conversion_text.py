"""`data convert` for people (docs/data.md): what a Dataflow submit would send, and the summary of
a finished conversion from its manifest. The words are dataprep's own (its launcher prints the
same); the CLI reaches them here, not below the API."""

from __future__ import annotations

from typing import Any

from vertex_trainer.dataprep import launch
from vertex_trainer.dataprep.request import Conversion, Runner

__all__ = ["dry_run_text", "summary_text"]


def dry_run_text(conversion: Conversion, runner: Runner) -> str:
    """`data convert --dry-run`: the pipeline options, nothing listed, written or sent."""
    return launch.dry_run_text(conversion, runner)


def summary_text(manifest: dict[str, Any], seconds: float | None = None) -> str:
    """A finished conversion: splits, classes, shards and sizes from its manifest.json."""
    return launch.summary_text(manifest, seconds)
