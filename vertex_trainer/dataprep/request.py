"""What to convert and how (`Conversion`), where it runs (`Runner`), what came of it (`Result`),
and the request's checks: every problem is a UserError (exit 2) before anything is listed or sent.

A launcher module (docs/data.md): the workers never import it; `launch` re-exports its names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vertex_trainer.errors import UserError

DEFAULT_MARKER = "_SUCCESS"  # what the trigger (docs/contract.md section 6) waits for
RUNNERS = ("direct", "dataflow")
# What Beam's own option check accepts (it refuses project names and numbers late, at submit).
_JOB_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PROJECT = re.compile(r"^[a-z][-a-z0-9:.]+[a-z0-9]$")


@dataclass(frozen=True)
class Conversion:
    """What to convert, and how."""

    image_dir: str
    out_dir: str
    shards: int | None = None  # train shards (None: ~target_shard_mb each)
    eval_shards: int | None = None
    eval_fraction: float = 0.0  # share of each class held out as validation
    eval_dir: str | None = None  # or: a second class-per-folder tree for validation
    seed: int = 0
    max_side: int | None = None  # resize + re-encode as JPEG above this side
    jpeg_quality: int = 90
    marker: str = DEFAULT_MARKER
    target_shard_mb: int = 128
    overwrite: bool = False
    read_threads: int = 8


@dataclass(frozen=True)
class Runner:
    """Where the pipeline runs. `direct`: this machine; `dataflow`: Google Cloud Dataflow."""

    name: str = "direct"
    project: str | None = None
    region: str | None = None
    temp_location: str | None = None  # default gs://<OUT_DIR's bucket>/tmp/dataflow
    max_workers: int | None = None
    machine_type: str | None = None
    job_name: str | None = None
    wait: bool = False  # dataflow: follow the job to its end
    direct_workers: int = 1  # direct: worker processes (1: in this process)
    options: tuple[str, ...] = ()  # more Beam pipeline options, verbatim (--key=value)


@dataclass
class Result:
    """A finished conversion (`manifest`), or a submitted Dataflow job (`job_id`, `console_url`)."""

    runner: str
    seconds: float
    manifest: dict[str, Any] | None = None
    job_name: str | None = None
    job_id: str | None = None
    console_url: str | None = None
    warnings: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)  # Beam counters (direct runner)


# -- checks (nothing listed, nothing sent) ----------------------------------------------------
def _strip(path: str) -> str:
    return path.rstrip("/") or path  # "/" stays "/"


def normalize(conv: Conversion) -> Conversion:
    """The request with no trailing "/" on its directories."""
    eval_dir = _strip(conv.eval_dir) if conv.eval_dir else conv.eval_dir
    return replace(conv, image_dir=_strip(conv.image_dir), out_dir=_strip(conv.out_dir), eval_dir=eval_dir)


def _below(path: str, tree: str) -> bool:
    """Is `path` strictly inside the folder `tree` (gs:// by name, local paths as resolved)?"""
    if path.startswith("gs://") or tree.startswith("gs://"):
        return path.startswith(_strip(tree) + "/")
    inner, outer = Path(path).resolve(), Path(tree).resolve()
    return inner != outer and inner.is_relative_to(outer)


def _beside(tree: str) -> str:
    return f"{_strip(tree)}-records" if _strip(tree) != "/" else "data/records"


def check(conv: Conversion, runner: Runner) -> None:
    """Every problem with the request, as a UserError (exit 2), before anything is touched."""
    if runner.name not in RUNNERS:
        raise UserError(f"--runner {runner.name!r}: choose one of {', '.join(RUNNERS)}")
    if conv.eval_dir and conv.eval_fraction:
        raise UserError("--eval-dir and --eval-fraction both choose the validation split: pass one")
    if not 0.0 <= conv.eval_fraction < 1.0:
        raise UserError(f"--eval-fraction {conv.eval_fraction}: must be at least 0 and below 1")
    for flag, value in (
        ("--shards", conv.shards),
        ("--eval-shards", conv.eval_shards),
        ("--max-side", conv.max_side),
        ("--max-workers", runner.max_workers),
    ):
        if value is not None and value < 1:
            raise UserError(f"{flag} {value}: must be at least 1")
    if conv.eval_shards and not (conv.eval_dir or conv.eval_fraction):
        raise UserError("--eval-shards needs a validation split: pass --eval-fraction or --eval-dir")
    if not 1 <= conv.jpeg_quality <= 100:
        raise UserError(f"--jpeg-quality {conv.jpeg_quality}: must be 1..100 (90 is a good default)")
    if (
        not conv.marker
        or "/" in conv.marker
        or conv.marker in (".", "..")
        or conv.marker.startswith(("train-", "validation-"))
    ):
        raise UserError(f"--marker {conv.marker!r}: a plain object name such as _SUCCESS")
    if conv.out_dir.startswith("/gcs/") or conv.image_dir.startswith("/gcs/"):
        raise UserError("use gs:// paths, not /gcs/ (Cloud Storage FUSE exists only on Vertex AI machines)")
    if runner.name == "dataflow":
        for flag, path in (
            ("IMAGE_DIR", conv.image_dir),
            ("OUT_DIR", conv.out_dir),
            ("--eval-dir", conv.eval_dir),
            ("--temp-location", runner.temp_location),
        ):
            if path and not path.startswith("gs://"):
                raise UserError(
                    f"{flag} {path!r}: Dataflow workers read and write Cloud Storage, "
                    "so it must be a gs:// path",
                    hint="copy the images with `gcloud storage "
                    "cp -r DIR gs://BUCKET/...`, or use --runner direct",
                )
        if not runner.project:
            raise UserError("--runner dataflow needs a project: pass --project or set $GOOGLE_CLOUD_PROJECT")
        if not _PROJECT.match(runner.project):
            raise UserError(
                f"--project {runner.project!r}: give the project id (e.g. my-project-123), "
                "not its name or number"
            )
        if not runner.region:
            raise UserError(
                "--runner dataflow needs a region: pass --region (e.g. us-central1), "
                "the region of the image bucket"
            )
        if runner.job_name and not _JOB_NAME.match(runner.job_name):
            raise UserError(
                f"--job-name {runner.job_name!r}: lowercase letters, digits and '-', "
                "starting with a letter, not ending with '-'"
            )
    elif runner.direct_workers < 1:
        raise UserError(f"--workers {runner.direct_workers}: must be at least 1")
    for flag, tree in (("IMAGE_DIR", conv.image_dir), ("--eval-dir", conv.eval_dir)):
        if tree and _below(conv.out_dir, tree):
            # its folder would be taken for a class (and its records for images) by the next convert
            raise UserError(
                f"OUT_DIR {conv.out_dir!r} is inside {flag} {tree!r}: a later convert of {tree} "
                "would take it for one more class folder, and its records for images",
                hint=f"write the dataset beside the images, e.g. {_beside(tree)}",
            )
