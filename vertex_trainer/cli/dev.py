"""dev: local stand-ins for Google Cloud services (tests and offline runs)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.errors import UserError

app = typer.Typer(
    help="Local stand-ins for Google Cloud services (for tests and offline runs).", no_args_is_help=True
)

# The options of the commands that serve one fake (each its own default port).
Port = Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")]
Host = Annotated[
    str, typer.Option("--host", help="loopback address to listen on (127.0.0.1, ::1 or localhost)")
]


def _loopback(host: str) -> str:
    """`--host` as given when it is this machine's loopback; else exit 2: a stand-in takes any
    request it is sent (docs/security-notes/listening.md), so it never listens beyond loopback."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UserError(
            f"--host {host}: a stand-in listens on this machine's loopback only (it runs what it "
            "is sent, without credentials)",
            hint="use --host 127.0.0.1 (the default) or ::1",
        )
    return host


@app.command("fake-vertex")
def dev_fake_vertex(port: Port = 8765, host: Host = "127.0.0.1") -> None:
    """Run a fake Vertex AI JobService (REST) for offline submit/status/cancel/list."""
    # each stand-in loads an HTTP server (http.server, ssl: ~50 modules): only the one started
    from vertex_trainer.emulators.vertex import serve

    serve(_loopback(host), port)


@app.command("fake-logging")
def dev_fake_logging(port: Port = 8766, host: Host = "127.0.0.1") -> None:
    """Run a fake Cloud Logging (entries:list, entries:write) for offline `logs` and `--wait`."""
    # each stand-in loads an HTTP server (http.server, ssl: ~50 modules): only the one started
    from vertex_trainer.emulators.logging import serve

    serve(_loopback(host), port)


@app.command("gcs-emulator")
def dev_gcs_emulator(
    port: Annotated[int, typer.Option("--port", help="emulator port (STORAGE_EMULATOR_HOST)")] = 9023,
    proxy_port: Annotated[
        int, typer.Option("--proxy-port", help="TLS proxy port for TensorFlow's gs://")
    ] = 9024,
    bucket: Annotated[
        list[str] | None,
        typer.Option("--bucket", help="create this bucket at start (repeatable)", show_default=False),
    ] = None,
) -> None:
    """Run a Cloud Storage emulator on 127.0.0.1 (in memory) and print the variables to export.

    With them exported, `submit --local`, `data synth` and TensorFlow read and write gs:// paths
    in the emulator (TF through a TLS proxy with a throwaway CA). Ctrl-C stops it; data is lost.
    """
    # the GCS emulator's server and lazy's importlib.metadata (~50 modules): only this command's
    from vertex_trainer import lazy
    from vertex_trainer.emulators.gcs import serve_forever

    lazy.require("gcp_storage_emulator")  # the sandbox extra: its one message, not a traceback

    def show(exports: str) -> None:
        print(exports, flush=True)
        common.stderr_line(
            "# Cloud Storage emulator running: export the lines above in the shell that "
            "runs `submit --local` (or redirect them to a file and source it). Ctrl-C stops it."
        )

    serve_forever(port=port, proxy_port=proxy_port, buckets=tuple(bucket or ()), print_fn=show)


