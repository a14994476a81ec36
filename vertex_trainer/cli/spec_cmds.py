"""validate, render, hardware, schema: commands about a spec; none sends anything."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.present.hardware import HEADER, provenance_lines, region_lines, table_rows


class RenderFormat(str, Enum):
    json = "json"
    yaml = "yaml"
    gcloud = "gcloud"
    spec = "spec"


@common.with_option_groups
def validate(
    spec: SpecPath,
    opts: SpecOptions,
    check_quota: Annotated[
        bool,
        typer.Option(
            "--check-quota",
            help="also read the project's quota for the accelerator in the region "
            "(Cloud Quotas API): exit 2 when it is clearly too small",
        ),
    ] = False,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="check for `submit --local` (local paths, no project or image needed; "
            "the data must exist) instead of a cloud submit",
        ),
    ] = False,
) -> None:
    """Check a job spec (fields, hardware, scheduling) for a cloud submit, or with --local for a
    run here, without sending anything (--check-quota: one read-only look at the project's quota).
    It answers from the plan `submit --dry-run` (or `submit --local`) makes: the same problems, the
    same warnings, the same budget."""
    # present.plan loads the spec's pydantic models: not for hardware, schema or --help
    from vertex_trainer.present.plan import quota_lines, validate_text

    cfg = common.settings()
    job = opts.load(spec, cfg)
    plan = api.plan_submit(job, local=local, settings=cfg)  # submit's own checks and budget (exit 2)
    for warning in plan.warnings:  # the warnings a cloud submit prints before it sends (nothing stops)
        common.stderr_line(warning)
    quota = quota_lines(api.look_at_quota(job, settings=cfg)) if check_quota else []  # exit 2 when short
    print(validate_text(plan, spec, quota))


@common.with_option_groups
def render(
    spec: SpecPath,
    opts: SpecOptions,
    format: Annotated[
        RenderFormat,
        typer.Option(
            "--format",
            "-f",
            help="json: the REST body; yaml; "
            "gcloud: a --config file for gcloud ai custom-jobs create; spec: the resolved spec",
        ),
    ] = RenderFormat.json,
    idempotency_key: Annotated[
        str | None,
        typer.Option("--idempotency-key", help="include the vertex-trainer-key label submit would add"),
    ] = None,
) -> None:
    """Print the CustomJob (with tune:, the HyperparameterTuningJob) that submit would send."""
    job_spec = opts.load(spec, common.settings())
    if format is RenderFormat.spec:
        sys.stdout.write(job_spec.to_yaml())
        return
    sys.stdout.write(api.render_text(job_spec, format.value, idempotency_key=idempotency_key))


def hardware(
    output: OutputOpt = OutputFormat.text,
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            metavar="REGION",
            help="only what Vertex AI training offers in REGION "
            "(the Vertex AI docs' table, with the date it was read)",
        ),
    ] = None,
) -> None:
    """List the hardware presets (machine, accelerators, memory, Flex Start, default precision),
    the regions that offer each accelerator for training, and where each row was read."""
    cat = api.hardware_catalog(region)
    if output is OutputFormat.json:
        common.emit_json(cat.rows)
        return
    for header_line in region_lines(cat):
        print(header_line)
    lines = [HEADER, *table_rows(cat)]
    # rich (~50 modules) only for hardware's table on a terminal
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # piped: full values in aligned columns, never cut to a width
        widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
        for line in lines:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        print("\n".join(provenance_lines(cat)))
        return
    # rich (~50 modules) only for hardware's table on a terminal
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in HEADER:
        table.add_column(col)
    for line in lines[1:]:
        table.add_row(*line)
    console.print(table)
    print("\n".join(provenance_lines(cat)))


def schema() -> None:
    """Print the JSON Schema of the job spec (for editor completion)."""
    common.emit_json(api.spec_schema())


def register(app: typer.Typer) -> None:
    app.command()(validate)
    app.command()(render)
    app.command()(hardware)
    app.command()(schema)
