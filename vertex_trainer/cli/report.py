"""report: a run's whole story as one self-contained HTML page (docs/report.md)."""

from __future__ import annotations

import webbrowser
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace


class ReportFormat(str, Enum):
    html = "html"
    png = "png"


@common.with_option_groups
def report(
    target: Annotated[
        str,
        typer.Argument(
            metavar="JOB_OR_RUN_DIR",
            help="a local run's output directory (or its name), or a Vertex AI job (resource name, or id)",
        ),
    ],
    out: Annotated[
        str | None,
        typer.Option(
            "--out", "-o", metavar="FILE", help="the file to write (default: report-<name>.<format>)"
        ),
    ] = None,
    fmt: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="html: one page that opens offline; png: the plots as one image "
            "(default: -o's suffix, .html or .png; else html)",
        ),
    ] = None,
    open_: Annotated[bool, typer.Option("--open", help="open the file in the default browser")] = False,
    *,
    place: JobPlace,
) -> None:
    """Write a run's report: curves, throughput, input wait, time split, attempts, cost, trials."""
    cfg = common.settings()
    path = api.report(target, out, fmt=fmt.value if fmt else None, **place.where(cfg), settings=cfg)
    print(path)
    if open_:
        if not webbrowser.open(Path(path).resolve().as_uri()):
            common.stderr_line(f"no browser to open here: open {path} yourself")


def register(app: typer.Typer) -> None:
    app.command()(report)
