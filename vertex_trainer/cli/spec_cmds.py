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


def _price(job) -> str:
    from vertex_trainer import pricing
    from vertex_trainer.workflows import cost

    book = pricing.load_snapshot()
    cost.enforce_budget(job, book)
    return cost.price_line(cost.estimate(job, book)).removeprefix("price: ")


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
    It answers what `submit --dry-run` (or `submit --local`) would: the same problems, the same
    warnings."""
    from vertex_trainer import api
    from vertex_trainer.durations import fmt_duration
    from vertex_trainer.spec.rules import warnings
    from vertex_trainer.workflows import capacity, preflight

    cfg = settings()
    job = load(spec, set_, var, project, region, cfg)
    api.check(job, local=local)  # submit's own checks (exit 2): cloud paths and project, or local data
    if not local:  # the warnings a cloud submit prints before it sends (nothing stops)
        for warning in (*warnings(job), preflight.registry_far(job), capacity.region_warning(job)):
            if warning:
                stderr_line(warning)
        capacity.check_regions(job)  # a fallback attempt where its accelerator is not offered: exit 2
    quota = _quota_lines(job, cfg) if check_quota else []  # exit 2 here when clearly short
    s = job.scheduling
    wait = f", max wait {fmt_duration(s.max_wait)}" if s.max_wait is not None else ""
    if wait and any("max_wait is ignored" in w for w in warnings(job)):
        wait += " (ignored: no flex-start in the plan)"
    preset = f"{job.hardware.preset}: " if job.hardware.preset else ""
    image = (
        "(none: --local only)"
        if job.image is None
        else job.image.uri or job.image.repository or "python package"
    )
    lines = [
        f"OK  {spec}: {job.name}" + (" (for --local)" if local else ""),
        f"  where     {job.project or '(no project yet)'} / {job.region or '(no region yet)'}",
        f"  hardware  {preset}{job.hardware.describe()} x {job.replicas} machine(s) = {job.total_devices} replica(s)",
        f"  schedule  {s.strategy}{wait}"
        + (f", timeout {fmt_duration(s.timeout)}" if s.timeout else "")
        + (f"; then {', then '.join(_fallback_words(job))} if refused" if s.fallback else ""),
        f"  image     {image}",
        f"  trainer   {job.trainer.model} on {job.trainer.train_data}",
    ]
    if (
        not local
    ):  # hourly and worst case per attempt; over scheduling.max_cost: exit 2 (docs/contract.md section 12)
        lines.append(f"  price     {_price(job)}")
    if job.tune is not None:  # hyperparameter tuning (docs/contract.md section 10)
        t = job.tune
        lines.append(
            f"  tune      {t.goal} {t.metric} over {', '.join(t.parameters)}: {t.max_trials} "
            f"trials, {t.parallel_trials} at a time ({t.algorithm} search)"
        )
    print("\n".join(lines + quota))


def _fallback_words(job) -> list[str]:
    """'spot', or 'spot in us-east5 on a100x8' for an attempt that moves (spec/attempts.py)."""
    from vertex_trainer.spec.attempts import attempts

    plan = attempts(job)
    return [
        a.strategy
        + (f" in {a.region}" if a.region != plan[0].region else "")
        + (f" on {a.hardware_name}" if a.hardware != plan[0].hardware else "")
        + (
            f" (reservation {a.reservation})"
            if a.reservation and a.reservation != plan[0].reservation
            else ""
        )
        for a in plan[1:]
    ]


def _quota_lines(job, cfg) -> list[str]:
    """validate --check-quota: a line per strategy of the plan (warnings go to stderr)."""
    from vertex_trainer.workflows import capacity

    if capacity.offline(cfg):
        return [
            "  quota     not checked: Vertex AI is an emulator and VERTEX_TRAINER_QUOTAS_ENDPOINT is not set"
        ]
    if not capacity.accelerator(job):
        return ["  quota     no accelerator: nothing to check"]
    if not job.project or not job.region:
        return ["  quota     not checked: the spec has no project or region yet"]
    checks = capacity.check_quota(job, settings=cfg, log=lambda _: None)  # each shown below
    acc = capacity.accelerator(job)
    return [f"  quota     {c.describe(acc)}" for c in checks] or [
        f"  quota     not checked: no quota metric is known for {acc}"
    ]


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
    from vertex_trainer import render as r

    job_spec = load(spec, set_, var, project, region, settings())
    if format is RenderFormat.spec:
        sys.stdout.write(job_spec.to_yaml())
        return
    job = api.render_job(job_spec, idempotency_key=idempotency_key)
    if job_spec.tune is not None:
        job = r.tuning_job(job_spec, job)  # submit creates this; each trial runs the CustomJob
    if format is RenderFormat.json:
        sys.stdout.write(r.to_json(job))
    elif format is RenderFormat.yaml:
        sys.stdout.write(r.to_yaml(job))
    else:
        sys.stdout.write(r.to_gcloud_config(job_spec, job))


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
            print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
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
