"""validate, render, hardware, schema: commands about a spec; none sends anything."""

from __future__ import annotations

import sys
from enum import Enum
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


class RenderFormat(str, Enum):
    json = "json"
    yaml = "yaml"
    gcloud = "gcloud"
    spec = "spec"


def validate(
    spec: SpecPath,
    set_: SetOpt = None,
    var: VarOpt = None,
    project: ProjectOpt = None,
    region: RegionOpt = None,
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
    from vertex_trainer import api
    from vertex_trainer.present.plan import quota_lines, validate_text

    cfg = settings()
    job = load(spec, set_, var, project, region, cfg)
    plan = api.plan_submit(job, local=local, settings=cfg)  # submit's own checks and budget (exit 2)
    for warning in plan.warnings:  # the warnings a cloud submit prints before it sends (nothing stops)
        stderr_line(warning)
    quota = quota_lines(api.look_at_quota(job, settings=cfg)) if check_quota else []  # exit 2 when short
    print(validate_text(plan, spec, quota))


def render(
    spec: SpecPath,
    set_: SetOpt = None,
    var: VarOpt = None,
    project: ProjectOpt = None,
    region: RegionOpt = None,
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
    from vertex_trainer import api

    job_spec = load(spec, set_, var, project, region, settings())
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
    from vertex_trainer import regions
    from vertex_trainer.hardware import catalog_rows

    rows = catalog_rows()
    if region is not None:
        rows = _in_region(rows, region, output)
    for row in rows:  # the regions table (regions.py), dated and cited like the rest
        row["regions"] = regions.provenance(row["accelerator_type"]) if row["accelerator_type"] else None
    if output is OutputFormat.json:
        emit_json(rows)
        return
    header = ("preset", "machine type", "accelerators", "acc. memory", "vCPUs", "flex-start", "precision")
    lines = [header]
    for row in rows:
        acc = f"{row['accelerator_count']} x {row['accelerator_type']}" if row["accelerator_type"] else "-"
        if row["tpu_topology"]:
            acc += f" ({row['tpu_topology']})"
        flex = "yes" if row["flex_start"] else "no"
        if row["spot_or_flex_only"]:
            flex += " (spot/flex only)"
        lines.append(
            (
                row["preset"],
                row["machine_type"],
                acc,
                f"{row['accelerator_memory_gb']} GB" if row["accelerator_memory_gb"] else "-",
                str(row["vcpus"] or "-"),
                flex,
                row["default_precision"],
            )
        )
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # piped: full values in aligned columns, never cut to a width
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        for line in lines:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        print("\n".join(_provenance(rows)))
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in header:
        table.add_column(col)
    for line in lines[1:]:
        table.add_row(*line)
    console.print(table)
    print("\n".join(_provenance(rows)))


def _provenance(rows: list[dict]) -> list[str]:
    """Footer lines: each accelerator's training regions and sources, then the sources' URLs."""
    from vertex_trainer import catalog, hardware

    lines, used = ["", "# accelerator, the regions that offer it for training, and where it was read:"], {}
    for name in dict.fromkeys(r["accelerator_type"] for r in rows if r["accelerator_type"]):
        acc = hardware.accelerator(name)
        where = next(r["regions"] for r in rows if r["accelerator_type"] == name)
        ids, region_ids = acc.source.split(), where["source_ids"] if where else []
        used.update(dict.fromkeys(ids + region_ids))
        place = " ".join(where["regions"]) if where and where["regions"] else "no training region known"
        if where and where["confidence"] != "high":
            place += f" (lower confidence: {where['note']})" if where["note"] else " (lower confidence)"
        unconfirmed = "; not yet on a Vertex AI training page" if acc.training == "unconfirmed" else ""
        lines.append(
            f"#   {name}: {place}{unconfirmed}; sources: {' '.join(ids)}; regions: {' '.join(region_ids)}"
        )
    known = catalog.sources()
    lines += ["# sources:"] + [f"#   {i}  {known[i].url} (read {known[i].read})" for i in used]
    return lines


def _in_region(rows: list[dict], region: str, output: OutputFormat) -> list[dict]:
    """The presets whose accelerator Vertex AI training offers in `region` (CPU ones always)."""
    from vertex_trainer import regions
    from vertex_trainer.errors import UserError
    from vertex_trainer.suggest import nearest

    if not regions.known(region):
        near = nearest(region, regions.REGIONS)
        raise UserError(
            f"--region: {region!r} is not a Vertex AI training region in the table (read {regions.READ})",
            hint=(f"did you mean '{near[0]}'? " if near else "") + "known: " + ", ".join(regions.REGIONS),
        )
    offered = regions.offered_in(region)
    if output is OutputFormat.text:
        uncertain = [a for a in offered if a in regions.UNCERTAIN]
        print(
            f"# {region}: Vertex AI training offers {', '.join(offered) or 'no accelerators (CPU only)'}"
            + (f" ({', '.join(uncertain)}: likely, not in the training table)" if uncertain else "")
        )
        print(f"# source: {regions.SOURCE}, read {regions.READ}")
    return [r for r in rows if not r["accelerator_type"] or r["accelerator_type"] in offered]


def schema() -> None:
    """Print the JSON Schema of the job spec (for editor completion)."""
    from vertex_trainer.spec import json_schema

    emit_json(json_schema())


def register(app: typer.Typer) -> None:
    app.command()(validate)
    app.command()(render)
    app.command()(hardware)
    app.command()(schema)
