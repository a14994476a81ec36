"""resources create/list/delete: Vertex AI persistent resources (docs/contract.md section 11)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from vertex_trainer.cli.common import (
    JobProjectOpt,
    JobRegionOpt,
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
    where,
)

app = typer.Typer(
    help="Persistent resources: machines held for training jobs (persistent_resource: ID).",
    no_args_is_help=True,
)


@app.command("create")
def create(
    spec: SpecPath,
    set_: SetOpt = None,
    var: VarOpt = None,
    project: ProjectOpt = None,
    region: RegionOpt = None,
    resource_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            metavar="ID",
            help="the resource's id (default: persistent_resource, else the "
            "spec's name); a second create with the id adopts it",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the request; send nothing")] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Create a persistent resource from the spec's hardware (idempotent by id); waits until it runs."""
    from vertex_trainer import api

    cfg = settings()
    job_spec = load(spec, set_, var, project, region, cfg)
    result = api.create_resource(job_spec, resource_id, dry_run=dry_run, settings=cfg, log=stderr_line)
    if output is OutputFormat.json:
        return emit_json(result)
    if dry_run:
        print("# dry run: nothing was sent. resources create would:")
        print(f"POST {result['url']}?persistentResourceId={result['params']['persistentResourceId']}")
        print(json.dumps(result["body"], indent=2))
        return
    verb = "adopted" if result["adopted"] else "created"
    print(f"{verb:8} {result['name']}\nstate    {result['state']}")


@app.command("list")
def list_(
    project: JobProjectOpt = None, region: JobRegionOpt = None, output: OutputOpt = OutputFormat.text
) -> None:
    """List the persistent resources of a project and region."""
    from vertex_trainer import api
    from vertex_trainer.capacity.resources_text import resources_text

    cfg = settings()
    place = where(cfg, project, region, need=True)
    found = api.list_resources(place["project"], place["region"], settings=cfg)
    if output is OutputFormat.json:
        return emit_json({"resources": found})
    print(resources_text(found, place["project"], place["region"]))


@app.command("delete")
def delete(
    resource: Annotated[str, typer.Argument(help="the id (with --project/--region) or full name")],
    project: JobProjectOpt = None,
    region: JobRegionOpt = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Delete a persistent resource (its machines are released); waits until it is gone."""
    from vertex_trainer import api

    cfg = settings()
    place = where(cfg, project, region, need=not resource.startswith("projects/"))
    deleted = api.delete_resource(resource, **place, settings=cfg)
    if output is OutputFormat.json:
        return emit_json({"resource": resource, "deleted": deleted})
    print(
        f"deleted  {resource}" if deleted else f"no such persistent resource: {resource} (nothing to delete)"
    )


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="resources")
