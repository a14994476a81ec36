"""report: a run's whole story as one self-contained HTML page, or its plots as one PNG
(docs/report.md). The data is gathered by reporting/run_data.py (a local run's directory) and
reporting/cloud_data.py (a job on Vertex AI or the sandbox), drawn by reporting/page.py."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import settings_from_env
from vertex_trainer.errors import UserError
from vertex_trainer.local import runlog
from vertex_trainer.settings import Settings
from vertex_trainer.suggest import nearest
from vertex_trainer.vertex.custom_jobs import Job  # not api.jobs: api.handles' Job.report calls here

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.reporting.run_data import RunData

# `status`, `list` and `logs` load this module (api.handles' Job.report): the report's own modules
# (reporting.*: a job's data loads the spec's models, the page its plots) load where they are used.

__all__ = ["default_output", "report", "report_data"]


def default_output(target: str, fmt: str = "html") -> str:
    """Where `report TARGET` writes without -o: report-<name>.<fmt> in the working directory.

    Args:
        target: the run directory or job name given.
        fmt: "html" or "png".
    Returns:
        the file name.
    """
    name = os.path.basename(target.rstrip("/")) or "run"
    return f"report-{name}.{fmt}"


def _folders(path: str) -> list[os.DirEntry[str]]:
    """The folders in `path` (none when it cannot be listed), for a "did you mean"."""
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if e.is_dir() and not e.name.startswith(".")][:1000]
    except OSError:
        return []


def report_data(
    target: Any,
    *,
    project: str | None = None,
    region: str | None = None,
    settings: Settings | None = None,
) -> RunData:
    """What the report of `target` shows (reporting.run_data.RunData), read now.

    Args:
        target: a local run's output directory (or the name of a run whose output went to the
            default place), a CustomJob or tuning job (resource name, or an id with project and
            region), or a handle `submit` returned (Job, TuningJob, LocalJob, LocalTuning).
        project: the project of a job id (default: the settings').
        region: the region of a job id (default: the settings').
        settings: the process settings (default: read from the environment).
    Returns:
        the RunData. Raises UserError (exit 2) when `target` names no run or job.
    """
    from vertex_trainer.reporting import cloud_data as report_cloud  # (note at the top)
    from vertex_trainer.reporting import run_data as report_run  # (note at the top)

    settings = settings or settings_from_env()
    local = getattr(target, "output_dir", None) if not isinstance(target, str) else None
    if isinstance(local, str) and not local.startswith("gs://"):
        return report_cloud.run_cost(report_run.from_run_dir(local))
    if isinstance(target, str):
        found = runlog.find_run(target) if not target.startswith("projects/") else None
        if found is not None or os.path.isdir(target):
            return report_cloud.run_cost(report_run.from_run_dir(found or target))
        if os.sep in target and not target.startswith("projects/"):
            raise UserError(
                f"report: {target} holds no run (no such directory)",
                hint="give the output directory of `submit --local` or a Vertex AI job name",
            )
        if not target.startswith("projects/") and not target.isdigit():
            # Neither a folder here nor a job (a job is its resource name or its numeric id): a
            # mistyped run folder, which "is not a job" would not have named.
            near = nearest(target, [e.name for e in _folders(".")], n=1)
            raise UserError(
                f"report: {target} holds no run (no such directory here, and not a job name or id)",
                hint=(f"did you mean {near[0]}? " if near else "")
                + "give the output directory of `submit --local`, or a job as "
                "projects/P/locations/R/customJobs/ID (or its numeric id with --project and --region)",
            )
    name = target if isinstance(target, str) else str(getattr(target, "name", ""))
    if "/hyperparameterTuningJobs/" in name or hasattr(target, "best_trial"):
        return _tuning(target, project=project, region=region, settings=settings)
    job = (
        target
        if hasattr(target, "data")
        else Job.get(name, project=project, region=region, settings=settings)
    )
    spec = getattr(job, "spec", None)
    budget = getattr(getattr(spec, "scheduling", None), "max_cost", None)
    # a handle from submit knows its attempts; a job by name: found by its key (a fallback plan's)
    attempts = getattr(job, "attempts", None) or report_cloud.attempts_of(job.data, settings)
    data = report_cloud.from_custom_job(job.data, settings, attempts=attempts, max_cost=budget)
    use, note = report_cloud.utilization(job.data, settings)  # Cloud Monitoring, when it answers
    notes = data.notes + ((note,) if note else ())
    return data.with_(reference=report_cloud.reference_of(spec), utilization=use, notes=notes)


def _tuning(target: Any, *, project: str | None, region: str | None, settings: Settings) -> RunData:
    from vertex_trainer.reporting import cloud_data as report_cloud  # (note at the top)
    from vertex_trainer.vertex.hptuning import TuningJob  # (note at the top)

    job = (
        target
        if not isinstance(target, str)
        else TuningJob.get(target, project=project, region=region, settings=settings)
    )
    trials = job.trials()
    best = job.best_trial()
    best_run = None
    if best is not None and best.custom_job:
        try:
            inner = Job.get(best.custom_job, settings=settings)
            best_run = report_cloud.from_custom_job(inner.data, settings)
        except Exception:  # the trial's job may be gone: the table and plots still stand
            best_run = None
    return report_cloud.from_tuning_job(
        job.data, [t.to_dict() for t in trials], goal=job.goal, metric_id=job.metric_id, best=best_run
    )


def report(
    target: Any,
    path: str | None = None,
    *,
    fmt: str | None = None,
    project: str | None = None,
    region: str | None = None,
    settings: Settings | None = None,
) -> str:
    """Write the report of a run or job (`vertex-trainer report`).

    Args:
        target: a local run's output directory or name, a job's resource name (or id with
            project and region), or a handle `submit` returned.
        path: the file to write (default: report-<name>.<fmt> in the working directory).
        fmt: "html" (one self-contained page: curves, throughput, input wait, time split,
            attempts, cost, trials, the spec and the exact job) or "png" (the plots as one image);
            default: the suffix of `path` (.html, .htm, .png), else html. A format the suffix
            contradicts (png into report.html) is a UserError (exit 2).
        project: the project of a job id (default: the settings').
        region: the region of a job id (default: the settings').
        settings: the process settings (default: read from the environment).
    Returns:
        the path written.
    """
    from vertex_trainer.reporting import page as report_page  # (note at the top)

    fmt = _format(fmt, path)
    if fmt not in report_page.FORMATS:
        raise UserError(
            f"report: format {fmt!r} is not one of {', '.join(report_page.FORMATS)}",
            hint="--format html (the page) or --format png (the plots as one image)",
        )
    if path:
        report_page.check_out(path)  # before the run is read: a refusal costs nothing
    data = report_data(target, project=project, region=region, settings=settings)
    where = path or default_output(data.name if not isinstance(target, str) else target, fmt)
    return report_page.write(data, where, fmt)


_SUFFIXES = {".html": "html", ".htm": "html", ".png": "png"}
_WHAT = {"html": "an HTML page", "png": "a PNG image"}


def _format(fmt: str | None, path: str | None) -> str:
    """The report's format: `fmt`, else the one `path`'s suffix names, else html; refused when
    `fmt` and the suffix disagree (a PNG in report.html opens as garbage, a page in plots.png not at all)."""
    named = _SUFFIXES.get(os.path.splitext(path or "")[1].lower())
    if fmt is None:
        return named or "html"
    if named and fmt in _WHAT and named != fmt:
        stem = os.path.splitext(path or "")[0]
        raise UserError(
            f"report: --format {fmt} writes {_WHAT[fmt]}, but -o {path} names {_WHAT[named]}",
            hint=f"-o {stem}.{fmt}, or leave --format out: -o's suffix chooses the format",
        )
    return fmt
