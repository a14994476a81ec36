"""shell JOB: the URI of a replica's interactive shell (enable_web_access, docs/contract.md section 11)."""

from __future__ import annotations

from typing import Annotated

import typer

from vertex_trainer.cli.common import (
    JobProjectOpt,
    JobRegionOpt,
    OutputFormat,
    OutputOpt,
    emit_json,
    settings,
    where,
)


def shell(
    job: Annotated[
        str,
        typer.Argument(
            help="a job: projects/P/locations/R/customJobs/ID, or an ID with --project/--region",
            show_default=False,
        ),
    ],
    replica: Annotated[
        str,
        typer.Option(
            "--replica", help="the node: workerpool0-0 is the chief, workerpool1-0 the first worker"
        ),
    ] = "workerpool0-0",
    project: JobProjectOpt = None,
    region: JobRegionOpt = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Wait until the job runs, then print the replica's interactive shell URI (open it in a browser)."""
    from vertex_trainer import api

    cfg = settings()
    uri = api.web_access(job, replica, **where(cfg, project, region), settings=cfg)
    if output is OutputFormat.json:
        return emit_json({"replica": replica, "uri": uri})
    print(uri)


def register(app: typer.Typer) -> None:
    app.command()(shell)
