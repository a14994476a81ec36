"""The inputs of each pipeline step, from the rendered CustomJob and the DeployRequest. Pure.

The training step gets exactly the rendered CustomJob: its worker pools (as proto field names,
which the GCPC launcher hands to the generated client), scheduling (strategy, max wait, timeout),
output directory, service account, network, TensorBoard, KMS key and labels. A jobSpec field
without an input on GCPC's CustomTrainingJobOp is refused rather than silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.contract import KEY_LABEL
from vertex_trainer.errors import SpecError
from vertex_trainer.vertex.model_deploy import DeployRequest

# jobSpec / scheduling fields that have an input on CustomTrainingJobOp (GCPC 2.22).
_JOB_SPEC_FIELDS = {
    "workerPoolSpecs",
    "scheduling",
    "serviceAccount",
    "network",
    "tensorboard",
    "baseOutputDirectory",
}
_SCHEDULING_FIELDS = {"strategy", "timeout", "maxWaitDuration", "restartJobOnWorkerRestart"}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake_keys(node: Any) -> Any:
    """REST JSON (camelCase keys) -> proto field names (snake_case), recursively.

    GCPC's launcher passes the worker pools to `JobServiceClient.create_custom_job` as a dict, and
    proto-plus accepts only field names there ("Unknown field for CustomJob: displayName")."""
    if isinstance(node, dict):
        return {_CAMEL.sub("_", k).lower(): snake_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [snake_keys(v) for v in node]
    return node


def training_inputs(job: dict[str, Any], *, project: str, location: str) -> dict[str, Any]:
    """CustomTrainingJobOp's arguments for the rendered CustomJob `job`."""
    spec = job.get("jobSpec") or {}
    scheduling = spec.get("scheduling") or {}
    if scheduling.get("disableRetries"):
        raise SpecError(
            "scheduling.disable_retries",
            "has no equivalent in the Vertex AI Pipelines "
            "training step (google-cloud-pipeline-components' CustomTrainingJobOp)",
            has_value=False,
            hint="remove it for pipeline runs (`pipeline`, `trigger` with "
            "deploy:), or submit the job with `vertex-trainer submit`",
        )
    unknown = sorted(
        (set(spec) - _JOB_SPEC_FIELDS)
        | {f"scheduling.{k}" for k in set(scheduling) - _SCHEDULING_FIELDS - {"disableRetries"}}
    )
    if unknown:
        raise ValueError(f"the CustomJob has fields the pipeline's training step cannot carry: {unknown}")
    out: dict[str, Any] = {
        "project": project,
        "location": location,
        "display_name": job["displayName"],
        "worker_pool_specs": snake_keys(spec["workerPoolSpecs"]),
        "strategy": scheduling.get("strategy", "STANDARD"),
        "labels": dict(job.get("labels") or {}),
    }
    optional = {
        "timeout": scheduling.get("timeout"),
        # GCPC drops max_wait_duration unless the strategy is FLEX_START, as the API requires.
        "max_wait_duration": scheduling.get("maxWaitDuration"),
        "restart_job_on_worker_restart": scheduling.get("restartJobOnWorkerRestart"),
        "service_account": spec.get("serviceAccount"),
        "network": spec.get("network"),
        "tensorboard": spec.get("tensorboard"),
        "base_output_directory": (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"),
        "encryption_spec_key_name": (job.get("encryptionSpec") or {}).get("kmsKeyName"),
    }
    out.update({k: v for k, v in optional.items() if v not in (None, "")})
    return out


@dataclass(frozen=True)
class Previous:
    """A model deployed on the endpoint when the pipeline was compiled, which the pipeline
    undeploys once the new version serves with all the traffic. GCPC's ModelUndeployOp finds it
    on the endpoint by its model and version (the first deployed model of that version)."""

    deployed_model_id: str
    model: str  # projects/P/locations/L/models/ID
    version: str

    @property
    def resource_name(self) -> str:
        """The google.VertexModel's resourceName, `model@version`, as ModelUploadOp outputs it."""
        return f"{self.model}@{self.version}"


@dataclass(frozen=True)
class DeployTarget:
    """Where the upload and deploy steps go, as known when the pipeline is compiled.

    `parent_model`: upload as a new version of this model (else a new model); `endpoint`: deploy
    to this existing endpoint (else the pipeline creates one); `traffic_split`: deployModel's split,
    "0" being the new version; `undeploy`: the endpoint's deployed models to undeploy after the
    deploy step, one after the other (those left at 0% when the new version takes all the
    traffic and they are not kept: docs/serving.md)."""

    parent_model: str | None = None
    endpoint: str | None = None
    traffic_split: dict[str, int] = field(default_factory=lambda: {"0": 100})
    resolved: bool = False  # True when the registry was looked at (else: a first deploy)
    undeploy: tuple[Previous, ...] = ()

    def __post_init__(self) -> None:
        if self.undeploy and not self.endpoint:
            raise ValueError("models to undeploy need the endpoint they are deployed on")


def upload_inputs(request: DeployRequest, *, key: str | None, project: str, location: str) -> dict[str, Any]:
    """ModelUploadOp's arguments (the artifact comes from an importer, see `model_artifact`).
    The version carries the run's idempotency key (its training job's id is not known yet)."""
    labels = {**request.labels, **({KEY_LABEL: key} if key else {})}
    return {
        "project": project,
        "location": location,
        "display_name": request.model_display_name,
        "labels": labels,
    }


def model_artifact(request: DeployRequest) -> dict[str, Any]:
    """The google.UnmanagedContainerModel to import: the export and the serving container."""
    return {"artifact_uri": request.artifact_uri, "metadata": {"containerSpec": request.container.to_api()}}


def endpoint_inputs(request: DeployRequest, *, project: str, location: str) -> dict[str, Any]:
    """EndpointCreateOp's arguments, for a pipeline that creates its endpoint."""
    return {
        "project": project,
        "location": location,
        "display_name": request.endpoint,
        "labels": dict(request.labels),
    }


def deploy_inputs(request: DeployRequest, target: DeployTarget) -> dict[str, Any]:
    """ModelDeployOp's arguments (it takes project and location from the model and endpoint)."""
    out: dict[str, Any] = {
        "deployed_model_display_name": request.model_display_name,
        "traffic_split": dict(target.traffic_split),
        "dedicated_resources_machine_type": request.machine_type,
        "dedicated_resources_min_replica_count": request.min_replicas,
        "dedicated_resources_max_replica_count": request.max_replicas,
    }
    if request.accelerator_type:
        out["dedicated_resources_accelerator_type"] = request.accelerator_type
        out["dedicated_resources_accelerator_count"] = request.accelerator_count
    if request.service_account:
        out["service_account"] = request.service_account
    return out


def undeploy_note(request: DeployRequest, target: DeployTarget) -> str:
    """What the pipeline does with the endpoint's other deployed models, in words: the compiled
    pipeline's description, so `pipeline compile` and the dry run say it beside the steps."""
    if request.traffic < 100:
        return (
            f"the new version takes {request.traffic}% of the traffic and the deployed models keep "
            "the rest: none is undeployed"
        )
    if request.keep_previous:
        return "the other deployed models are kept (deploy.keep_previous)"
    head = "once it serves with all the traffic, the other deployed models left at 0% are undeployed: "
    if not target.resolved:
        return head + "none known at compile time (pipeline submit and compile --resolve look them up)"
    if not target.endpoint:
        return head + "none (the pipeline creates the endpoint)"
    if not target.undeploy:
        return head + "none was deployed on the endpoint when the pipeline was compiled"
    return head + ", ".join(f"{p.deployed_model_id} ({p.resource_name})" for p in target.undeploy)


def resource_uri(location: str, name: str) -> str:
    """The artifact URI GCPC gives Vertex resources (VertexModel, VertexEndpoint)."""
    return f"https://{location}-aiplatform.googleapis.com/v1/{name}"
