"""resources create/list/delete: Vertex AI persistent resources (docs/contract.md section 11)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt, SpecOptions, SpecPath

app = typer.Typer(
    help="Persistent resources: machines held for training jobs (persistent_resource: ID).",
    no_args_is_help=True,
)


@app.command("create")
@common.with_option_groups
def create(
    spec: SpecPath,
    opts: SpecOptions,
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
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.create_resource(job_spec, resource_id, dry_run=dry_run, settings=cfg, log=common.stderr_line)
    if output is OutputFormat.json:
        return common.emit_json(result)
    if dry_run:
        print("# dry run: nothing was sent. resources create would:")
        print(f"POST {result['url']}?persistentResourceId={result['params']['persistentResourceId']}")
        print(json.dumps(result["body"], indent=2))
        return
    verb = "adopted" if result["adopted"] else "created"
    print(f"{verb:8} {result['name']}\nstate    {result['state']}")
    hourly = result.get("hourly")
    price = f"about {hourly:,.2f} USD/h at list price" if hourly is not None else "its machines' price"
    common.stderr_line(
        f"note: it bills {price} while it exists, whether or not a job runs on it; when done: "
        f"vertex-trainer resources delete {result['name']}"
    )


@app.command("list")
@common.with_option_groups
def list_(place: JobPlace, output: OutputOpt = OutputFormat.text) -> None:
    """List the persistent resources of a project and region, with what each bills per hour."""
    # loads the Vertex AI REST clients (vertex/, gcp/: ~75 modules): not for --help
    from vertex_trainer.capacity.resources_text import resources_text

    cfg = common.settings()
    at = place.where(cfg, need=True)
    found = api.list_resources(at["project"], at["region"], settings=cfg)
    # what each one bills while it exists (a job on it or not): "hourly", None when not priced
    priced = [{**r, "hourly": api.resource_hourly(r)} for r in found]
    if output is OutputFormat.json:
        return common.emit_json({"resources": priced})
    print(resources_text(priced, at["project"], at["region"]))


@app.command("delete")
@common.with_option_groups
def delete(
    resource: Annotated[str, typer.Argument(help="the id (with --project/--region) or full name")],
    place: JobPlace,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Delete a persistent resource (its machines are released); waits until it is gone."""
    cfg = common.settings()
    at = place.where(cfg, need=not resource.startswith("projects/"))
    deleted = api.delete_resource(resource, **at, settings=cfg)
    if output is OutputFormat.json:
        return common.emit_json({"resource": resource, "deleted": deleted})
    print(
        f"deleted  {resource}" if deleted else f"no such persistent resource: {resource} (nothing to delete)"
    )


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="resources")
