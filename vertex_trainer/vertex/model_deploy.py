"""Register a trained model and serve it, at most once per job (docs/contract.md section 5).

1. models:upload of the job's `<output_dir>/model` as a new version under the model with the
   requested display name (parentModel when it exists), the version labelled with the job's id;
2. the endpoint, by resource name, or found by display name, or created (with the display name
   as its id when that is a valid id, so a retried create answers ALREADY_EXISTS);
3. deployModel with dedicated resources and the traffic split: the new version gets `traffic`
   percent, the versions already serving keep their relative shares of the rest;
4. once it serves with all the traffic (`traffic: 100`, the default), every other deployed model
   left at 0% is undeployed (endpoints.retire), so its nodes stop billing, unless the request
   keeps them (`keep_previous`). Never before the new version serves.

Each step looks before it acts, and looks again after an answer was lost, so running the same
deploy twice uploads, deploys and undeploys nothing the second time (and finishes an undeploy an
interrupted first run left undone). Long-running operations are
polled to their end (bounded by `timeout`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer.contract import HEALTH_ROUTE, JOB_LABEL, PREDICT_ROUTE, SERVING_PORT
from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp.http import Transient, look_after_lost
from vertex_trainer.log import Log, silent
from vertex_trainer.settings import PollPolicy
from vertex_trainer.vertex.deployed import (
    ENDPOINT_NAME,
    Undeployment,
    apportion,
    change,
    model_of,
    retire,
    traffic_of,
)
from vertex_trainer.vertex.models import RegistryClient
from vertex_trainer.vertex.service import aiplatform_sdk

_ENDPOINT_ID = re.compile(r"^[a-z][a-z0-9-]{0,61}[a-z0-9]$")


@dataclass(frozen=True)
class ServingContainer:
    """The Model's containerSpec: what Vertex AI runs to serve predictions."""

    image_uri: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    port: int = SERVING_PORT
    predict_route: str = PREDICT_ROUTE
    health_route: str = HEALTH_ROUTE

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"imageUri": self.image_uri}
        if self.command:
            out["command"] = list(self.command)
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = [{"name": k, "value": v} for k, v in self.env]
        out.update(
            ports=[{"containerPort": self.port}],
            predictRoute=self.predict_route,
            healthRoute=self.health_route,
        )
        return out


@dataclass(frozen=True)
class DeployRequest:
    """Everything a deploy needs, resolved and validated (api builds it from the spec)."""

    model_display_name: str
    artifact_uri: str
    container: ServingContainer
    job_id: str  # label value naming the training job
    endpoint: str  # display name or projects/P/locations/R/endpoints/ID
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0
    min_replicas: int = 1
    max_replicas: int = 1
    traffic: int = 100
    labels: dict[str, str] = field(default_factory=dict)
    service_account: str | None = None
    keep_previous: bool = False  # keep the other deployed models left at 0% (else undeployed)

    @property
    def retires_others(self) -> bool:
        """Whether the other deployed models are undeployed once this one serves: it takes all
        the traffic (with less, the others keep their share) and they are not kept."""
        return self.traffic == 100 and not self.keep_previous

    def model_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "displayName": self.model_display_name,
            "artifactUri": self.artifact_uri,
            "containerSpec": self.container.to_api(),
            "labels": {**self.labels, JOB_LABEL: self.job_id},
        }
        return body

    def deployed_model(self, model: str, version: str) -> dict[str, Any]:
        machine: dict[str, Any] = {"machineType": self.machine_type}
        if self.accelerator_type:
            machine.update(acceleratorType=self.accelerator_type, acceleratorCount=self.accelerator_count)
        out: dict[str, Any] = {
            "model": f"{model}@{version}",
            "displayName": f"{self.model_display_name}-v{version}"[:128],
            "dedicatedResources": {
                "machineSpec": machine,
                "minReplicaCount": self.min_replicas,
                "maxReplicaCount": self.max_replicas,
            },
        }
        if self.service_account:
            out["serviceAccount"] = self.service_account
        return out


