"""trigger render | deploy: start a run when a dataset lands in Cloud Storage (docs/contract.md section 6)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, SpecOptions, SpecPath

app = typer.Typer(
    help="Start a run when a dataset lands in Cloud Storage: a Cloud Run function on the "
    "bucket's object-finalized events (Eventarc).",
    no_args_is_help=True,
)
BucketOpt = Annotated[
    str,
    typer.Option(
        "--bucket", help="the bucket whose uploads start runs (a name, no gs://)", show_default=False
    ),
]
PrefixOpt = Annotated[
    str, typer.Option("--prefix", help="only objects under this name prefix, e.g. datasets/")
]
MarkerOpt = Annotated[
    str,
    typer.Option(
        "--marker", help="the object that says a folder is complete: <prefix><folder>/<marker> starts a run"
    ),
]
LocationOpt = Annotated[
    str | None,
    typer.Option(
        "--trigger-location",
        help="the bucket's location (the Eventarc trigger must be there); "
        "default: looked up by deploy, the spec's region for render",
    ),
]
FunctionOpt = Annotated[
    str | None, typer.Option("--function", help="function name (default: vt-<spec name>)")
]
RuntimeSaOpt = Annotated[
    str | None,
    typer.Option(
        "--runtime-service-account", help="the function's identity (default: vt-run-...@PROJECT, created)"
    ),
]
MaxRunsOpt = Annotated[
    int,
    typer.Option(
        "--max-runs-per-folder",
        help="at most this many runs of one folder in --folder-window: a re-upload of its marker "
        "beyond it is acknowledged and starts nothing (1-1000)",
    ),
]
WindowOpt = Annotated[
    str,
    typer.Option("--folder-window", help="the window --max-runs-per-folder counts in (1m-30d, e.g. 24h)"),
]
# -o is the function directory here (docs/contract.md section 6), so --output has no short form.
OutputOpt = Annotated[OutputFormat, typer.Option("--output", help="text for people, json for scripts")]
TriggerSaOpt = Annotated[
    str | None,
    typer.Option(
        "--trigger-service-account",
        help="the trigger's identity, the only caller of the function (default: vt-evt-...@PROJECT, created)",
    ),
]


@dataclass(frozen=True)
class FunctionOptions:
    """The function's own options, render's and deploy's alike."""

    trigger_location: LocationOpt = None
    function: FunctionOpt = None
    runtime_service_account: RuntimeSaOpt = None
    trigger_service_account: TriggerSaOpt = None
    max_runs_per_folder: MaxRunsOpt = 3
    folder_window: WindowOpt = "24h"


def _options(prefix: str, marker: str, opts: SpecOptions, fn: FunctionOptions) -> dict[str, Any]:
    """The keyword arguments of api.trigger_render and api.trigger_deploy."""
    return {
        "sets": tuple(opts.set_ or ()),
        "vars": dict(api.parse_assignments(opts.var, "--var")),
        "project": opts.project,
        "region": opts.region,
        "prefix": prefix,
        "marker": marker,
        **asdict(fn),
    }


@app.command()
@common.with_option_groups
def render(
    spec: SpecPath,
    bucket: BucketOpt,
    out: Annotated[
        Path, typer.Option("-o", "--out", help="the function directory to write", show_default=False)
    ],
    prefix: PrefixOpt = "",
    marker: MarkerOpt = "_SUCCESS",
    *,
    opts: SpecOptions,
    fn: FunctionOptions,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Write a deployable Cloud Run function that starts the spec's run for each completed folder."""
    result = api.trigger_render(
        spec,
        out,
        bucket=bucket,
        settings=common.settings(),
        log=common.stderr_line,
        **_options(prefix, marker, opts, fn),
    )
    if output is OutputFormat.json:
        return common.emit_json(result)
    what = "a PipelineJob (train, register, deploy)" if result["pipeline"] else "a CustomJob"
    print(
        f"wrote    {result['directory']} ({len(result['files'])} files)\n"
        f"fires on gs://{bucket}/{prefix}<folder>/{marker}: {what}, at most "
        f"{result['max_runs_per_folder']} per folder in {result['folder_window']}\n"
        f"image    {result['image']}\n"
        f"deploy   vertex-trainer trigger deploy {spec} --bucket {bucket} ... "
        f"(or {Path(result['directory']) / 'deploy.sh'})"
    )


@app.command()
@common.with_option_groups
def deploy(
    spec: SpecPath,
    bucket: BucketOpt,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--out", help="render the function here (default: a new temporary directory)"),
    ] = None,
    prefix: PrefixOpt = "",
    marker: MarkerOpt = "_SUCCESS",
    *,
    opts: SpecOptions,
    fn: FunctionOptions,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the gcloud commands; write, build and run nothing")
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Deploy the function, its Eventarc trigger and the IAM bindings they need (with gcloud)."""
    result = api.trigger_deploy(
        spec,
        bucket=bucket,
        out_dir=out,
        dry_run=dry_run,
        settings=common.settings(),
        log=common.stderr_line,
        **_options(prefix, marker, opts, fn),
    )
    if output is OutputFormat.json:
        return common.emit_json(result)
    if dry_run:
        print(result["script"], end="")
        return
    print(
        f"deployed {result['function']} (source {result['directory']}): uploads of "
        f"gs://{bucket}/{prefix}<folder>/{marker} now start runs"
    )
