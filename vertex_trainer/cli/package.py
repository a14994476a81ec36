"""package: build and push the training image once per content hash (docs/contract.md section 2)."""

from __future__ import annotations

from typing import Annotated

import typer

from vertex_trainer.cli.common import (
    OutputFormat,
    OutputOpt,
    ProjectOpt,
    RegionOpt,
    SetOpt,
    SpecPath,
    VarOpt,
    emit_json,
    load,
    settings,
    stderr_line,
)


def package(
    spec: SpecPath,
    set_: SetOpt = None,
    var: VarOpt = None,
    project: ProjectOpt = None,
    region: RegionOpt = None,
    builder: Annotated[
        str | None,
        typer.Option(
            "--builder",
            metavar="docker|cloud-build",
            help="how to build (default: image.builder, else cloud-build)",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="print the plan (files, size, hash, tag, builder; what was left out of your folders "
            "and why); touch nothing",
        ),
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Build and push the training image (once per content hash), or stage the Python package."""
    from vertex_trainer import api

    cfg = settings()
    job_spec = load(spec, set_, var, project, region, cfg)
    result = api.package(job_spec, builder=builder, dry_run=dry_run, log=stderr_line, settings=cfg)
    if output is OutputFormat.json:
        emit_json(result.to_json())
        return
    if dry_run and result.plan is not None:
        print("\n".join(result.plan.describe()))
    print(result.summary())


def register(app: typer.Typer) -> None:
    app.command()(package)