@dataclass
class Deployment:
    """A model version serving on an endpoint (docs/contract.md section 5 `deploy --output json`)."""

    model: str
    model_version: str
    endpoint: str
    deployed_model_id: str
    traffic_split: dict[str, int]
    adopted: bool
    undeployed: tuple[Undeployment, ...] = ()  # the others left at 0%, taken off after it served
    client: RegistryClient | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "model_version": self.model_version,
            "endpoint": self.endpoint,
            "deployed_model_id": self.deployed_model_id,
            "traffic_split": self.traffic_split,
            "adopted": self.adopted,
            "undeployed": [u.summary() for u in self.undeployed if u.undeployed],
        }

    def to_sdk(self) -> Any:
        """The google-cloud-aiplatform SDK's `aiplatform.Endpoint` for the same endpoint (the SDK
        is imported here, on first use; see vertex.service.aiplatform_sdk).

        Returns: the aiplatform.Endpoint."""
        if self.client is None:
            raise ValueError(
                "this Deployment has no client (project, region, settings) to reach the SDK with"
            )
        c = self.client
        sdk, credentials = aiplatform_sdk(c.project, c.region, c.settings)
        return sdk.Endpoint(self.endpoint, project=c.project, location=c.region, credentials=credentials)

    def predict(self, instances: list[Any], parameters: dict[str, Any] | None = None) -> list[Any]:
        """Send `instances` to the endpoint; returns its predictions."""
        if self.client is None:
            raise ValueError("this Deployment has no client to send predictions with")
        predictions: list[Any] = self.client.predict(self.endpoint, instances, parameters).get(
            "predictions", []
        )
        return predictions


def describe_split(split: dict[str, int], new: str = "0", label: str = "the new version") -> str:
    """A traffic split as people read it: "100% to the new version" or "70% to the new version,
    30% to deployed model 456" (`new`: the key of the version being deployed; "0" in a
    deployModel request, its deployed model id after).

    Args:
        split: deployed model id (or "0") -> percent.
        new: the key that names the new version.
        label: what to call it.
    Returns:
        The sentence; "no traffic" for an empty split."""
    parts = [
        f"{share}% to " + (label if key == new else f"deployed model {key}")
        for key, share in sorted(split.items(), key=lambda kv: (kv[0] != new, -kv[1], kv[0]))
    ]
    return ", ".join(parts) or "no traffic"


def split_traffic(current: dict[str, int], share: int) -> dict[str, int]:
    """The traffic split for deployModel: "0" (the model being deployed) gets `share` percent,
    the deployed models keep their relative shares of the rest; integers summing to 100."""
    serving = {k: int(v) for k, v in current.items() if int(v) > 0}
    if not serving or share >= 100:
        return {"0": 100}
    split = {"0": share, **apportion(serving, 100 - share)}
    return split if share else {k: v for k, v in split.items() if k != "0"}


def deploy(
    client: RegistryClient,
    request: DeployRequest,
    *,
    poll: PollPolicy,
    timeout: float | None = 3600.0,
    log: Log = silent,
    sleep: Callable[[float], None] = time.sleep,
) -> Deployment:
    """Upload (once), find or create the endpoint, deploy (once), then undeploy the others left
    at 0% (unless kept). See the module docstring."""
    wait: dict[str, Any] = dict(poll=poll, timeout=timeout, log=log, sleep=sleep)
    model, version, uploaded = _ensure_version(client, request, **wait)
    endpoint = _ensure_endpoint(client, request, **wait)
    existing = _deployed(endpoint, model, version)
    if existing is None:  # an interrupted deploy of this version may still be landing: not twice
        endpoint = _after_pending(client, endpoint, wait)
        existing = _deployed(endpoint, model, version)
    if existing is not None:
        log(
            f"deploy: {model}@{version} already serves on {endpoint['name']} "
            f"(deployed model {existing['id']}): nothing to deploy"
        )
        return _finish(client, request, endpoint, model, version, existing["id"], not uploaded, wait)
    split = split_traffic(traffic_of(endpoint), request.traffic)
    log(
        f"deploy: {model}@{version} to {endpoint['name']} on {request.machine_type} "
        f"(traffic: {describe_split(split)})"
    )
    body = request.deployed_model(model, version)
    try:
        change(
            client,
            endpoint["name"],
            "deploy",
            lambda: client.deploy_once(endpoint["name"], body, split),
            lambda now: _deployed(now, model, version) is not None,
            what="deploying the model",
            earlier="an earlier deploy",
            **wait,
        )
        endpoint = client.get_endpoint(endpoint["name"])
        found = _deployed(endpoint, model, version)
        if found is None:
            raise ServiceError(
                f"deploy of {model}@{version} finished but {endpoint['name']} does not list it",
                hint="see the endpoint in the Google Cloud console",
            )
        return _finish(client, request, endpoint, model, version, found["id"], False, wait)
    except KeyboardInterrupt:
        # Vertex AI goes on deploying; what this command would have undeployed after it (the
        # versions left at 0%) keeps its nodes, and bills, until a re-run or `undeploy`.
        log(
            f"interrupted: the deploy of {model}@{version} to {endpoint['name']} goes on in "
            "Vertex AI without this command"
            + (", and the models it leaves at 0% keep their nodes (billed)" if request.retires_others else "")
            + ". Run the same deploy again to follow it to its end (it adopts the deployment"
            + (" and undeploys them" if request.retires_others else "")
            + f"); see what is deployed: vertex-trainer endpoints --endpoint {endpoint['name']}"
        )
        raise


