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
from vertex_trainer.vertex.deploy import DeployRequest

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
class DeployTarget:
    """Where the upload and deploy steps go, as known when the pipeline is compiled.

    `parent_model`: upload as a new version of this model (else a new model); `endpoint`: deploy
    to this existing endpoint (else the pipeline creates one); `traffic_split`: deployModel's split,
    "0" being the new version."""

    parent_model: str | None = None
    endpoint: str | None = None
    traffic_split: dict[str, int] = field(default_factory=lambda: {"0": 100})
    resolved: bool = False  # True when the registry was looked at (else: a first deploy)


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


def resource_uri(location: str, name: str) -> str:
    """The artifact URI GCPC gives Vertex resources (VertexModel, VertexEndpoint)."""
    return f"https://{location}-aiplatform.googleapis.com/v1/{name}"
