"""The Vertex AI Pipelines (KFP v2) pipeline, built with kfp and google-cloud-pipeline-components.

    train (CustomTrainingJobOp: the rendered CustomJob)
      -> import <output_dir>/model (google.UnmanagedContainerModel + the serving container)
      -> upload (ModelUploadOp; a new version of the parent model when one exists)
      -> endpoint (an existing one imported as google.VertexEndpoint, or EndpointCreateOp)
      -> deploy (ModelDeployOp with the traffic split)
      -> undeploy <id>, one after the other (ModelUndeployOp of each model deployed on the
         endpoint when the pipeline was compiled, imported as google.VertexModel `model@version`)

The upload and deploy steps exist only when the spec has `deploy:`; the undeploy steps only when
the new version takes all the traffic, the others are not kept (deploy.keep_previous) and the
registry was looked at (job.resolve_target): without the look-up none is known, and the
pipeline's description says so. Every GCPC step that has `project` and `location` gets them
explicitly (ModelUploadOp and EndpointCreateOp default to us-central1). kfp and GCPC (about 1 s
to import) are imported inside `compile_ir` only.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from vertex_trainer import lazy
from vertex_trainer.automation import pipeline_steps as steps
from vertex_trainer.automation.pipeline_steps import DeployTarget
from vertex_trainer.vertex.model_deploy import DeployRequest

TRAIN, IMPORT_MODEL, PARENT_MODEL, UPLOAD, ENDPOINT, DEPLOY = (
    "train",
    "import-model",
    "parent-model",
    "upload-model",
    "endpoint",
    "deploy-model",
)
PREVIOUS_MODEL, UNDEPLOY = "previous-model-", "undeploy-"  # + the deployed model id


def _kfp() -> tuple[Any, ...]:
    """kfp and google-cloud-pipeline-components, imported now (lazy: one message when missing)."""
    gcpc = "google_cloud_pipeline_components"
    artifact_types = lazy.require(f"{gcpc}.types.artifact_types")
    custom_job, endpoint, model = (
        lazy.require(f"{gcpc}.v1.{m}") for m in ("custom_job", "endpoint", "model")
    )
    compiler, dsl = lazy.require("kfp.compiler"), lazy.require("kfp.dsl")
    return (
        dsl,
        compiler,
        artifact_types,
        custom_job.CustomTrainingJobOp,
        model.ModelUploadOp,
        endpoint.EndpointCreateOp,
        endpoint.ModelDeployOp,
        endpoint.ModelUndeployOp,
    )


def compile_ir(
    job: dict[str, Any],
    *,
    name: str,
    project: str,
    location: str,
    key: str | None,
    deploy: DeployRequest | None = None,
    target: DeployTarget | None = None,
) -> dict[str, Any]:
    """The compiled pipeline (KFP IR, the PipelineJob's `pipelineSpec`) for the rendered CustomJob
    `job`, plus the upload and deploy steps when `deploy` is given, and an undeploy step for each
    of `target.undeploy` after them."""
    (
        dsl,
        compiler,
        types,
        CustomTrainingJobOp,
        ModelUploadOp,
        EndpointCreateOp,
        ModelDeployOp,
        ModelUndeployOp,
    ) = _kfp()
    train_args = steps.training_inputs(job, project=project, location=location)
    target = target or DeployTarget()

    def step(task: Any, display_name: str) -> Any:
        # Every run acts: a cached step would skip training, an upload or a deploy whose inputs
        # match an earlier run's (an event-driven run must never be answered from a cache).
        return task.set_display_name(display_name).set_caching_options(False)

    description = f"vertex-trainer: train {name}"
    if deploy:
        description += f", then register and deploy the model; {steps.undeploy_note(deploy, target)}"

    @dsl.pipeline(name=name, description=description)
    def pipeline():  # type: ignore[no-untyped-def]  # no annotation: kfp reads a return annotation as an output
        train = step(CustomTrainingJobOp(**train_args), TRAIN)
        if deploy is None:
            return
        source = steps.model_artifact(deploy)
        model = step(
            dsl.importer(
                artifact_uri=source["artifact_uri"],
                artifact_class=types.UnmanagedContainerModel,
                metadata=source["metadata"],
            ),
            IMPORT_MODEL,
        )
        model.after(train)  # the export exists only once training succeeded
        upload_args: dict[str, Any] = steps.upload_inputs(deploy, key=key, project=project, location=location)
        if target.parent_model:
            parent = dsl.importer(
                artifact_uri=steps.resource_uri(location, target.parent_model),
                artifact_class=types.VertexModel,
                metadata={"resourceName": target.parent_model},
            )
            upload_args["parent_model"] = step(parent, PARENT_MODEL).output
        upload = step(ModelUploadOp(unmanaged_container_model=model.output, **upload_args), UPLOAD)
        if target.endpoint:
            endpoint = dsl.importer(
                artifact_uri=steps.resource_uri(location, target.endpoint),
                artifact_class=types.VertexEndpoint,
                metadata={"resourceName": target.endpoint},
            )
            endpoint_out = step(endpoint, ENDPOINT).output
        else:
            created = EndpointCreateOp(**steps.endpoint_inputs(deploy, project=project, location=location))
            endpoint_out = step(created, ENDPOINT).outputs["endpoint"]
        last = step(
            ModelDeployOp(
                model=upload.outputs["model"], endpoint=endpoint_out, **steps.deploy_inputs(deploy, target)
            ),
            DEPLOY,
        )
        # Only once the new version serves with all the traffic (the deploy step succeeded), and
        # one at a time, as `vertex-trainer deploy` does (endpoints.retire): each step reads the
        # endpoint as the one before left it, and the launcher takes the first deployed model of
        # the version it is given (two of one version: two steps, one each).
        for previous in target.undeploy:
            old = dsl.importer(
                artifact_uri=steps.resource_uri(location, previous.resource_name),
                artifact_class=types.VertexModel,
                metadata={"resourceName": previous.resource_name},
            )
            old_model = step(old, PREVIOUS_MODEL + previous.deployed_model_id).output
            undeploy = ModelUndeployOp(model=old_model, endpoint=endpoint_out)
            last = step(undeploy, UNDEPLOY + previous.deployed_model_id).after(last)

    with tempfile.TemporaryDirectory(prefix="vertex-trainer-pipeline-") as tmp:
        path = Path(tmp) / "pipeline.yaml"
        compiler.Compiler().compile(pipeline_func=pipeline, package_path=str(path))
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    ir: dict[str, Any] = documents[0]  # the pipeline spec; a second document would be a platform spec
    return ir


def to_yaml(ir: dict[str, Any]) -> str:
    """The compiled pipeline as a file `kfp` and the Vertex AI console load."""
    return yaml.safe_dump(ir, sort_keys=True, default_flow_style=False)
