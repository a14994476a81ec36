"""Vertex AI persistent resources (docs/contract.md section 11): machines held for training jobs.

REST (aiplatform v1, `projects.locations.persistentResources`): create (`?persistentResourceId=ID`,
an Operation), get, list (the one pager), delete (an Operation). A create is idempotent by id:
the resource is read first, and a 409 ALREADY_EXISTS after an answer that was lost adopts it.
The operations are followed to their end (gcp/lro.py).

`fit_problems(resource, pools)` is what a submit checks before a job is sent to a resource: it is
RUNNING, and each machine shape of the job (machine spec and boot disk) has a pool whose
replica count covers every replica of the job on that shape.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from vertex_trainer.errors import UserError
from vertex_trainer.gcp.http import ApiError, Transient
from vertex_trainer.gcp.lro import wait_operation
from vertex_trainer.vertex.service import CollectionClient

ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_SHAPE = ("machineType", "acceleratorType", "acceleratorCount", "tpuTopology")


class ResourcesClient(CollectionClient):
    """The persistentResources collection of one project and region."""

    collection = "persistentResources"
    ops: ClassVar[dict[str, str]] = {
        "get": "get persistent resource",
        "cancel": "cancel",
        "list": "list persistent resources",
        "create": "create persistent resource",
        "delete": "delete persistent resource",
    }
    retry_hint = (
        "the Vertex AI API is unreachable or overloaded; run the same command again "
        "later (a create with the same --id adopts the resource, never makes two)"
    )

    def name_of(self, ref: str) -> str:
        """The resource name of an id, or a full name as given."""
        return ref if ref.startswith("projects/") else super().name_of(ref)

    def find(self, ref: str) -> dict[str, Any] | None:
        """The resource `ref` (an id or a name), or None when there is none."""
        response = self.api.call(self.ops["get"], "GET", f"v1/{self.name_of(ref)}", allow=(404,))
        return None if response.status_code == 404 else response.json()

    def create(
        self, body: dict[str, Any], resource_id: str, *, timeout: float | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Create the resource `resource_id` from `body` at most once and follow the operation.

        Args: body: a PersistentResource (REST JSON); resource_id: its id; timeout: seconds to
        wait for the operation (None: until it ends).
        Returns: (the resource as it is now, adopted: True when it existed already)."""
        check_id(resource_id)
        existing = self.find(resource_id)
        if existing is not None:
            return existing, True
        path = f"v1/{self.parent}/{self.collection}"
        budget = self.api.budget()
        while True:
            try:
                response = self.api.send(
                    self.ops["create"],
                    "POST",
                    path,
                    allow=(409,),
                    params={"persistentResourceId": resource_id},
                    json=body,
                )
                break
            except Transient as exc:  # committed or not: look before sending again
                existing = self.find(resource_id)
                if existing is not None:
                    return existing, True
                budget.backoff(self.ops["create"], str(exc), retry_hint=self.retry_hint)
        if response.status_code == 409:
            return self.get(self.name_of(resource_id)), True
        wait_operation(
            self.api, response.json(), poll=self.settings.poll, what=self.ops["create"], timeout=timeout
        )
        return self.get(self.name_of(resource_id)), False

    def delete(self, ref: str, *, timeout: float | None = None) -> bool:
        """Delete the resource `ref` and follow the operation; False when there was none."""
        response = self.api.call(self.ops["delete"], "DELETE", f"v1/{self.name_of(ref)}", allow=(404,))
        if response.status_code == 404:
            return False
        wait_operation(
            self.api, response.json(), poll=self.settings.poll, what=self.ops["delete"], timeout=timeout
        )
        return True

    def _user_error(self, op: str, err: ApiError) -> bool:
        return err.code in (400, 404) and op != self.ops["list"]

    def _hint(self, op: str, err: ApiError) -> str | None:
        if err.code == 404:
            return (
                f"no such persistent resource in project {self.project}, region {self.region}: "
                "vertex-trainer resources list; create one with vertex-trainer resources create SPEC"
            )
        return None


