"""The fake Vertex AI ModelService, EndpointService and operations (REST, v1), mounted in FakeVertex.

- ``POST /v1/{parent}/models:upload``                 upload (UploadModelRequest) -> Operation
- ``GET  /v1/{parent}/models``                        list (``filter=display_name="X"`` or labels)
- ``GET  /v1/{parent}/models/ID[@VERSION]``           get (the default version without @)
- ``GET  /v1/{parent}/models/ID:listVersions``        listVersions (label filters)
- ``POST /v1/{parent}/endpoints[?endpointId=X]``      create (Endpoint) -> Operation
- ``GET  /v1/{parent}/endpoints``                     list (``filter=display_name="X"``)
- ``GET  /v1/{parent}/endpoints/ID``                  get
- ``POST /v1/{parent}/endpoints/ID:deployModel``      deployModel (DeployModelRequest) -> Operation
- ``POST /v1/{parent}/endpoints/ID:undeployModel``    undeployModel (UndeployModelRequest) -> Operation:
  a deployed model that takes traffic goes only with a trafficSplit that unassigns it (the
  service's FAILED_PRECONDITION otherwise); the last one leaves the split empty; the predictor
  hook's `undeployed(endpoint, deployed_model_id)` is told when the operation completes
- ``POST /v1/{parent}/endpoints/ID:predict``          predict: a deployed model chosen by the
  traffic split answers, through the `predictor` hook (none: 501; the sandbox serves the model)
- ``GET  /v1/{...}/operations/ID``                    operations.get
- ``GET  /v1/{resource}/operations``                  operations.list (of a model or endpoint)

Bodies are parsed strictly with the real ``aiplatform_v1`` request types. Operations are done on
their first GET (so clients must poll), and an operation can be made to end with an error
(`FakeVertex.fail_operation`). The state lives here; FakeVertex routes requests, records them and
injects transport faults for every op alike.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from vertex_trainer.emulators._http import offset_page, route

_PARENT = r"projects/[^/]+/locations/[^/]+"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(rf"^/v1/({_PARENT})/models:upload$"), "upload"),
    ("GET", re.compile(rf"^/v1/({_PARENT})/models$"), "model-list"),
    ("GET", re.compile(rf"^/v1/({_PARENT}/models/[^/:@]+):listVersions$"), "model-versions"),
    ("GET", re.compile(rf"^/v1/({_PARENT}/models/[^/:]+)$"), "model-get"),
    ("POST", re.compile(rf"^/v1/({_PARENT})/endpoints$"), "endpoint-create"),
    ("GET", re.compile(rf"^/v1/({_PARENT})/endpoints$"), "endpoint-list"),
    ("GET", re.compile(rf"^/v1/({_PARENT}/endpoints/[^/:]+)$"), "endpoint-get"),
    ("GET", re.compile(rf"^/(?:v1|ui)/({_PARENT}/[a-zA-Z]+/[^/:]+)/operations$"), "operation-list"),
    ("POST", re.compile(rf"^/v1/({_PARENT}/endpoints/[^/:]+):deployModel$"), "deploy"),
    ("POST", re.compile(rf"^/v1/({_PARENT}/endpoints/[^/:]+):undeployModel$"), "undeploy"),
    ("POST", re.compile(rf"^/v1/({_PARENT}/endpoints/[^/:]+):predict$"), "predict"),
    # The generated REST transports poll operations under /ui/ as well as /v1/.
    ("GET", re.compile(rf"^/(?:v1|ui)/({_PARENT}/(?:[a-zA-Z]+/[^/]+/)?operations/[0-9]+)$"), "operation"),
]
_FILTER = re.compile(
    r'^\s*(?:(?P<field>display_name|displayName)\s*=\s*"(?P<name>[^"]*)"'
    r'|labels\.(?P<key>[a-z][a-z0-9_-]*)\s*=\s*"?(?P<value>[a-z0-9_-]*)"?)\s*$'
)
_LABEL_TERM = re.compile(r'^\s*labels\.(?P<key>[a-z0-9_-]+)\s*(?P<op>=|:)\s*(?P<value>"[^"]*"|[^\s"]+)\s*$')
_ENDPOINT_ID = re.compile(r"^[a-z][a-z0-9-]{0,61}[a-z0-9]$|^[1-9][0-9]{0,8}$")


class ServiceError(Exception):
    """An error the service answers (status code and message, Google's envelope)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse(type_name: str, body: Any) -> dict[str, Any]:
    """Parse `body` strictly as aiplatform_v1.<type_name> and return it as proto JSON."""
    if not isinstance(body, dict):
        raise ServiceError(400, "Invalid JSON payload received. Expected an object.")
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    cls = getattr(aiplatform_v1, type_name)
    message = cls.pb(cls())
    try:
        json_format.ParseDict(body, message)
    except json_format.ParseError as exc:
        raise ServiceError(400, f"Invalid JSON payload received. {exc}") from None
    out: dict[str, Any] = json_format.MessageToDict(message)
    return out


def _filter(text: str) -> Callable[[dict[str, Any]], bool]:
    """display_name="X" / labels.k="v" terms joined by AND."""
    terms = []
    for part in filter(None, re.split(r"\s+AND\s+", text.strip())):
        m = _FILTER.match(part)
        if not m:
            raise ServiceError(400, f"Unsupported filter: {text!r}.")
        terms.append(m)

    def keep(resource: dict[str, Any]) -> bool:
        for m in terms:
            if m["field"] and resource.get("displayName") != m["name"]:
                return False
            if m["key"] and (resource.get("labels") or {}).get(m["key"]) != m["value"]:
                return False
        return True

    return keep


def list_page(items: list[Any], query: dict[str, Any], key: str, size: int) -> dict[str, Any]:
    """One page of a Vertex AI list answer: `offset_page` of `items` under `key` (left out when
    the page is empty), `size` a page when `query` names none. Returns the answer; raises
    ServiceError(400) on a page token or size that is no number."""
    try:
        return offset_page(items, query, key, size=size, omit_empty=True)
    except ValueError as exc:
        raise ServiceError(400, str(exc)) from None


def labels_filter(text: str) -> Callable[[dict[str, Any]], bool]:
    """The filter a jobs list takes: `labels.k="v"` and `labels.k:*` (has the label) terms
    joined by AND. `text` is the request's filter ("" keeps all). Returns keep(resource) -> bool;
    raises ServiceError(400) on any other term."""
    terms = []
    for part in filter(None, re.split(r"\s+AND\s+", text.strip())):
        m = _LABEL_TERM.match(part)
        value = m["value"].strip('"') if m else ""
        if not m or (m["op"] == ":" and value != "*"):
            raise ServiceError(400, f"Unsupported filter: {text!r}.")
        terms.append((m["key"], None if m["op"] == ":" else value))

    def keep(resource: dict[str, Any]) -> bool:
        labels = resource.get("labels") or {}
        return all((k in labels) if v is None else labels.get(k) == v for k, v in terms)

    return keep


@dataclass
class _Operation:
    name: str
    response: dict[str, Any]
    error: dict[str, Any] | None = None
    polls_left: int = 1
    metadata_type: str = ""
    on_done: Callable[[], None] | None = None  # applied when the operation completes

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.metadata_type:
            out["metadata"] = {"@type": self.metadata_type, "genericMetadata": {}}
        if self.polls_left <= 0:
            out["done"] = True
            if self.error:
                out["error"] = self.error
            else:
                out["response"] = self.response
        return out


@dataclass
class ModelState:
    """Models (each a list of versions), endpoints and operations of the fake."""

    models: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # model name -> versions
    endpoints: dict[str, dict[str, Any]] = field(default_factory=dict)  # endpoint name -> Endpoint
    operations: dict[str, _Operation] = field(default_factory=dict)
    operation_errors: dict[str, dict[str, Any]] = field(default_factory=dict)  # op kind -> error to end with


class ModelService:
    """The routes above over one `ModelState`; FakeVertex calls `route()` then the handler."""

    def __init__(self, lock: threading.RLock):
        self.state = ModelState()
        self._lock = lock
        self._ids = itertools.count(4_000_000_000_000_000_001)
        self._op_ids = itertools.count(8_000_000_000_000_000_001)
        self._deployed_ids = itertools.count(2_000_000_000_000_000_001)
        # The hook that serves predictions (FakeVertex(predictor=...)): `deployed(endpoint,
        # deployed_model, model)` when a deployModel completes, `undeployed(endpoint,
        # deployed_model_id)` when an undeployModel does, `predict(endpoint, deployed_model,
        # model, body) -> (status, payload)` per request; `model` is the Model version.
        self.predictor: Any = None

    # -- routing -------------------------------------------------------------------------------
    def route(
        self, method: str, path: str
    ) -> tuple[str, Callable[[dict[str, Any], Any], dict[str, Any]]] | None:
        """(op, call(query, body)) for a request to one of the routes above, else None."""
        return route(self, _ROUTES, method, path, handler_of=lambda op: "_" + op.replace("-", "_"))

    # -- test controls -------------------------------------------------------------------------
    def fail_operation(self, kind: str, message: str, code: int = 13) -> None:
        """The next `kind` operation ("upload", "deploy", "undeploy", "endpoint-create") ends with
        an error."""
        with self._lock:
            self.state.operation_errors[kind] = {"code": code, "message": message}

    def versions(self, model: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(v) for v in self.state.models.get(model, [])]

    # -- operations ----------------------------------------------------------------------------
    def _start(
        self,
        kind: str,
        resource: str,
        response: dict[str, Any],
        metadata_type: str,
        on_done: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        name = f"{resource}/operations/{next(self._op_ids)}"
        error = self.state.operation_errors.pop(kind, None)
        op = _Operation(
            name, response, error, metadata_type=metadata_type, on_done=on_done if error is None else None
        )
        self.state.operations[name] = op
        return op.view()

    def _operation(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            op = self.state.operations.get(name)
            if op is None:
                raise ServiceError(404, f'Operation "{name}" not found.')
            if op.polls_left > 0:
                op.polls_left -= 1
                if op.polls_left == 0 and op.on_done:
                    op.on_done()
            return op.view()

    def _operation_list(self, resource: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            found = [
                op.view()
                for name, op in self.state.operations.items()
                if name.startswith(resource + "/operations/")
            ]
        return {"operations": found} if found else {}

    # -- models --------------------------------------------------------------------------------
    def _upload(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        request = _parse(
            "UploadModelRequest", {**(body or {}), "parent": parent} if isinstance(body, dict) else body
        )
        model = request.get("model") or {}
        if not model.get("displayName"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: model.display_name; Message: Required field is not set.\t",
            )
        if not (model.get("containerSpec") or {}).get("imageUri"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: model.container_spec.image_uri; "
                "Message: Required field is not set.\t",
            )
        with self._lock:
            parent_model = request.get("parentModel")
            if parent_model:
                if parent_model not in self.state.models:
                    raise ServiceError(404, f'The Model "{parent_model}" does not exist.')
                name = parent_model
                version = str(len(self.state.models[name]) + 1)
            else:
                model_id = request.get("modelId") or str(next(self._ids))
                name = f"{parent}/models/{model_id}"
                if name in self.state.models:
                    raise ServiceError(409, f'Model "{name}" already exists.')
                version = "1"
            now = _now()
            stored = {
                **model,
                "name": name,
                "versionId": version,
                "createTime": now,
                "updateTime": now,
                "versionCreateTime": now,
                "versionUpdateTime": now,
                "versionAliases": ["default"] if version == "1" else [],
            }
            stored.pop("deployedModels", None)
            self.state.models.setdefault(name, []).append(stored)
            return self._start(
                "upload",
                name,
                {
                    "@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse",
                    "model": name,
                    "modelVersionId": version,
                },
                "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelOperationMetadata",
            )

    def _model_list(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        keep = _filter(query.get("filter", ""))
        with self._lock:
            found = [
                self._default(versions)
                for name, versions in self.state.models.items()
                if name.startswith(parent + "/")
            ]
        found = [m for m in found if keep(m)]
        return {"models": found} if found else {}

    def _model_versions(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        keep = _filter(query.get("filter", ""))
        with self._lock:
            if name not in self.state.models:
                raise ServiceError(404, f'The Model "{name}" does not exist.')
            found = [dict(v) for v in self.state.models[name] if keep(v)]
        return {"models": found} if found else {}

    def _model_get(self, ref: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        name, _, version = ref.partition("@")
        with self._lock:
            versions = self.state.models.get(name)
            if not versions:
                raise ServiceError(404, f'The Model "{ref}" does not exist.')
            if not version:
                return self._default(versions)
            for v in versions:
                if v["versionId"] == version or version in v.get("versionAliases", []):
                    return dict(v)
        raise ServiceError(404, f'The Model "{ref}" does not exist.')

    @staticmethod
    def _default(versions: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(next((v for v in versions if "default" in v.get("versionAliases", [])), versions[0]))

    # -- endpoints -----------------------------------------------------------------------------
    def _endpoint_create(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        endpoint = _parse("Endpoint", body)
        if not endpoint.get("displayName"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: endpoint.display_name; Message: "
                "Required field is not set.\t",
            )
        # The rule is for client-chosen ids; the service's own are long numbers.
        endpoint_id = query.get("endpointId") or str(next(self._ids))
        if query.get("endpointId") and not _ENDPOINT_ID.match(endpoint_id):
            raise ServiceError(400, f"Invalid endpoint_id: {endpoint_id!r}.")
        with self._lock:
            name = f"{parent}/endpoints/{endpoint_id}"
            if name in self.state.endpoints:
                raise ServiceError(409, f'Endpoint "{name}" already exists.')
            now = _now()
            stored = {**endpoint, "name": name, "createTime": now, "updateTime": now}
            stored.pop("deployedModels", None)
            stored.pop("trafficSplit", None)
            self.state.endpoints[name] = stored
            return self._start(
                "endpoint-create",
                name,
                {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.Endpoint", **stored},
                "type.googleapis.com/google.cloud.aiplatform.v1.CreateEndpointOperationMetadata",
            )

    def _endpoint_list(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        keep = _filter(query.get("filter", ""))
        with self._lock:
            found = [
                dict(e) for n, e in self.state.endpoints.items() if n.startswith(parent + "/") and keep(e)
            ]
        return {"endpoints": found} if found else {}

    def _endpoint_get(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            endpoint = self.state.endpoints.get(name)
            if endpoint is None:
                raise ServiceError(404, f'The Endpoint "{name}" does not exist.')
            return dict(endpoint)

    def _deploy(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        request = _parse(
            "DeployModelRequest", {**(body or {}), "endpoint": name} if isinstance(body, dict) else body
        )
        deployed = request.get("deployedModel") or {}
        with self._lock:
            endpoint = self.state.endpoints.get(name)
            if endpoint is None:
                raise ServiceError(404, f'The Endpoint "{name}" does not exist.')
            model_ref = deployed.get("model", "")
            model_name, _, version = model_ref.partition("@")
            versions = self.state.models.get(model_name)
            if not versions:
                raise ServiceError(404, f'The Model "{model_ref}" does not exist.')
            version = version or self._default(versions)["versionId"]
            if not any(v["versionId"] == version for v in versions):
                raise ServiceError(404, f'The Model "{model_ref}" does not exist.')
            resources = deployed.get("dedicatedResources") or {}
            if not (resources.get("machineSpec") or {}).get("machineType"):
                raise ServiceError(
                    400,
                    "List of found errors:\t1.Field: deployed_model.dedicated_"
                    "resources.machine_spec.machine_type; Message: Required field "
                    "is not set.\t",
                )
            current = {d["id"] for d in endpoint.get("deployedModels", [])}
            split = {k: int(v) for k, v in (request.get("trafficSplit") or {}).items()}
            if split:
                unknown = set(split) - current - {"0"}
                if unknown or sum(split.values()) != 100:
                    raise ServiceError(
                        400,
                        f"Invalid traffic split {split}: the percentages must "
                        "add up to 100 and name deployed models (0 for this one).",
                    )
            deployed_id = str(next(self._deployed_ids))
            now = _now()
            entry = {
                **deployed,
                "id": deployed_id,
                "model": model_name,
                "modelVersionId": version,
                "createTime": now,
            }

            model_version = next(v for v in versions if v["versionId"] == version)

            def done() -> None:
                endpoint.setdefault("deployedModels", []).append(entry)
                new_split = (
                    {(deployed_id if k == "0" else k): v for k, v in split.items()}
                    if split
                    else {deployed_id: 100}
                )
                endpoint["trafficSplit"] = {k: v for k, v in new_split.items() if v}
                endpoint["updateTime"] = _now()
                if self.predictor is not None:
                    self.predictor.deployed(name, dict(entry), dict(model_version))

            return self._start(
                "deploy",
                name,
                {
                    "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeployModelResponse",
                    "deployedModel": entry,
                },
                "type.googleapis.com/google.cloud.aiplatform.v1.DeployModelOperationMetadata",
                on_done=done,
            )

    def _undeploy(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        request = _parse(
            "UndeployModelRequest", {**(body or {}), "endpoint": name} if isinstance(body, dict) else body
        )
        deployed_id = str(request.get("deployedModelId") or "")
        if not deployed_id:
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: deployed_model_id; Message: Required field is not set.\t",
            )
        with self._lock:
            endpoint = self.state.endpoints.get(name)
            if endpoint is None:
                raise ServiceError(404, f'The Endpoint "{name}" does not exist.')
            deployed = endpoint.get("deployedModels", [])
            if not any(d["id"] == deployed_id for d in deployed):
                raise ServiceError(404, f'DeployedModel "{deployed_id}" does not exist in Endpoint "{name}".')
            current = {k: int(v) for k, v in (endpoint.get("trafficSplit") or {}).items()}
            # An empty map is no map in proto3: the split is "given" only when it names someone.
            split = {k: int(v) for k, v in (request.get("trafficSplit") or {}).items()}
            given = bool(split)
            remaining = [d["id"] for d in deployed if d["id"] != deployed_id]
            if given and remaining:
                unknown = sorted(set(split) - {d["id"] for d in deployed})
                if unknown:
                    raise ServiceError(
                        400, f"The following DeployedModel ID(s) [{', '.join(unknown)}] do not exist."
                    )
                if split.get(deployed_id, 0) or sum(split.values()) != 100:
                    raise ServiceError(
                        400,
                        f"Invalid traffic split {split}: the percentages must add up to 100 and give "
                        f"none to the DeployedModel being undeployed ({deployed_id}).",
                    )
            elif remaining and current.get(deployed_id, 0) > 0:
                raise ServiceError(
                    400,
                    f"DeployedModel {deployed_id} has {current[deployed_id]}% of the traffic of "
                    f"Endpoint {name}; undeploying it needs a traffic_split that assigns that "
                    "traffic to the remaining DeployedModels.",
                )

            def done() -> None:
                endpoint["deployedModels"] = [
                    d for d in endpoint.get("deployedModels", []) if d["id"] != deployed_id
                ]
                left = {d["id"] for d in endpoint["deployedModels"]}
                after = split if given else current
                endpoint["trafficSplit"] = {k: v for k, v in after.items() if v and k in left}
                if not endpoint["deployedModels"]:
                    endpoint.pop("deployedModels")
                    endpoint.pop("trafficSplit")
                endpoint["updateTime"] = _now()
                if self.predictor is not None and hasattr(self.predictor, "undeployed"):
                    self.predictor.undeployed(name, deployed_id)

            return self._start(
                "undeploy",
                name,
                {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.UndeployModelResponse"},
                "type.googleapis.com/google.cloud.aiplatform.v1.UndeployModelOperationMetadata",
                on_done=done,
            )

    # -- predictions -----------------------------------------------------------------------------
    def _predict(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("instances"), list):
            raise ServiceError(400, 'Invalid JSON payload received: "instances" must be a list.')
        with self._lock:
            endpoint = self.state.endpoints.get(name)
            if endpoint is None:
                raise ServiceError(404, f'The Endpoint "{name}" does not exist.')
            split = endpoint.get("trafficSplit") or {}
            serving = [d for d in endpoint.get("deployedModels", []) if split.get(d["id"], 0) > 0]
            if not serving:
                raise ServiceError(400, f'The Endpoint "{name}" has no deployed model taking traffic.')
            deployed = random.choices(serving, weights=[split[d["id"]] for d in serving])[0]
            model = next(
                v
                for v in self.state.models[deployed["model"]]
                if v["versionId"] == deployed["modelVersionId"]
            )
        if self.predictor is None:
            raise ServiceError(
                501, "This fake Vertex AI serves no predictions; `vertex-trainer dev sandbox` does."
            )
        # Outside the lock: the model may take a while (loading, a large batch).
        status, payload = self.predictor.predict(name, dict(deployed), dict(model), body)
        if status != 200:
            message = payload.get("error") if isinstance(payload, dict) else None
            raise ServiceError(status, str(message or payload))
        return {
            **payload,
            "deployedModelId": deployed["id"],
            "model": deployed["model"],
            "modelDisplayName": model.get("displayName", ""),
            "modelVersionId": deployed["modelVersionId"],
        }