def _after_pending(client: RegistryClient, endpoint: dict[str, Any], wait: dict[str, Any]) -> dict[str, Any]:
    """The endpoint once its unfinished operations have ended (a deploy an interrupted run
    left going shows on the endpoint only then), read again; as it is when none is running."""
    pending = [op for op in client.operations(endpoint["name"]) if not op.get("done")]
    for op in pending:
        wait["log"](
            f"deploy: an earlier operation on {endpoint['name']} is still running: waiting for it first"
        )
        try:
            client.wait(op, "an earlier operation", **wait)
        except ServiceError as failed:
            wait["log"](f"deploy: the earlier operation failed ({failed.message})")
    return client.get_endpoint(endpoint["name"]) if pending else endpoint


def _finish(
    client: RegistryClient,
    request: DeployRequest,
    endpoint: dict[str, Any],
    model: str,
    version: str,
    deployed_id: str,
    adopted: bool,
    wait: dict[str, Any],
) -> Deployment:
    """The Deployment of a version that serves, after the others left at 0% were undeployed
    (when the request retires them; a re-run finds nothing left to undeploy)."""
    undeployed = retire(client, endpoint, deployed_id, **wait) if request.retires_others else ()
    # The last undeploy read the endpoint after it: its split is the endpoint's now.
    split = undeployed[-1].traffic_split if undeployed else traffic_of(endpoint)
    return Deployment(
        model,
        version,
        endpoint["name"],
        deployed_id,
        split,
        adopted=adopted,
        undeployed=undeployed,
        client=client,
    )


def _ensure_version(client: RegistryClient, request: DeployRequest, **wait: Any) -> tuple[str, str, bool]:
    """(model name, version id, uploaded now) of the version labelled with the job."""
    log = wait["log"]
    label = f'labels.{JOB_LABEL}="{request.job_id}"'

    def existing() -> tuple[str | None, dict[str, Any] | None]:
        parent = client.find_model(request.model_display_name)
        if parent is None:
            return None, None
        found = client.model_versions(parent["name"], label)
        return parent["name"], (min(found, key=lambda v: int(v.get("versionId") or 0)) if found else None)

    def uploaded() -> tuple[str, dict[str, Any]] | None:
        parent_now, version = existing()  # a version has a parent
        return None if parent_now is None or version is None else (parent_now, version)

    parent, version = existing()
    if parent is not None and version is not None:
        log(f"register: {parent}@{version['versionId']} already holds job {request.job_id}: no upload")
        return parent, str(version["versionId"]), False
    what = f"version of {parent}" if parent else f"model {request.model_display_name!r}"
    log(f"register: uploading {request.artifact_uri} as a new {what}")
    budget = client.api.budget()
    while True:
        try:
            operation = client.upload_once(request.model_body(), parent_model=parent)
            break
        except Transient as exc:
            log(f"register: {exc}; checking whether the upload was committed")
            found = look_after_lost(uploaded, exc, window=client.api.retry.read_timeout)
            if found is not None:
                parent_now, version = found
                return parent_now, str(version["versionId"]), True
            budget.backoff("upload", str(exc))
    response = client.wait(operation, "uploading the model", **wait)
    model, version_id = response.get("model"), str(response.get("modelVersionId") or "")
    if not model or not version_id:
        raise ServiceError(f"the model upload finished without a model version: {response}")
    log(f"register: {model}@{version_id}")
    return model, version_id, True


def _ensure_endpoint(client: RegistryClient, request: DeployRequest, **wait: Any) -> dict[str, Any]:
    log = wait["log"]
    if ENDPOINT_NAME.match(request.endpoint):
        return client.get_endpoint(request.endpoint)
    found = client.find_endpoint(request.endpoint)
    if found is not None:
        return found
    endpoint_id = request.endpoint if _ENDPOINT_ID.match(request.endpoint) else None
    log(f"endpoint: creating {request.endpoint!r}")
    operation = client.create_endpoint(
        {"displayName": request.endpoint, "labels": dict(request.labels)}, endpoint_id
    )
    if operation is None:  # created by an earlier attempt whose answer was lost
        return client.get_endpoint(f"{client.parent}/endpoints/{endpoint_id}")
    created = client.wait(operation, "creating the endpoint", **wait)
    name = created.get("name") or (f"{client.parent}/endpoints/{endpoint_id}" if endpoint_id else "")
    if not name:
        raise ServiceError(f"creating endpoint {request.endpoint!r} finished without a name")
    return client.get_endpoint(name)


def _deployed(endpoint: dict[str, Any], model: str, version: str) -> dict[str, Any] | None:
    for d in endpoint.get("deployedModels") or []:
        if model_of(d) == (model, str(version)):
            found: dict[str, Any] = d
            return found
    return None
