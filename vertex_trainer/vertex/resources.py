"""Vertex AI persistent resources (docs/contract.md section 11): machines held for training jobs.

REST (aiplatform v1, `projects.locations.persistentResources`): create (`?persistentResourceId=ID`,
an Operation), get, list (the one pager), delete (an Operation). A create is idempotent by id:
the resource is read first, and a 409 ALREADY_EXISTS after an answer that was lost adopts it.
The operations are followed to their end (gcp/lro.py).

The service's answer is parsed once, by `PersistentResource.of`, into a frozen record (its name,
region, state and pools, each pool's machine, accelerators, boot disk and replica counts); the
REST fields it reads are `WIRE` and `POOL_WIRE` (tests check them against
google.cloud.aiplatform_v1.PersistentResource and ResourcePool).

`fit_problems(resource, pools)` is what a submit checks before a job is sent to a resource: it is
RUNNING, and each machine shape of the job (machine spec and boot disk) has a pool whose
replica count covers every replica of the job on that shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from vertex_trainer.errors import UserError
from vertex_trainer.gcp.http import ApiError, Transient
from vertex_trainer.gcp.lro import wait_operation
from vertex_trainer.regions import region_of
from vertex_trainer.vertex.service import CollectionClient

if TYPE_CHECKING:  # the spec's models, named for the type checker (a client needs no pydantic)
    from vertex_trainer.spec import JobSpec

ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")

# The record's fields -> where the REST JSON (camelCase) holds them.
WIRE: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "state": ("state",),
    "pools": ("resourcePools",),
}
POOL_WIRE: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "machine_type": ("machineSpec", "machineType"),
    "accelerator_type": ("machineSpec", "acceleratorType"),
    "accelerator_count": ("machineSpec", "acceleratorCount"),
    "tpu_topology": ("machineSpec", "tpuTopology"),
    "boot_disk_type": ("diskSpec", "bootDiskType"),
    "boot_disk_size_gb": ("diskSpec", "bootDiskSizeGb"),
    "replica_count": ("replicaCount",),
    "max_replica_count": ("autoscalingSpec", "maxReplicaCount"),
}


def _at(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = data
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _int(value: Any, default: int = 0) -> int:
    """An int64 field (JSON: a string); one left out (proto3: 0, or a default of the service's)
    is `default`."""
    try:
        return int(value) if value else default
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class ResourcePool:
    """One pool of machines of one shape: a PersistentResource's resourcePool, or a job's
    workerPoolSpec read the same way (both hold machineSpec, diskSpec and replicaCount)."""

    id: str
    machine_type: str
    accelerator_type: str
    accelerator_count: int
    tpu_topology: str
    boot_disk_type: str
    boot_disk_size_gb: int
    replica_count: int
    max_replica_count: int | None = None  # autoscalingSpec.maxReplicaCount

    @classmethod
    def of(cls, pool: Mapping[str, Any]) -> ResourcePool:
        """The pool `pool` (REST JSON) parsed; a boot disk not given is Vertex AI's default
        (pd-ssd, 100 GB)."""
        w = POOL_WIRE
        top = _at(pool, w["max_replica_count"])
        return cls(
            id=str(_at(pool, w["id"]) or "?"),
            machine_type=str(_at(pool, w["machine_type"]) or ""),
            accelerator_type=str(_at(pool, w["accelerator_type"]) or ""),
            accelerator_count=_int(_at(pool, w["accelerator_count"])),
            tpu_topology=str(_at(pool, w["tpu_topology"]) or ""),
            boot_disk_type=str(_at(pool, w["boot_disk_type"]) or "pd-ssd"),
            boot_disk_size_gb=_int(_at(pool, w["boot_disk_size_gb"]), 100),
            replica_count=_int(_at(pool, w["replica_count"])),
            max_replica_count=_int(top) if top else None,
        )

    @property
    def replicas(self) -> int:
        """How many replicas the pool can hold (an autoscaling pool: its maximum)."""
        return self.max_replica_count or self.replica_count

    @property
    def shape(self) -> tuple[str, str, int, str, str, int]:
        """What must match between a job's pool and a resource's: the machine, its accelerators
        and topology, and the boot disk."""
        return (
            self.machine_type,
            self.accelerator_type,
            self.accelerator_count,
            self.tpu_topology,
            self.boot_disk_type,
            self.boot_disk_size_gb,
        )

    def describe(self) -> str:
        """'a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas'."""
        return f"{_describe_key(self.shape)}, {self.replicas} replica{'s' * (self.replicas != 1)}"


@dataclass(frozen=True)
class PersistentResource:
    """A PersistentResource as the service answered it, parsed once (see the module doc).

    Attributes:
        name: projects/P/locations/R/persistentResources/ID ("" when the answer had none).
        region: R of the name (None: the name is not a regional resource name).
        state: RUNNING, PROVISIONING, ERROR ... (STATE_UNSPECIFIED when the answer had none).
        pools: its resource pools, in the answer's order.
        data: the answer itself (REST JSON), for the JSON outputs.
    """

    name: str
    region: str | None
    state: str
    pools: tuple[ResourcePool, ...]
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> PersistentResource:
        """The answer `data` (a PersistentResource's REST JSON), parsed."""
        name = str(_at(data, WIRE["name"]) or "")
        try:
            region: str | None = region_of(name)
        except ValueError:
            region = None
        return cls(
            name=name,
            region=region,
            state=str(_at(data, WIRE["state"]) or "STATE_UNSPECIFIED"),
            pools=tuple(ResourcePool.of(p or {}) for p in _at(data, WIRE["pools"]) or ()),
            data=data,
        )

    @property
    def id(self) -> str:
        """The last part of the name."""
        return self.name.rsplit("/", 1)[-1]

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


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

    def read(self, ref: str) -> PersistentResource:
        """The resource `ref` (an id or a name), parsed (none: UserError, exit 2)."""
        return PersistentResource.of(self.get(self.name_of(ref)))

    def find(self, ref: str) -> PersistentResource | None:
        """The resource `ref` (an id or a name), or None when there is none."""
        response = self.api.call(self.ops["get"], "GET", f"v1/{self.name_of(ref)}", allow=(404,))
        return None if response.status_code == 404 else PersistentResource.of(response.json())

    def create(
        self, body: dict[str, Any], resource_id: str, *, timeout: float | None = None
    ) -> tuple[PersistentResource, bool]:
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
        sent = False
        try:
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
                return self.read(resource_id), True
            sent = True
            wait_operation(
                self.api, response.json(), poll=self.settings.poll, what=self.ops["create"], timeout=timeout
            )
        except KeyboardInterrupt:
            # Ctrl-C once the create may have been sent: its machines come up and bill while it
            # exists, whether or not the command waited for them (docs/contract.md section 11).
            name = self.name_of(resource_id)
            made = "is being created" if sent else "may have been created"
            self.log(
                f"interrupted: the persistent resource {name} {made} in Vertex AI; once up, its "
                f"machines bill while it exists, used or not. The same create again (--id "
                f"{resource_id}) adopts it and shows its state; remove it: vertex-trainer resources "
                f"delete {name}"
            )
            raise
        return self.read(resource_id), False

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


def resource_body(spec: JobSpec, pools: list[dict[str, Any]]) -> dict[str, Any]:
    """The PersistentResource that runs `spec`'s jobs: one resource pool per machine shape of
    its worker pools (render.worker_pools), sized for every replica on it.

    Args: spec: the JobSpec (its name, labels, network, encryption key); pools: its worker pools.
    Returns: the PersistentResource REST body."""
    shapes: dict[tuple[Any, ...], dict[str, Any]] = {}
    for pool in pools:
        key = ResourcePool.of(pool).shape
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


def fit_problems(resource: PersistentResource, pools: list[dict[str, Any]]) -> str | None:
    """Why `resource` cannot run a job with worker `pools`, or None when it can.

    Args: resource: the PersistentResource (`PersistentResource.of`); pools: the job's
    workerPoolSpecs.
    Returns: one sentence naming the mismatch (the state, or the shape and what the pools hold)."""
    if not resource.running:
        return f"is {resource.state}, not RUNNING (a job runs only on a RUNNING persistent resource)"
    needed: dict[tuple[Any, ...], int] = {}
    for pool in pools:
        shape = ResourcePool.of(pool).shape
        needed[shape] = needed.get(shape, 0) + _int(pool.get("replicaCount"), 1)
    for key, count in needed.items():
        match = [p for p in resource.pools if p.shape == key]
        if not match:
            have = "; ".join(f"{p.id}: {p.describe()}" for p in resource.pools) or "none"
            return (
                f"has no pool of {_describe_key(key)} (the job's machine and boot disk must match "
                f"a pool exactly); its pools: {have}"
            )
        capacity = max(p.replicas for p in match)
        if capacity < count:
            return (
                f"pool {match[0].id} ({_describe_key(key)}) holds {capacity} "
                f"replica{'s' * (capacity != 1)}, the job needs {count}"
            )
    return None


def describe_pool(pool: Mapping[str, Any]) -> str:
    """'a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB, 2 replicas' (a pool's REST JSON)."""
    return ResourcePool.of(pool).describe()


def _describe_key(key: tuple[Any, ...]) -> str:
    machine, accelerator, count, topology, disk, size = key
    text = machine + (f" ({count} x {accelerator})" if accelerator else "")
    text += f", topology {topology}" if topology else ""
    return f"{text}, {disk} {size} GB"
