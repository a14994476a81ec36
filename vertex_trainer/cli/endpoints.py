"""endpoints and undeploy: what is deployed (with the hourly price of its nodes), and taking one
deployed model off (docs/contract.md section 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt, SetOpt, VarOpt
from vertex_trainer.settings import Settings

OptionalSpec = Annotated[
    Path | None,
    typer.Argument(
        help="a job spec: its project, region and deploy.endpoint (else --project/--region, all endpoints)",
        show_default=False,
    ),
]
SpecOpt = Annotated[
    Path | None,
    typer.Option("--spec", help="a job spec whose project and region to use", show_default=False),
]


@common.with_option_groups
def endpoints(
    spec: OptionalSpec = None,
    set_: SetOpt = None,
    var: VarOpt = None,
    *,
    place: JobPlace,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            metavar="NAME",
            help="only this endpoint: a display name, an ID or projects/P/locations/R/endpoints/ID "
            "(default with a SPEC: its deploy.endpoint)",
        ),
    ] = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """List endpoints and what is deployed on them: model, version, traffic, machines, hourly price."""
    cfg = common.settings()
    # a resource name holds its own project and region (as undeploy's ENDPOINT does)
    full = (endpoint or "").split("/") if (endpoint or "").startswith("projects/") else None
    at, job_spec = _place(cfg, spec, place, set_, var, need=full is None)
    named = endpoint
    if named is None and job_spec is not None:
        named = (job_spec.deploy.endpoint if job_spec.deploy else None) or job_spec.name
    found = api.list_endpoints(**at, endpoint=named, settings=cfg)
    if output is OutputFormat.json:
        return common.emit_json({"endpoints": [e.to_dict() for e in found]})
    # loads the Vertex AI REST clients (vertex/, gcp/: ~80 modules): not for --help or json
    from vertex_trainer.deployment.endpoints_text import endpoints_text

    project, region = (full[1], full[3]) if full and len(full) > 3 else (at["project"], at["region"])
    print(endpoints_text(found, project, region, named))


@common.with_option_groups
def undeploy(
    endpoint: Annotated[
        str,
        typer.Argument(
            help="the endpoint: projects/P/locations/R/endpoints/ID, or an ID or display name with "
            "--project/--region (or --spec)",
            show_default=False,
        ),
    ],
    deployed_model_id: Annotated[
        str, typer.Argument(help="the deployed model's id (`vertex-trainer endpoints` lists them)")
    ],
    spec: SpecOpt = None,
    *,
    place: JobPlace,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the requests; send nothing")] = False,
    timeout: Annotated[
        int | None, typer.Option("--timeout", min=60, help="seconds to wait for the undeploy (default 1h)")
    ] = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Undeploy one model from an endpoint (its nodes stop billing); its traffic goes to the others.

    Idempotent: one already gone is said so (exit 0). A deployed model that takes traffic goes
    only when the others take some (they get its share in their ratio); the last one leaves the
    endpoint empty, which costs nothing."""
    cfg = common.settings()
    at, _ = _place(cfg, spec, place, need=not endpoint.startswith("projects/"))
    result = api.undeploy(
        endpoint,
        deployed_model_id,
        **at,
        dry_run=dry_run,
        timeout=timeout,
        log=common.stderr_line,
        settings=cfg,
    )
    if output is OutputFormat.json:
        return common.emit_json(result if isinstance(result, dict) else result.to_dict())
    # loads the Vertex AI REST clients (vertex/, gcp/: ~80 modules): not for --help or json
    from vertex_trainer.deployment.endpoints_text import undeploy_dry_run_text, undeployment_text

    print(undeploy_dry_run_text(result) if isinstance(result, dict) else undeployment_text(result))


def _place(
    cfg: Settings,
    spec: Path | None,
    place: JobPlace,
    set_: list[str] | None = None,
    var: list[str] | None = None,
    need: bool = True,
) -> tuple[dict[str, Any], Any]:
    """(project and region, the loaded spec or None): the spec's, --project/--region winning;
    without a spec, the flags or the defaults ($GOOGLE_CLOUD_PROJECT, gcloud's)."""
    if spec is None:
        return place.where(cfg, need=need), None
    job_spec = common.load(spec, set_, var, place.project, place.region, cfg)
    return common.where(cfg, job_spec.project, job_spec.region, need=need), job_spec


def register(app: typer.Typer) -> None:
    app.command()(endpoints)
    app.command()(undeploy)
