"""deploy and serve: the trained model behind Vertex AI's prediction contract (docs/contract.md section 5)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.errors import UserError


@common.with_option_groups
def deploy(
    spec: SpecPath,
    opts: SpecOptions,
    job: Annotated[
        str | None,
        typer.Option(
            "--job",
            help="the training job (projects/P/locations/R/customJobs/ID, or an ID) whose "
            "<output_dir>/model is registered",
        ),
    ] = None,
    model_dir: Annotated[
        str | None,
        typer.Option("--model-dir", help="a SavedModel in Cloud Storage (gs://...), instead of --job"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the requests; send nothing")] = False,
    timeout: Annotated[
        int | None,
        typer.Option(
            "--timeout",
            min=60,
            help="seconds to wait for the upload and the deployment (default: deploy.timeout, 1h)",
        ),
    ] = None,
    keep_previous: Annotated[
        bool,
        typer.Option(
            "--keep-previous",
            help="keep the other deployed models on the endpoint (default: once the new version "
            "serves with 100% of the traffic, those left at 0% are undeployed; as "
            "deploy.keep_previous)",
        ),
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Register the model in the Model Registry and deploy it to an Endpoint (once per job).

    Once it serves with all the traffic, the other deployed models left at 0% are undeployed
    (--keep-previous keeps them)."""
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.deploy(
        job_spec,
        job=job,
        model_dir=model_dir,
        dry_run=dry_run,
        timeout=timeout,
        keep_previous=keep_previous,
        log=common.stderr_line,
        settings=cfg,
    )
    show_deployment(result, output)


def show_deployment(result: Any, output: OutputFormat) -> None:
    """A deployment (or a dry run's requests, a dict) as --output asks."""
    if output is OutputFormat.json:
        return common.emit_json(result if isinstance(result, dict) else result.to_dict())
    # loads the Vertex AI REST clients (vertex/, gcp/: ~80 modules): not for `deploy --help` or json
    from vertex_trainer.deployment.deploy_text import billing_note, deployment_text, dry_run_text

    if isinstance(result, dict):
        print(dry_run_text(result))
        return
    print(deployment_text(result))
    common.stderr_line(billing_note(result))


def serve(
    model_dir: Annotated[
        str, typer.Argument(help="the exported model: <output_dir>/model of a run (local path or gs://)")
    ],
    port: Annotated[
        int | None,
        typer.Option(
            "--port", help="port on 127.0.0.1, 0 to 65535 (default: $AIP_HTTP_PORT, else 8080; 0 = any free)"
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
) -> None:
    """Serve an exported model here, behind the same prediction contract as the Vertex endpoint."""
    if port is not None and not 0 <= port <= 65535:
        raise UserError(
            f"--port {port} is not a port number (0 to 65535)", hint="--port 0 picks any free port"
        )

    def ready(url: str, health: str, predict: str) -> None:
        common.stderr_line(f"serving {model_dir} on {url}  (POST {predict}, GET {health}; Ctrl-C stops)")

    api.serve_model(model_dir, host=host, port=port, ready=ready, settings=common.settings())


def register(app: typer.Typer) -> None:
    app.command()(deploy)
    app.command()(serve)
