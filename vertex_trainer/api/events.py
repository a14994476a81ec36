"""The API of event-driven runs (docs/contract.md section 6): Vertex AI Pipelines and storage triggers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import _stderr, check, load_spec, plan_artifact, settings_from_env, within_budget
from vertex_trainer.api.execute import registry_client, submit
from vertex_trainer.api.execute import run as run_plan
from vertex_trainer.api.plan import SubmitOptions, plan_submit
from vertex_trainer.api.results import DryRun
from vertex_trainer.automation import event_runs as runs
from vertex_trainer.automation import pipeline_ir, to_yaml
from vertex_trainer.errors import UserError
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import check_key
from vertex_trainer.vertex.names import new_key
from vertex_trainer.vertex.pipelines import PipelineRun

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec

__all__ = [
    "compile_pipeline",
    "on_object_finalized",
    "pipeline_status",
    "pipeline_submit",
    "pipeline_yaml",
    "trigger_deploy",
    "trigger_render",
]


def compile_pipeline(
    spec: JobSpec,
    *,
    idempotency_key: str | None = None,
    resolve: bool = False,
    settings: Settings | None = None,
    log: Log | None = None,
) -> dict:
    """The Vertex AI Pipelines pipeline (compiled KFP IR) of `spec` (docs/contract.md section 6):
    the rendered CustomJob as its training step, then upload and deploy when the spec has
    `deploy:`.

    Args:
        spec: the job spec.
        idempotency_key: the key the training step's job carries, which names the run's own
            folder below output_dir (None: a fresh key: the compiled pipeline is one run's, as a
            rendered job is one submission's; docs/contract.md section 15).
        resolve: look the model and endpoint up (read-only) as `pipeline_submit` does; without
            it no connection is opened and the deploy steps are those of a first deploy (a new
            model, a new endpoint unless deploy.endpoint names one, all of the traffic).
        settings: the process settings (default: read from the environment).
        log: where the client's notes go (with ``resolve``).

    Returns:
        the PipelineSpec (KFP IR) as a dict.
    """
    check(spec)
    within_budget(spec)  # the compiled pipeline runs elsewhere (the console, kfp): the spec's budget holds

    key = check_key(idempotency_key) if idempotency_key is not None else new_key()
    registry = registry_client(spec, settings or settings_from_env(), log) if resolve else None
    return pipeline_ir(spec, plan_artifact(spec), key, registry=registry)


def pipeline_yaml(ir: dict) -> str:
    """The compiled pipeline as the file the Vertex AI console and `kfp` load.

    Args:
        ir: the PipelineSpec that `compile_pipeline` returned.

    Returns:
        its YAML text (keys sorted, so the same spec gives the same bytes).
    """
    return to_yaml(ir)


def pipeline_submit(
    spec: JobSpec,
    wait: bool = False,
    idempotency_key: str | None = None,
    *,
    dry_run: bool = False,
    pipeline_root: str | None = None,
    timeout: float | None = None,
    on_state: Callable[[Any], None] | None = None,
    builder: str | None = None,
    log: Log | None = None,
    settings: Settings | None = None,
) -> PipelineRun | DryRun:
    """Start `spec` as a Vertex AI PipelineJob (train; register and deploy with `deploy:`), at most
    once per idempotency key (docs/contract.md section 6): its pipelineJobId is derived from the
    key, and a run that exists is adopted before anything is built or compiled. The plan is
    submit's (:func:`plan_submit` with ``pipeline=True``): the same checks and budget, the
    training step's CustomJob rendered once, the run's request; its executor runs it.

    Args:
        spec: the job spec.
        wait: follow the run to its end (raises JobFailed unless it SUCCEEDED).
        idempotency_key: reuse it when retrying; None picks a random key.
        dry_run: return the requests as a DryRun; nothing is sent or built.
        pipeline_root: where the pipeline's artifacts go (default:
            gs://<output bucket>/pipeline-root).
        timeout: with ``wait``, seconds before giving up.
        on_state: called with the run at each state change while waiting.
        builder: ``docker`` or ``cloud-build`` when the spec builds its image.
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        the PipelineRun, or a DryRun with ``dry_run``.
    """
    settings = settings or settings_from_env()
    log = log or _stderr
    plan = plan_submit(  # the checks, the budget, the job rendered once, the run's request
        spec,
        SubmitOptions(timeout=timeout, on_state=on_state, builder=builder),
        idempotency_key=idempotency_key,
        pipeline=True,
        pipeline_root=pipeline_root,
        wait=wait,
        settings=settings,
        log=log,
    )
    for warning in plan.warnings:
        log(warning)
    if dry_run:
        return plan.dry_run()

    handle = run_plan(plan, settings=settings, log=log)
    assert isinstance(handle, PipelineRun)
    return handle


def pipeline_status(
    run: str, *, project: str | None = None, region: str | None = None, settings: Settings | None = None
) -> PipelineRun:
    """A pipeline run, fetched now.

    Args:
        run: a resource name (projects/P/locations/R/pipelineJobs/ID), or an id with project
            and region.
        project: the project of an id (default: the settings').
        region: the region of an id (default: the settings').
        settings: the process settings (default: read from the environment).

    Returns:
        the PipelineRun (state, tasks; refresh, wait, cancel).
    """
    return PipelineRun.get(run, project=project, region=region, settings=settings or settings_from_env())


def trigger_render(
    spec_path,
    out_dir,
    *,
    bucket: str,
    settings: Settings | None = None,
    log: Log | None = None,
    **options: Any,
) -> dict:
    """Write the deployable Cloud Run function for `spec_path` to `out_dir` (docs/contract.md
    section 6; see automation/function_bundle.py). Opens no connection.

    Args:
        spec_path: the job spec the function starts.
        out_dir: the directory to write the function to.
        bucket: the bucket whose marker objects start a run.
        settings: the process settings (default: read from the environment).
        log: where progress lines go (default: stderr).
        **options: prefix, marker, sets, vars, project, region, trigger_location, function,
            runtime_service_account, trigger_service_account, max_runs_per_folder, folder_window.

    Returns:
        what was written: the function's directory, files and configuration, as a dict.
    """
    # the deploy side (bundle, gcloud, pathspec): the Cloud Function runs on_object_finalized without it
    from vertex_trainer.automation import function_deploy as function

    return function.render(
        spec_path,
        out_dir,
        bucket=bucket,
        settings=settings or settings_from_env(),
        log=log or _stderr,
        **options,
    )


def trigger_deploy(
    spec_path,
    *,
    bucket: str,
    dry_run: bool = False,
    settings: Settings | None = None,
    log: Log | None = None,
    **options: Any,
) -> dict:
    """Render the function, build its pinned image if missing, and run the gcloud commands that
    deploy it with its Eventarc trigger and IAM (docs/contract.md section 6).

    Args:
        spec_path: the job spec the function starts.
        bucket: the bucket whose marker objects start a run.
        dry_run: return the commands as a script; nothing is written, built or sent.
        settings: the process settings (default: read from the environment).
        log: where progress lines go (default: stderr).
        **options: as for :func:`trigger_render`, and out_dir (default: a new temporary
            directory).

    Returns:
        what was deployed (or, dry, the commands), as a dict.
    """
    # the deploy side (bundle, gcloud, pathspec): the Cloud Function runs on_object_finalized without it
    from vertex_trainer.automation import function_deploy as function

    return function.deploy(
        spec_path,
        bucket=bucket,
        dry_run=dry_run,
        settings=settings or settings_from_env(),
        log=log or _stderr,
        **options,
    )


def on_object_finalized(
    event: Any, function_dir, *, settings: Settings | None = None, emit: Callable[[dict], None] | None = None
) -> dict:
    """The Cloud Run function's body (docs/contract.md section 6): start the run a marker object
    asks for, at most once per (bucket, object, generation), and at most the trigger's
    max_runs_per_folder runs of one folder in its folder_window (automation/event_runs.py); acknowledge
    every other object, and a marker whose folder is not one folder of the bucket. An invalid
    event or spec, or a capped re-upload, is permanent: logged, acknowledged. Anything else
    raises: the function answers 500 and Eventarc redelivers.

    Args:
        event: the CloudEvent of a finalized object (google.cloud.storage.object.v1.finalized).
        function_dir: the rendered function's directory (its config and spec).
        settings: the process settings (default: read from the environment).
        emit: where the one JSON log line goes (default: stdout, as Cloud Logging reads it).

    Returns:
        what happened (started, adopted, ignored, capped or refused), as the dict it emitted.
    """
    settings = settings or settings_from_env()
    log = runs.EventLog(emit)
    config, decision = runs.triage(event, function_dir, log)
    if decision is None:
        return log.last
    try:
        spec = load_spec(
            Path(function_dir) / config.spec_file,
            set=runs.folder_set(decision),  # the folder's label: what the cap counts by
            vars=runs.spec_vars(config, decision),
            settings=settings,
        )
        cap = runs.FolderCap(config, decision, spec, settings)
        why = cap.before()
        if why is not None:  # acknowledged: a re-upload past the cap starts nothing
            return log.capped(decision, why)
        start = pipeline_submit if spec.deploy is not None else submit
        run = runs.keep_oldest(start(spec, idempotency_key=decision.key, settings=settings, log=_stderr))
        why = cap.after(run)
        if why is not None:
            return log.capped(decision, why, run)
    except UserError as exc:  # the same event would fail the same way: acknowledge it
        return log.refused(decision, exc)
    except Exception as exc:
        log.retry(decision, exc)
        raise
    return log.started(decision, run)