@app.command("sandbox")
def dev_sandbox(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="run this command (after --) with the sandbox's environment, then stop; exit with its code",
            show_default=False,
        ),
    ] = None,
    bucket: Annotated[
        list[str] | None,
        typer.Option("--bucket", help="create this bucket at start (repeatable)", show_default=False),
    ] = None,
    env_file: Annotated[
        str | None,
        typer.Option(
            "--env-file",
            help="also write the variables to this file, as NAME=value lines "
            "(`env $(cat FILE) vertex-trainer ...`); removed on stop",
        ),
    ] = None,
    project: Annotated[
        str, typer.Option("--project", help="the sandbox's project (GOOGLE_CLOUD_PROJECT)")
    ] = "sandbox",
    region: Annotated[str, typer.Option("--region", help="the sandbox's default region")] = "us-central1",
    quiet: Annotated[
        bool, typer.Option("--quiet", help="do not echo the jobs' and model servers' lines on stderr")
    ] = False,
    function: Annotated[
        str | None,
        typer.Option(
            "--function",
            help="serve this `trigger render` directory under functions-framework and "
            "deliver a storage event for every object finalized in its bucket",
            show_default=False,
        ),
    ] = None,
    redeliver: Annotated[
        int,
        typer.Option(
            "--redeliver",
            min=1,
            help="with --function: deliver each event this many times "
            "(at-least-once delivery, to show the dedupe)",
        ),
    ] = 1,
    deny: Annotated[
        list[str] | None,
        typer.Option(
            "--deny",
            metavar="PERMISSION",
            help="testIamPermissions answers this permission as not held, until a role carrying "
            "it is granted (repeatable; `vertex-trainer check`)",
            show_default=False,
        ),
    ] = None,
    disable_api: Annotated[
        list[str] | None,
        typer.Option(
            "--disable-api",
            metavar="NAME",
            help="Service Usage answers this API (aiplatform or aiplatform.googleapis.com) as "
            "disabled, and a disabled Vertex AI refuses requests, until it is enabled (repeatable)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Every stand-in in one process, where submitted jobs really train and deployed models answer.

    Vertex AI (jobs, models, endpoints, pipelines, tuning), Cloud Storage (with TensorFlow's
    gs:// route), Cloud Build, the image registry, Cloud Logging and Cloud Quotas, on 127.0.0.1,
    in memory.
    Prints `export NAME=value` lines, then `# ready`, and serves until Ctrl-C or SIGTERM, which
    stop everything it started. Only its user can drive it: every request must carry the
    sandbox's own token (VERTEX_TRAINER_EMULATOR_TOKEN, printed with the rest) as
    `Authorization: Bearer`; gcloud reads it from CLOUDSDK_AUTH_ACCESS_TOKEN_FILE. With a command
    (`dev sandbox --bucket b -- make check`) the variables reach only that command. PipelineJobs
    run their tasks (GCPC's launchers) and tuning jobs their trials; with --function DIR, uploads
    to the function's bucket start runs as on Google Cloud. See docs/sandbox.md.
    """
    # every stand-in and its HTTP server (~80 modules): only for `dev sandbox`
    from vertex_trainer.sandbox import Sandbox, serve

    if function is not None and not (Path(function) / "main.py").is_file():
        raise UserError(
            f"--function {function}: no main.py there",
            hint="write the directory with `vertex-trainer trigger render SPEC --bucket BUCKET -o DIR`",
        )
    sandbox = Sandbox(
        os.environ,
        buckets=tuple(bucket or ()),
        project=project,
        region=region,
        echo=None if quiet else common.stderr_line,
        function=function,
        redeliver=redeliver,
        deny=tuple(deny or ()),
        disable_apis=tuple(disable_api or ()),
    )
    code = serve(sandbox, env_file=env_file, command=tuple(command or ()))
    if code:
        raise typer.Exit(code)


@app.command("refresh-prices")
def dev_refresh_prices(
    out: Annotated[
        str | None,
        typer.Option("--out", help="write the snapshot here (default: the one shipped in the package)"),
    ] = None,
) -> None:
    """Rebuild the price snapshot from the Cloud Billing Catalog API: Vertex AI's SKUs, every
    page, mapped to (machine family or accelerator, region, usage type). An API key
    ($VERTEX_TRAINER_BILLING_API_KEY) or ADC; $VERTEX_TRAINER_BILLING_ENDPOINT picks a stand-in
    (the sandbox has one). See docs/cost.md."""
    done = api.refresh_prices(out, settings=common.settings())
    print(
        f"prices as of {done['as_of']}: {done['skus_used']} of {done['skus_read']} SKUs used "
        f"({done['families']} machine families, {done['accelerators']} accelerators) -> {done['path']}"
    )
