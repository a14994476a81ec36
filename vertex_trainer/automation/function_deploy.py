"""`trigger render` and `trigger deploy`: write the function directory, and deploy it with gcloud.

Render opens no connection. Deploy renders (to a given or a new temporary directory), builds the
pinned image when it is missing (the function never builds), looks up the bucket's location
(Eventarc's trigger must be there), then runs the plan of gcloud.py, the same commands deploy.sh
holds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertex_trainer import packaging
from vertex_trainer.automation import function_bundle as bundle
from vertex_trainer.automation import gcloud_commands as gcloud
from vertex_trainer.automation import render_manifest as manifest
from vertex_trainer.automation.function_prepare import Prepared, PrepareOptions, prepare
from vertex_trainer.automation.pipeline_build import pipeline_ir
from vertex_trainer.automation.pipeline_rest import default_root
from vertex_trainer.automation.storage_events import (
    FOLDER_WINDOW,
    MAX_RUNS_PER_FOLDER,
    check_cap,
    check_trigger_args,
)
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import names, storage
from vertex_trainer.log import Log
from vertex_trainer.preflight import buckets_of
from vertex_trainer.settings import Settings

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing.Unpack from Python 3.11)


def plan(
    spec_path: str | Path,
    *,
    bucket: str,
    source: str,
    settings: Settings,
    trigger_location: str | None = None,
    function: str | None = None,
    runtime_service_account: str | None = None,
    trigger_service_account: str | None = None,
    **options: Unpack[PrepareOptions],
) -> tuple[Prepared, gcloud.Deployment]:
    """The prepared spec and the deployment it needs (no connection). Every name is checked
    against Google's grammar here, before anything is written or run (exit 2 naming the flag);
    `options` go on to `prepare` (prefix, marker, --set, --var, project, region, the cap)."""
    check_flags(
        bucket,
        function=function,
        runtime_service_account=runtime_service_account,
        trigger_service_account=trigger_service_account,
        trigger_location=trigger_location,
        **options,
    )
    prepared = prepare(spec_path, bucket=bucket, settings=settings, **options)
    spec = prepared.pinned
    root = None
    if spec.deploy is not None:  # compile once now: a spec the function cannot compile fails here
        pipeline_ir(spec, prepared.artifact, "render-check")
        root = default_root(spec.output_dir)
    # A name that depends on the event (e.g. "{{ trigger.generation }}") names no function:
    # then the spec file's name does.
    raw_name = prepared.data.get("name")
    base = raw_name if isinstance(raw_name, str) and "{" not in raw_name else Path(spec_path).stem
    name = function or gcloud.function_name(base)
    deployment = gcloud.Deployment(
        function=name,
        project=spec.project or "",
        region=spec.region or "",  # cloud_problems requires it
        trigger_location=trigger_location or spec.region or "",
        bucket=bucket,
        source=source,
        runtime_sa=runtime_service_account or gcloud.service_account(spec.project or "", "run", base),
        trigger_sa=trigger_service_account or gcloud.service_account(spec.project or "", "evt", base),
        job_sa=spec.service_account,
        read_buckets=tuple(sorted(buckets_of(spec))),
        pipeline=spec.deploy is not None,
        pipeline_root_bucket=storage.bucket_of(root) if root else None,
    )
    return prepared, deployment


def check_flags(
    bucket: str,
    *,
    prefix: str = "",
    marker: str = "_SUCCESS",
    function: str | None = None,
    runtime_service_account: str | None = None,
    trigger_service_account: str | None = None,
    trigger_location: str | None = None,
    max_runs_per_folder: int = MAX_RUNS_PER_FOLDER,
    folder_window: str = FOLDER_WINDOW,
    **_: Any,
) -> None:
    """The names a person typed, by Google's grammar (gcp/names.py), and the cap's flags:
    UserError naming the flag."""
    check_trigger_args(bucket, prefix, marker)
    check_cap(max_runs_per_folder, folder_window)
    if function is not None:
        names.check_function(function, "--function")
    for flag, account in (
        ("--runtime-service-account", runtime_service_account),
        ("--trigger-service-account", trigger_service_account),
    ):
        if account is not None:
            names.check_service_account(account, flag)
    if trigger_location:
        names.check_location(trigger_location, "--trigger-location")


def render(
    spec_path: str | Path, out_dir: str | Path, *, bucket: str, settings: Settings, log: Log, **options: Any
) -> dict[str, Any]:
    """Write the function directory (see bundle.py); returns what was written."""
    prepared, deployment = plan(spec_path, bucket=bucket, source=str(out_dir), settings=settings, **options)
    return _write(prepared, deployment, Path(out_dir), spec_path, log)


def _write(
    prepared: Prepared, deployment: gcloud.Deployment, out_dir: Path, spec_path: str | Path, log: Log
) -> dict[str, Any]:
    for warning in prepared.warnings:
        log(f"warning: {warning}")
    if prepared.builds:
        log(
            f"note: the function runs {prepared.artifact.image_uri}; build it once with "
            f"`vertex-trainer package {spec_path}` (`trigger deploy` does)"
        )
    files = bundle.write(
        out_dir,
        config=prepared.config,
        spec_text=bundle.spec_yaml(prepared.data, source=str(spec_path)),
        deploy_script=gcloud.script(deployment, gcloud.plan(deployment)),
    )
    return {
        "directory": str(out_dir),
        "function": deployment.function,
        "image": prepared.artifact.image_uri,
        "pipeline": prepared.config.pipeline,
        "bucket": deployment.bucket,
        "prefix": prepared.config.prefix,
        "marker": prepared.config.marker,
        "trigger_location": deployment.trigger_location,
        "max_runs_per_folder": prepared.config.max_runs_per_folder,
        "folder_window": prepared.config.folder_window,
        "files": files,
        "warnings": list(prepared.warnings),
    }


def deploy(
    spec_path: str | Path,
    *,
    bucket: str,
    settings: Settings,
    log: Log,
    out_dir: str | Path | None = None,
    dry_run: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Deploy the function (or, with `dry_run`, return the script and touch nothing)."""
    check_flags(bucket, **options)  # before the bucket's look-up: a bad name is sent nowhere
    if out_dir is not None and not dry_run:
        manifest.previous(Path(out_dir))  # a directory it may not write to: before anything is sent
    if dry_run:
        _, deployment = plan(
            spec_path, bucket=bucket, source=str(out_dir or "FUNCTION_DIR"), settings=settings, **options
        )
        return {
            "dry_run": True,
            "function": deployment.function,
            "script": gcloud.script(deployment, gcloud.plan(deployment)),
        }
    if not options.get("trigger_location"):  # Eventarc's trigger must be in the bucket's location
        meta = storage.bucket_metadata(storage.storage_api(settings, log=log), bucket)
        if meta is None:
            raise UserError(f"--bucket {bucket}: gs://{bucket} does not exist; nothing was deployed")
        options["trigger_location"] = str(meta.get("location") or "").lower()
    out_dir = Path(out_dir or tempfile.mkdtemp(prefix="vertex-trainer-function-"))
    prepared, deployment = plan(spec_path, bucket=bucket, source=str(out_dir), settings=settings, **options)
    rendered = _write(prepared, deployment, out_dir, spec_path, log)
    if prepared.builds:  # the function runs the pinned tag: make sure it exists
        packaging.ensure_artifact(prepared.spec, settings=settings, log=log)
    gcloud.run(gcloud.plan(deployment), log=log)
    return {**rendered, "dry_run": False}
