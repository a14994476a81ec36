"""Datasets in the Python API (docs/data.md): class-per-folder images -> the trainer's TFRecords,
on Apache Beam here (DirectRunner) or on Dataflow. The CLI's `data convert` calls this.

    from vertex_trainer.api.data import Conversion, Runner, convert_data
    result = convert_data(Conversion("images/", "data/flowers"), Runner("direct"))
    result.manifest["splits"]["train"]["examples"]

`Conversion` (what to convert) and `Runner` (where) are vertex_trainer.dataprep's records; they
load with their first use, so importing the API does not load the launcher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vertex_trainer.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.dataprep.launch import Conversion, Result, Runner

__all__ = ["Conversion", "Result", "Runner", "convert_data"]
_RECORDS = ("Conversion", "Result", "Runner")


def __getattr__(name: str) -> Any:
    if name not in _RECORDS:
        raise AttributeError(f"module 'vertex_trainer.api.data' has no attribute {name!r}")
    from vertex_trainer.dataprep import launch

    return getattr(launch, name)


def convert_data(
    conversion: Conversion,
    runner: Runner,
    *,
    settings: Settings | None = None,
    log: Callable[[str], None] | None = None,
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
    from vertex_trainer.api.core import _stderr, settings_from_env
    from vertex_trainer.dataprep import convert

    return convert(conversion, runner, settings=settings or settings_from_env(), log=log or _stderr)
