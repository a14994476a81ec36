"""The PipelineJob REST body, its pipeline root, and what the registry says about the deploy.

`resolve_target` is the one place that reads the Model Registry and Endpoints before a pipeline
is compiled: an existing model of the same display name gets a new version (parentModel), an
existing endpoint is deployed to (not created again), and the traffic split keeps the serving
versions' ratio for what `traffic` leaves them. When the new version takes all the traffic and
the others are not kept (DeployRequest.retires_others), every model deployed on the endpoint now
is undeployed after the deploy step, as `vertex-trainer deploy` does (docs/serving.md).

It is read when the pipeline is submitted; a Flex Start run may deploy days later. A version
undeployed in between fails the deploy step when it is in the traffic split (run the pipeline
again, or `vertex-trainer deploy --job`), or its undeploy step (the new version already serves);
a model deployed in between is not undeployed (`vertex-trainer endpoints` shows it, `undeploy`
removes it).
"""

from __future__ import annotations

import re
from typing import Any

from vertex_trainer.automation.pipeline_steps import DeployTarget, Previous
from vertex_trainer.errors import UserError
from vertex_trainer.gcp.storage import bucket_of
from vertex_trainer.vertex.deployed import model_of
from vertex_trainer.vertex.model_deploy import DeployRequest, split_traffic
from vertex_trainer.vertex.models import RegistryClient

ROOT_FOLDER = "pipeline-root"
_ENDPOINT_NAME = re.compile(r"^projects/[^/]+/locations/[^/]+/endpoints/[^/]+$")


def default_root(output_dir: str | None) -> str:
    """gs://<the output bucket>/pipeline-root: where Vertex AI Pipelines keeps each run's files."""
    bucket = bucket_of(output_dir) if output_dir and output_dir.startswith("gs://") else None
    if not bucket:
        raise UserError(
            "a pipeline needs a Cloud Storage root: set output_dir: gs://BUCKET/... in "
            "the spec, or pass --pipeline-root gs://BUCKET/pipeline-root"
        )
    return f"gs://{bucket}/{ROOT_FOLDER}"


def pipeline_job(
    *,
    display_name: str,
    ir: dict[str, Any],
    labels: dict[str, str],
    root: str,
    service_account: str | None = None,
    encryption_key: str | None = None,
) -> dict[str, Any]:
    """The PipelineJob as pipelineJobs.create receives it (the id travels as a query parameter)."""
    if not root.startswith("gs://"):
        raise UserError(f"--pipeline-root {root!r}: a pipeline root is a gs:// path")
    body: dict[str, Any] = {
        "displayName": display_name[:128],
        "pipelineSpec": ir,
        "labels": dict(labels),
        "runtimeConfig": {"gcsOutputDirectory": root},
    }
    if service_account:
        # The steps run as this account: it creates the CustomJob (running as itself), uploads
        # and deploys, so it needs roles/aiplatform.user and actAs on itself (docs/events.md).
        body["serviceAccount"] = service_account
    if encryption_key:
        body["encryptionSpec"] = {"kmsKeyName": encryption_key}
    return body


def first_deploy(request: DeployRequest) -> DeployTarget:
    """The target without looking at the registry: a new model, a new endpoint unless the spec
    names one by resource name, and all of the traffic for the new version."""
    endpoint = request.endpoint if _ENDPOINT_NAME.match(request.endpoint) else None
    return DeployTarget(endpoint=endpoint, traffic_split={"0": 100})


def resolve_target(client: RegistryClient, request: DeployRequest) -> DeployTarget:
    """Look up the parent model and the endpoint (read-only) and compute the traffic split."""
    model = client.find_model(request.model_display_name)
    if _ENDPOINT_NAME.match(request.endpoint):
        endpoint: dict[str, Any] | None = client.get_endpoint(request.endpoint)
    else:
        endpoint = client.find_endpoint(request.endpoint)
    current = {str(k): int(v) for k, v in ((endpoint or {}).get("trafficSplit") or {}).items()}
    return DeployTarget(
        parent_model=model["name"] if model else None,
        endpoint=endpoint["name"] if endpoint else None,
        traffic_split=split_traffic(current, request.traffic),
        resolved=True,
        undeploy=_previous(endpoint) if endpoint and request.retires_others else (),
    )


def _previous(endpoint: dict[str, Any]) -> tuple[Previous, ...]:
    """The endpoint's deployed models, in its order: all of them are left at 0% once the new
    version takes all the traffic."""
    return tuple(Previous(str(d["id"]), *model_of(d)) for d in endpoint.get("deployedModels") or [])
