"""From a resolved spec to the PipelineJob: one render of the CustomJob, the deploy request of
`workflows.deployment`, the registry look-ups (when asked), the compiled pipeline and the REST body."""

from __future__ import annotations

from typing import Any

from vertex_trainer import render
from vertex_trainer.contract import Artifact
from vertex_trainer.errors import UserError
from vertex_trainer.pipeline.compiler import compile_ir
from vertex_trainer.pipeline.job import first_deploy, pipeline_job, resolve_target
from vertex_trainer.spec import JobSpec
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.workflows import deployment


def pipeline_ir(
    spec: JobSpec, artifact: Artifact, key: str | None, *, registry: RegistryClient | None = None
) -> dict[str, Any]:
    """The compiled pipeline of `spec` run with `artifact`. With a `registry` client the model
    and endpoint are looked up (read-only); without, the deploy steps are those of a first deploy."""
    if getattr(spec, "tune", None) is not None:
        raise UserError(
            "tune: a hyperparameter tuning job has no pipeline form here",
            hint="remove tune: for pipeline and trigger runs, or submit it with `vertex-trainer submit`",
        )
    job = render.custom_job(spec, artifact, idempotency_key=key)
    request = target = None
    if spec.deploy is not None:
        if not spec.output_dir:
            raise UserError("deploy: registers the job's <output_dir>/model: set output_dir")
        request = deployment.request(
            spec, f"{spec.output_dir.rstrip('/')}/model", key or "compile", artifact.image_uri
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
