"""Deploy (docs/contract.md section 5): a finished job's model (or a model directory) registered
in the Model Registry and served on the spec's endpoint, at most once per job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vertex_trainer.api.core import Log, _stderr, plan_artifact, settings_from_env
from vertex_trainer.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.spec import JobSpec
    from vertex_trainer.vertex.deploy import Deployment

__all__ = ["deploy"]


def deploy(
    spec: JobSpec,
    *,
    job: str | None = None,
    model_dir: str | None = None,
    dry_run: bool = False,
    timeout: float | None = None,
    log: Log | None = None,
    settings: Settings | None = None,
) -> Deployment | dict:
    """Register a finished job's model (or `model_dir`) in the Model Registry and deploy it to
    the spec's endpoint, at most once per job (docs/contract.md section 5).

    Args:
        spec: the job spec whose ``deploy:`` block says where and how.
        job: the training job that SUCCEEDED (its ``<output_dir>/model`` is registered).
        model_dir: a SavedModel in Cloud Storage, instead of ``job`` (exactly one of the two).
        dry_run: return the requests it would send, as a dict; nothing is sent.
        timeout: seconds to wait for the upload and the deployment (default: deploy.timeout).
        log: where progress lines go (default: stderr).
        settings: the process settings (default: read from the environment).

    Returns:
        the Deployment (model, version, endpoint, traffic split, adopted), or with ``dry_run``
        a dict ``{"requests": [...]}``.
    """
    from vertex_trainer.errors import UserError
    from vertex_trainer.spec import cloud_problems
    from vertex_trainer.vertex.deploy import deploy as run_deploy
    from vertex_trainer.vertex.jobs import Job
    from vertex_trainer.vertex.models import RegistryClient
    from vertex_trainer.workflows import deployment

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
    request = deployment.request(spec, artifact, label, image)
    if dry_run:
        return deployment.dry_run(client, request)
    deployment.check_model_dir(settings, artifact, log=log)
    return run_deploy(
        client, request, poll=settings.poll, timeout=timeout or deployment.deploy_block(spec).timeout, log=log
    )
