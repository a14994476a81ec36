"""package: build and push the training image once per content hash (docs/contract.md section 2)."""

from __future__ import annotations

from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt, SpecOptions, SpecPath


@common.with_option_groups
def package(
    spec: SpecPath,
    opts: SpecOptions,
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
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.package(job_spec, builder=builder, dry_run=dry_run, log=common.stderr_line, settings=cfg)
    if output is OutputFormat.json:
        common.emit_json(result.to_json())
        return
    if dry_run and result.plan is not None:
        print("\n".join(result.plan.describe()))
    print(result.summary())


def register(app: typer.Typer) -> None:
    app.command()(package)