def check_id(resource_id: str) -> str:
    """A persistent resource id: 1-63 lowercase letters, digits and '-', starting with a letter."""
    if not ID.match(resource_id or ""):
        raise UserError(
            f"--id {resource_id!r} is not a persistent resource id",
            hint="1-63 lowercase letters, digits and '-', starting with a letter, e.g. team-h100",
        )
    return resource_id


def resource_body(spec: Any, pools: list[dict[str, Any]]) -> dict[str, Any]:
    """The PersistentResource that runs `spec`'s jobs: one resource pool per machine shape of
    its worker pools (render.worker_pools), sized for every replica on it.

    Args: spec: the JobSpec (its name, labels, network, encryption key); pools: its worker pools.
    Returns: the PersistentResource REST body."""
    shapes: dict[tuple[Any, ...], dict[str, Any]] = {}
    for pool in pools:
        key = _shape_key(pool)
        if key in shapes:
            shapes[key]["replicaCount"] = str(int(shapes[key]["replicaCount"]) + int(pool["replicaCount"]))
        else:
            machine = {k: v for k, v in pool["machineSpec"].items() if k != "reservationAffinity"}
            shapes[key] = {
                "id": f"pool-{len(shapes)}",
                "machineSpec": machine,
                "diskSpec": dict(pool["diskSpec"]),
                "replicaCount": str(pool["replicaCount"]),
            }
    body: dict[str, Any] = {"displayName": spec.name, "resourcePools": list(shapes.values())}
    if spec.labels:
        body["labels"] = dict(spec.labels)
    if spec.network:
        body["network"] = spec.network
    if spec.encryption_key:
        body["encryptionSpec"] = {"kmsKeyName": spec.encryption_key}
    return body


def fit_problems(resource: dict[str, Any], pools: list[dict[str, Any]]) -> str | None:
    """Why `resource` cannot run a job with worker `pools`, or None when it can.

    Args: resource: a PersistentResource (REST JSON); pools: the job's workerPoolSpecs.
    Returns: one sentence naming the mismatch (the state, or the shape and what the pools hold)."""
    state = str(resource.get("state") or "STATE_UNSPECIFIED")
    if state != "RUNNING":
        return f"is {state}, not RUNNING (a job runs only on a RUNNING persistent resource)"
    needed: dict[tuple[Any, ...], int] = {}
    for pool in pools:
        needed[_shape_key(pool)] = needed.get(_shape_key(pool), 0) + int(pool.get("replicaCount", 1))
    available = resource.get("resourcePools") or []
    for key, count in needed.items():
        match = [p for p in available if _shape_key(p) == key]
        if not match:
            have = "; ".join(f"{p.get('id', '?')}: {describe_pool(p)}" for p in available) or "none"
            return (
                f"has no pool of {_describe_key(key)} (the job's machine and boot disk must match "
                f"a pool exactly); its pools: {have}"
            )
        capacity = max(_replicas(p) for p in match)
        if capacity < count:
            return (
                f"pool {match[0].get('id', '?')} ({_describe_key(key)}) holds {capacity} "
                f"replica{'s' * (capacity != 1)}, the job needs {count}"
            )
    return None


def describe_pool(pool: dict[str, Any]) -> str:
    """'a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas'."""
    replicas = _replicas(pool)
    return f"{_describe_key(_shape_key(pool))}, {replicas} replica{'s' * (replicas != 1)}"


def _replicas(pool: dict[str, Any]) -> int:
    auto = pool.get("autoscalingSpec") or {}
    return int(auto.get("maxReplicaCount") or pool.get("replicaCount") or 0)


def _shape_key(pool: dict[str, Any]) -> tuple[Any, ...]:
    machine = pool.get("machineSpec") or {}
    disk = pool.get("diskSpec") or {}
    shape = tuple(
        str(machine.get(k) or "") if k != "acceleratorCount" else int(machine.get(k) or 0) for k in _SHAPE
    )
    return shape + (str(disk.get("bootDiskType") or "pd-ssd"), int(disk.get("bootDiskSizeGb") or 100))


def _describe_key(key: tuple[Any, ...]) -> str:
    machine, accelerator, count, topology, disk, size = key
    text = machine + (f" ({count} x {accelerator})" if accelerator else "")
    text += f", topology {topology}" if topology else ""
    return f"{text}, {disk} {size} GB"
