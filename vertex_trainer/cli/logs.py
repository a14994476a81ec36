"""logs: a job's log lines (docs/contract.md section 7). What `submit/status --wait` show while they
follow a job is vertex_trainer.present.logs.FollowView (re-exported here for cli/jobs)."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import typer

from vertex_trainer.cli.common import (
    JobProjectOpt,
    JobRegionOpt,
    OutputFormat,
    OutputOpt,
    settings,
    stderr_line,
    where,
)
from vertex_trainer.contract import Failure, JobEvent, LogEntry
from vertex_trainer.errors import JobFailed
from vertex_trainer.present.logs import FollowView as FollowView  # cli/jobs imports it from here
from vertex_trainer.present.logs import entry_lines, event_line

LogJobArg = Annotated[
    str,
    typer.Argument(
        help="a Vertex AI job (projects/P/locations/R/customJobs/ID, or an ID with --project and "
        "--region), or a local run (its output directory, or its name)",
        show_default=False,
    ),
]


def logs(
    job: LogJobArg,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="keep reading until the job has ended; exit 1 unless it SUCCEEDED"
        ),
    ] = False,
    replica: Annotated[
        str | None,
        typer.Option(
            "--replica",
            metavar="NAME",
            help="one replica's lines, e.g. workerpool0-0 (one the job has: exit 2 naming them otherwise)",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="entries from this long ago (30m, 4h, 2d) or since this time (2026-11-29T18:00:00Z)",
        ),
    ] = None,
    output: OutputOpt = OutputFormat.text,
    project: JobProjectOpt = None,
    region: JobRegionOpt = None,
) -> None:
    """Show a job's log lines in time order, each once: a Vertex AI job's (Cloud Logging) or a
    local run's."""
    from vertex_trainer import api

    cfg = settings()
    _check_reference(job)
    # (A Vertex AI job is looked up first: one that does not exist, or a --replica it does not
    # have, is exit 2 here, as `status` answers, never an empty log.)
    items = api.logs(
        job,
        follow=follow,
        replica=replica,
        since=since,
        settings=cfg,
        log=stderr_line,
        **where(cfg, project, region),
    )
    if follow and cfg.offline and not cfg.logging_endpoint and not api.find_local_run(job):
        stderr_line(
            "note: Vertex AI is an emulator and Cloud Logging is not "
            "($VERTEX_TRAINER_LOGGING_ENDPOINT): following the job's state only"
        )
    last: Any = None  # the followed Job: its failure_message (JobEvent needs only a JobState)
    failure: Failure | None = None
    try:
        for item in items:
            if isinstance(item, LogEntry):
                _write(item, output)
            elif isinstance(item, JobEvent):
                last = item.job
                if item.changed:
                    stderr_line(event_line(item))
            elif isinstance(item, Failure):
                failure = item
    except BrokenPipeError:  # `logs JOB | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    if follow and last is not None and not last.succeeded:
        raise JobFailed(
            failure.message if failure else last.failure_message(), hint=failure.advice if failure else None
        )


def _check_reference(job: str) -> None:
    """Exit 2 for what is neither a job (a resource name or a numeric id) nor a local run (its
    output directory or its name): the one message says both readings."""
    import re

    from vertex_trainer import api
    from vertex_trainer.errors import UserError

    text = job.strip()
    job_name = re.fullmatch(r"[0-9]+|projects/[^/]+/locations/[^/]+/[A-Za-z]+/[^/]+", text)
    if job_name or api.find_local_run(text):
        return
    if os.path.isdir(text):
        what = f"{job!r} is a directory, but no local run wrote to it (no record of a run beside or in it)"
    elif os.path.exists(text):
        what = f"{job!r} is a file, neither a job nor a local run's output directory"
    else:
        what = f"{job!r} is neither a job nor a local run's directory (no such file or directory)"
    raise UserError(
        what,
        hint="pass a Vertex AI job (projects/P/locations/R/customJobs/ID, or its "
        "numeric id with --project and --region), a local run's folder, or its spec's "
        "output_dir for the newest run (e.g. runs/quickstart), or the spec's name",
    )


def _write(entry: LogEntry, output: OutputFormat) -> None:
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(entry.to_dict()) + "\n")
    else:
        sys.stdout.writelines(f"{line}\n" for line in entry_lines(entry))
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command()(logs)
