"""profile and tensorboard: where a run's step time goes (its profiler trace, read by xprof), and
TensorBoard on 127.0.0.1 over its logs. A run is named as `report` and `logs` take it: a local
run's folder or name, or a Vertex AI (or sandbox) job by resource name or id; the logic is
performance/step_profile.py and performance/tensorboard_server.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.local import layout
from vertex_trainer.performance import step_profile as profiles
from vertex_trainer.performance import tensorboard_server as boards
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import Job

__all__ = ["profile", "tensorboard"]


def _folder(target: Any, *, project: str | None, region: str | None, settings: Settings) -> str:
    """The folder a run's outputs are in: a local path, or a job's gs:// base output directory."""
    local = getattr(target, "output_dir", None) if not isinstance(target, str) else None
    if isinstance(local, str):
        return local
    if isinstance(target, str):
        if target.startswith("gs://"):
            return target.rstrip("/")
        found = layout.find_run(target) if not target.startswith("projects/") else None
        if found is not None:
            return str(found.run_dir)
        if os.path.isdir(target):
            return target
        if os.sep in target and not target.startswith("projects/"):
            why = "a file, not a folder" if os.path.exists(target) else "no such directory"
            raise UserError(
                f"{target} holds no run ({why})",
                hint="give the output directory of `submit --local` (or its name), or a Vertex AI job",
            )
    # a job's data loads the spec's models: profile and tensorboard of a local run load none
    from vertex_trainer.reporting import cloud_data as report_cloud

    name = target if isinstance(target, str) else str(getattr(target, "name", ""))
    job = (
        target
        if hasattr(target, "data")
        else Job.get(name, project=project, region=region, settings=settings)
    )
    base = report_cloud.base_output(job.data)
    if not base:
        raise UserError(
            f"job {name} has no base output directory, so no TensorBoard folder to read",
            hint="give the job an output_dir (its baseOutputDirectory)",
        )
    return base


def profile(
    target: Any,
    *,
    project: str | None = None,
    region: str | None = None,
    settings: Settings | None = None,
) -> profiles.Profile:
    """Where the step time of a run's newest profiler trace goes (`vertex-trainer profile`).

    Args:
        target: a local run's folder or name, any folder holding a trace, a gs:// folder, a
            CustomJob (resource name, or id with project and region; a sandbox job too), or a
            handle `submit` returned.
        project: the project of a job id (default: the settings').
        region: the region of a job id (default: the settings').
        settings: the process settings (default: read from the environment).
    Returns:
        the performance.step_profile.Profile: the session read, the breakdown of the profiled steps
        (device busy, idle between steps, input, host-to-device, ...), the top ops by self time
        and the verdict. Raises UserError (exit 2) without a trace, saying how to make one.
    """
    settings = settings or settings_from_env()
    folder = _folder(target, project=project, region=region, settings=settings)
    gcs = folder.startswith("gs://")
    trace = profiles.find_gcs(settings, folder) if gcs else profiles.find_local(folder)
    source = target if isinstance(target, str) else folder
    config = profiles.run_config(folder, settings)
    return profiles.read(trace, source=source, settings=settings, config=config)


def tensorboard(
    target: Any,
    *,
    port: int | None = None,
    project: str | None = None,
    region: str | None = None,
    settings: Settings | None = None,
) -> boards.Board:
    """Start TensorBoard on 127.0.0.1 over a run's logs (`vertex-trainer tensorboard`).

    Args:
        target: as for `profile`: a local run (its logs/ folder is served), a gs:// folder, a
            Vertex AI job (its <base>/logs on gs://, read by TensorBoard), or a sandbox job (its
            logs copied out of the sandbox's storage emulator into a scratch folder).
        port: the port (0: one the system picks; None: 6006 or the next free one).
        project: the project of a job id (default: the settings').
        region: the region of a job id (default: the settings').
        settings: the process settings (default: read from the environment).
    Returns:
        the performance.tensorboard_server.Board, serving: its `url`; `stop()` ends it (it is a context
        manager too).
    """
    settings = settings or settings_from_env()
    folder = _folder(target, project=project, region=region, settings=settings)
    environ = dict(settings.environ) or None
    if not folder.startswith("gs://"):
        if not os.path.isdir(folder):
            raise UserError(f"tensorboard: {folder} is not a folder")
        return boards.start(boards.local_logdir(folder), port=port, environ=environ)
    logs = f"{folder}/logs"
    if not settings.storage_emulator:  # Cloud Storage: TensorBoard reads it itself
        return boards.start(
            logs if storage.holds_objects(settings, logs) else folder, port=port, environ=environ
        )
    scratch = boards.scratch_dir()
    try:
        if not boards.copy_prefix(settings, logs, Path(scratch)):
            raise UserError(
                f"tensorboard: no TensorBoard logs under {logs}",
                hint="the bundled trainer writes them there as it trains; a script of yours: "
                "write them to $AIP_TENSORBOARD_LOG_DIR",
            )
        return boards.start(scratch, port=port, environ=environ, scratch=scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
