"""The fake Vertex AI persistent resources (REST, v1), mounted in FakeVertex (`fake.resources`):

- ``POST   /v1/{parent}/persistentResources?persistentResourceId=ID``  create -> Operation
- ``GET    /v1/{parent}/persistentResources``                          list (pageSize, pageToken)
- ``GET    /v1/{parent}/persistentResources/ID``                       get
- ``DELETE /v1/{parent}/persistentResources/ID``                       delete -> Operation

Bodies are parsed strictly with ``aiplatform_v1.PersistentResource``. A new resource is
PROVISIONING until its create operation is read done (the operations live in vertex_models.py),
then RUNNING. Jobs that name a `persistentResourceId` are refused unless the resource exists in
their region, is RUNNING and has a pool of their machine type (`check_job`), as the service does.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from vertex_trainer.emulators._http import Collection, collection_routes
from vertex_trainer.emulators.vertex_models import ServiceError, _parse, list_page

_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_OUTPUT_ONLY = ("name", "state", "createTime", "startTime", "updateTime", "error", "resourceRuntime")
_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.{}PersistentResourceOperationMetadata"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ResourceService(Collection):
    """The state and handlers; `operations` (vertex_models.ModelService) runs the operations."""

    ROUTES = collection_routes("persistentResources", "resource", end="delete")

    def __init__(self, lock: Any, operations: Any):
        super().__init__(lock)
        self._operations = operations
        self.resources: dict[str, dict[str, Any]] = {}  # name -> PersistentResource (REST JSON)
        self.page_size = 50

    # -- test controls -------------------------------------------------------------------------
    def add(
        self, parent: str, resource_id: str, body: dict[str, Any], *, state: str = "RUNNING"
    ) -> dict[str, Any]:
        """Store a resource directly (as if made earlier), in `state`."""
        with self._lock:
            data = self._store(parent, resource_id, body)
            data["state"] = state
            return dict(data)

    def set_state(self, name: str, state: str) -> None:
        with self._lock:
            self.resources[name]["state"] = state
            self.resources[name]["updateTime"] = _now()

    # -- jobs on resources (FakeVertex's create asks) ------------------------------------------
    def check_job(self, parent: str, job: dict[str, Any]) -> None:
        """Refuse (400) a CustomJob whose persistentResourceId does not name a RUNNING resource
        of its region with a pool of each of its machine types."""
        spec = job.get("jobSpec") or {}
        resource_id = spec.get("persistentResourceId")
        if not resource_id:
            return
        name = f"{parent}/persistentResources/{resource_id}"
        with self._lock:
            resource = self.resources.get(name)
            if resource is None:
                raise ServiceError(400, f"Persistent resource {name} does not exist.")
            if resource.get("state") != "RUNNING":
                raise ServiceError(
                    400, f"Persistent resource {name} is in state {resource.get('state')}, not RUNNING."
                )
            machines = {
                (p.get("machineSpec") or {}).get("machineType") for p in resource.get("resourcePools", [])
            }
        for pool in spec.get("workerPoolSpecs") or []:
            machine = (pool.get("machineSpec") or {}).get("machineType")
            if machine not in machines:
                raise ServiceError(
                    400, f"No resource pool of persistent resource {name} matches machine type {machine}."
                )

    # -- the service ---------------------------------------------------------------------------
    def _store(self, parent: str, resource_id: str, body: Any) -> dict[str, Any]:
        data = _parse("PersistentResource", body)
        for field in _OUTPUT_ONLY:
            data.pop(field, None)
        if not data.get("resourcePools"):
            raise ServiceError(
                400,
                "List of found errors:\t1.Field: persistent_resource.resource_pools; "
                "Message: Required field is not set.\t",
            )
        for i, pool in enumerate(data["resourcePools"]):
            pool.setdefault("id", f"pool-{i}")
            pool.setdefault("usedReplicaCount", "0")
        name = f"{parent}/persistentResources/{resource_id}"
        now = _now()
        data.update(name=name, state="PROVISIONING", createTime=now, updateTime=now)
        self.resources[name] = data
        return data

    def _create(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        resource_id = query.get("persistentResourceId", "")
        if not _ID.match(resource_id):
            raise ServiceError(
                400, "persistent_resource_id must be 1-63 characters of [a-z0-9-], starting with a letter."
            )
        name = f"{parent}/persistentResources/{resource_id}"
        with self._lock:
            if name in self.resources:
                raise ServiceError(409, f"Persistent resource {name} already exists.")
            data = self._store(parent, resource_id, body)

            def running() -> None:
                data.update(state="RUNNING", startTime=_now(), updateTime=_now())

            created: dict[str, Any] = self._operations._start(
                "resource-create", name, dict(data), _METADATA.format("Create"), on_done=running
            )
            return created

    def _get(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            data = self.resources.get(name)
            if data is None:
                raise ServiceError(404, f'The PersistentResource "{name}" does not exist.')
            return dict(data)

    def _list(self, parent: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            found = [dict(r) for n, r in self.resources.items() if n.startswith(parent + "/")]
        return list_page(found, query, "persistentResources", size=self.page_size)

    def _delete(self, name: str, query: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            data = self.resources.get(name)
            if data is None:
                raise ServiceError(404, f'The PersistentResource "{name}" does not exist.')
            data.update(state="STOPPING", updateTime=_now())

            def gone() -> None:
                self.resources.pop(name, None)

            deleted: dict[str, Any] = self._operations._start(
                "resource-delete", name, {}, _METADATA.format("Delete"), on_done=gone
            )
            return deleted
