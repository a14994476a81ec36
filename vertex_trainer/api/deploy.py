"""Deploy (docs/contract.md section 5): a finished job's model (or a model directory) registered
in the Model Registry and served on the spec's endpoint, at most once per job."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertex_trainer.api.core import _stderr, plan_artifact, settings_from_env
from vertex_trainer.contract import SUCCEEDED, records_of, short_state
from vertex_trainer.errors import UserError
from vertex_trainer.local.layout import find_run
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import Job
from vertex_trainer.vertex.models import RegistryClient

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.vertex.model_deploy import Deployment

# `status`, `list` and `logs` load this module (api.handles' Job.deploy): what only a deploy or a
# served model needs (the spec's models, the hardware and price tables, the model server) is
# imported inside deploy and serve_model.

__all__ = ["deploy", "serve_model"]


def deploy(
    spec: JobSpec,
    *,
    job: str | None = None,
    model_dir: str | None = None,
    dry_run: bool = False,
    timeout: float | None = None,
    keep_previous: bool = False,
    log: Log | None = None,
    settings: Settings | None = None,
) -> Deployment | dict:
    """Register a finished job's model (or `model_dir`) in the Model Registry and deploy it to
    the spec's endpoint, at most once per job (docs/contract.md section 5). When the new version
    takes all the traffic (deploy.traffic 100, the default), the other deployed models left at 0%
    are undeployed once it serves, unless kept (``keep_previous``, or deploy.keep_previous).

    Args:
        spec: the job spec whose ``deploy:`` block says where and how.
        job: the training job that SUCCEEDED (its ``<output_dir>/model`` is registered).
        model_dir: a SavedModel in Cloud Storage, instead of ``job`` (exactly one of the two).
        dry_run: return the requests it would send, as a dict; nothing is sent.
        timeout: seconds to wait for the upload and the deployment (default: deploy.timeout).
        keep_previous: keep the other deployed models on the endpoint (as deploy.keep_previous).
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        the Deployment (model, version, endpoint, traffic split, adopted, what was undeployed),
        or with ``dry_run`` a dict ``{"requests": [...], "undeploys": ...}``.
    """
    from vertex_trainer.deployment import deploy_request as deployment  # (note at the top)
    from vertex_trainer.spec import cloud_problems  # (note at the top)
    from vertex_trainer.vertex.model_deploy import deploy as run_deploy  # (note at the top)

    if (job is None) == (model_dir is None):
        raise UserError(
            "deploy needs exactly one of --job JOB or --model-dir gs://...",
            hint="--job: a job that SUCCEEDED; --model-dir: a SavedModel in Cloud Storage",
        )
    settings = settings or settings_from_env()
    log = log or _stderr
    if not spec.project or not spec.region:
        cloud_problems(spec)  # names the missing project or region (exit 2)
        raise UserError("deploy needs the spec's project and region", hint="set them in the spec")
    client = RegistryClient(spec.project, spec.region, settings=settings, log=log)
    if job is not None:
        if dry_run:
            artifact, label, image = f"<output_dir of {job}>/model", "JOB_ID", "<the job's image>"
        else:
            found = Job.get(job, project=spec.project, region=spec.region, settings=settings)
            artifact, label, image = deployment.from_job(spec, found.data)
    elif model_dir is not None:
        planned = plan_artifact(spec).image_uri if spec.image is not None else None
        artifact, label, image = deployment.from_model_dir(model_dir, planned)
    request = deployment.request(spec, artifact, label, image)  # (deploy.keep_previous in it)
    if keep_previous:  # --keep-previous wins over the spec
        request = dataclasses.replace(request, keep_previous=True)
    if dry_run:
        return _with_undeploys(deployment.dry_run(client, request), client, request)
    deployment.check_model_dir(settings, artifact, log=log)
    return run_deploy(
        client, request, poll=settings.poll, timeout=timeout or deployment.deploy_block(spec).timeout, log=log
    )


def _with_undeploys(plan: dict, client: Any, request: Any) -> dict:
    """The dry run's plan with what deploy would undeploy after the new version serves: no
    connection is opened, so the endpoint's deployed models are not known; the request is shown
    once, for each of them."""
    base = client.api.url(f"v1/{client.parent}")
    if request.retires_others:
        plan["undeploys"] = "every other deployed model left at 0%, once the new version serves"
        plan["requests"].append(
            {
                "method": "POST",
                "url": f"{base}/endpoints/ENDPOINT_ID:undeployModel",
                "body": {"deployedModelId": "EACH_OTHER_DEPLOYED_MODEL_ID"},
                "note": "once the new version serves with 100% of the traffic, for each other "
                "deployed model left at 0% (their nodes stop billing); --keep-previous or "
                "deploy.keep_previous: true keeps them",
            }
        )
    elif request.keep_previous:
        plan["undeploys"] = "none: the other deployed models are kept (keep_previous)"
    else:
        plan["undeploys"] = f"none: the new version takes {request.traffic}% and the others keep the rest"
    return plan


def _ended(record: Path) -> str | None:
    """How the local run whose records are `record` ended (its result.json's state), or None."""
    from vertex_trainer.local.runlog import RESULT_FILE  # (light: no runner)

    try:
        value = json.loads((record / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    state = value.get("state") if isinstance(value, dict) else None
    return state if isinstance(state, str) else None


def _how(record: Path) -> str:
    """`ended FAILED`, or what a run without a result is, for a line."""
    state = _ended(record)
    return (
        f"ended {short_state(state)}" if state else "has no result (still running, or its runner was killed)"
    )


def _served_run(ref: str, log: Log) -> str:
    """The model/ of the local run `ref` names (docs/contract.md section 15): a run's folder as
    given (a line when that run did not succeed: its model may be an interrupted one); a base
    folder (or a spec's name) its newest run that SUCCEEDED with a model, never a newer run that
    failed or was cancelled (a line names both). UserError when there is none."""
    from vertex_trainer.local.layout import runs_in

    found = find_run(ref)
    if found is None:
        raise UserError(
            f"no exported model in {ref} (saved_model.pb is missing, and no run is there)",
            hint="pass a run's model/, e.g. runs/quickstart/latest/model (the newest run's)",
        )
    path = Path(ref).expanduser()
    runs = runs_in(found.run_dir.parent)
    if (path.exists() and path.resolve() != found.run_dir.parent.resolve()) or not runs:
        model = found.run_dir / "model"
        state = _ended(found.record)
        if not (model / "saved_model.pb").is_file():
            raise UserError(
                f"no exported model in {ref} (saved_model.pb is missing"
                + (f"; the run ended {short_state(state)})" if state else ")"),
                hint="pass a run's model/, e.g. runs/quickstart/latest/model (the newest run's)",
            )
        if state is not None and state != SUCCEEDED:
            log(f"warning: run {found.run_dir.name} ended {short_state(state)}: its model may be incomplete")
        return str(model)
    # a base: its newest run that SUCCEEDED and exported a model
    good = [
        r
        for r in runs
        if _ended(r.record) == SUCCEEDED and (r.run_dir / "model" / "saved_model.pb").is_file()
    ]
    newest = runs[-1]
    if not good:
        ended = "; ".join(f"{r.run_dir.name} {_how(r.record)}" for r in runs[-3:])
        raise UserError(
            f"no exported model in {ref}: no run there SUCCEEDED with a model (newest: {ended})",
            hint="to serve one anyway, pass its model/, e.g. runs/quickstart/latest/model (the newest run's)",
        )
    chosen = good[-1]
    if chosen is not newest:
        log(
            f"serving run {chosen.run_dir.name}, the newest that SUCCEEDED: the newest run, "
            f"{newest.run_dir.name}, {_how(newest.record)}"
        )
    return str(chosen.run_dir / "model")


def serve_model(
    model_dir: str,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    ready: Callable[[str, str, str], None] | None = None,
    settings: Settings | None = None,
    log: Log | None = None,
) -> None:
    """Serve an exported model on this machine, behind the prediction contract of the Vertex AI
    endpoint (docs/serving.md), until interrupted. The routes and the default port are the ones
    Vertex AI gives a serving container: AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE.

    Args:
        model_dir: the export, a run's ``model/`` (a local path or gs://); a local run's folder
            is taken for its ``model/``, a spec's output_dir for its newest run that SUCCEEDED
            with a model (a line says so when that is not its newest run; a run's folder whose
            run did not succeed is served with a line saying so).
        host: the address to listen on.
        port: the port, 0 to 65535 (None: $AIP_HTTP_PORT, else 8080; 0: any free port).
        ready: called once the model answers, with its URL, the health and the predict routes.
        settings: the process settings (default: read from the environment).
        log: where those lines go (default: stderr).

    Returns:
        None, once the server stops.

    Raises:
        UserError: a port out of 0 to 65535 (or such an AIP_HTTP_PORT), no export in model_dir, a
            model that does not load, or a port that cannot be listened on (exit 2).
    """
    from trainer.serve import PORTS, ServeError, port_number  # (note at the top)
    from trainer.serve import serve as run_server  # (note at the top)

    env = (settings or settings_from_env()).environ
    given = port if port is not None else env.get("AIP_HTTP_PORT") or 8080
    try:
        port = port_number(given)
    except ValueError:
        what = f"port {given}" if port is not None else f"AIP_HTTP_PORT={given!r}"
        raise UserError(
            f"{what} is not a port number ({PORTS})", hint="--port 0 picks any free port"
        ) from None
    if "://" not in model_dir and not (Path(model_dir) / "saved_model.pb").is_file():
        model_dir = _served_run(model_dir, log or _stderr)
    elif "://" not in model_dir:  # a run's model/ itself (runs/quickstart/latest/model): how it ended
        run_dir = Path(model_dir).resolve().parent
        state = _ended(Path(records_of(str(run_dir))))
        if state is not None and state != SUCCEEDED:
            (log or _stderr)(
                f"warning: run {run_dir.name} ended {short_state(state)}: its model may be incomplete"
            )
    health = env.get("AIP_HEALTH_ROUTE") or "/health"
    predict = env.get("AIP_PREDICT_ROUTE") or "/predict"

    def on_ready(server: Any) -> None:
        if ready is not None:
            ready(server.url, health, predict)

    try:
        run_server(
            model_dir, host=host, port=port, health_route=health, predict_route=predict, ready=on_ready
        )
    except ServeError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(
            f"cannot listen on {host}:{port}: {e.strerror or e}",
            hint="pick another --port (0 = any free port)",
        ) from None
