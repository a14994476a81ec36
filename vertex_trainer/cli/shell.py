"""shell JOB: the URI of a replica's interactive shell (enable_web_access, docs/contract.md section 11)."""

from __future__ import annotations

from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt


@common.with_option_groups
def shell(
    job: Annotated[str, common.resource_argument("a job", "customJobs")],
    replica: Annotated[
        str,
        typer.Option(
            "--replica", help="the node: workerpool0-0 is the chief, workerpool1-0 the first worker"
        ),
    ] = "workerpool0-0",
    *,
    place: JobPlace,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Wait until the job runs, then print the replica's interactive shell URI (open it in a browser)."""
    cfg = common.settings()
    uri = api.web_access(job, replica, **place.where(cfg), settings=cfg)
    if output is OutputFormat.json:
        return common.emit_json({"replica": replica, "uri": uri})
    print(uri)


def register(app: typer.Typer) -> None:
    app.command()(shell)
