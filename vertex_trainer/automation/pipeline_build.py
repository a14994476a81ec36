"""From a resolved spec to the PipelineJob: one render of the CustomJob, the deploy request of
the deployment capability (`deployment.request`), the registry look-ups (when asked), the
compiled pipeline and the REST body."""

from __future__ import annotations

from typing import Any

from vertex_trainer import deployment, render
from vertex_trainer.automation.pipeline_compiler import compile_ir
from vertex_trainer.automation.pipeline_rest import default_root, first_deploy, pipeline_job, resolve_target
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import UserError
from vertex_trainer.spec import JobSpec
from vertex_trainer.vertex.models import RegistryClient


def check_pipeline(spec: JobSpec) -> None:
    """What a spec needs to run as a pipeline (exit 2 otherwise, before anything is built or
    sent): no tune:, and an output_dir when it deploys."""
    if spec.tune is not None:
        raise UserError(
            "tune: a hyperparameter tuning job has no pipeline form here",
            hint="remove tune: for pipeline and trigger runs, or submit it with `vertex-trainer submit`",
        )
    if spec.deploy is not None and not spec.output_dir:
        raise UserError("deploy: registers the job's <output_dir>/model: set output_dir")


def run_root(spec: JobSpec, root: str | None = None) -> str:
    """The run's pipeline root: `root` (--pipeline-root), else gs://<output bucket>/pipeline-root;
    anything but a gs:// path is exit 2."""
    root = root or default_root(spec.output_dir)
    if not root.startswith("gs://"):
        raise UserError(f"--pipeline-root {root!r}: a pipeline root is a gs:// path")
    return root


def pipeline_ir(
    spec: JobSpec,
    artifact: Artifact,
    key: str | None,
    *,
    registry: RegistryClient | None = None,
    job: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The compiled pipeline of `spec` run with `artifact`. With a `registry` client the model
    and endpoint are looked up (read-only), and the models deployed on the endpoint now are
    undeployed after the deploy step when the new version takes all the traffic (unless
    deploy.keep_previous); without, the deploy steps are those of a first deploy and no model
    deployed is known.
    `job`: the CustomJob the training step creates, as the submit plan rendered it (None:
    rendered here)."""
    check_pipeline(spec)
    job = job if job is not None else render.custom_job(spec, artifact, idempotency_key=key)
    request = target = None
    if spec.deploy is not None:
        # the model the training step exports: <its own folder>/model (AIP_MODEL_DIR)
        base = ((job.get("jobSpec") or {}).get("baseOutputDirectory") or {}).get("outputUriPrefix")
        request = deployment.request(
            spec, f"{(base or spec.output_dir or '').rstrip('/')}/model", key or "compile", artifact.image_uri
        )
        target = resolve_target(registry, request) if registry else first_deploy(request)
    return compile_ir(
        job,
        name=spec.name,
        project=spec.project or "",
        location=spec.region or "",
        key=key,
        deploy=request,
        target=target,
    )


def pipeline_body(spec: JobSpec, ir: dict[str, Any], key: str, root: str) -> dict[str, Any]:
    """The PipelineJob REST body: the spec's name, labels (key and spec hash, like its jobs),
    service account and KMS key."""
    return pipeline_job(
        display_name=spec.name,
        ir=ir,
        labels=render.labels(spec, key),
        root=root,
        service_account=spec.service_account,
        encryption_key=spec.encryption_key,
    )
