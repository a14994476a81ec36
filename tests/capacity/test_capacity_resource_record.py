"""The persistent resource as a typed record (issue 31): the service's answer is parsed once, by
vertex.resources.PersistentResource.of, and the fit check, `check` and `resources create` read the
record. The REST fields it reads are checked against the Vertex AI API's own types
(google.cloud.aiplatform_v1), so a misspelt field cannot parse as "absent" unnoticed."""

from __future__ import annotations

import re

from vertex_trainer.vertex.resources import (
    POOL_WIRE,
    WIRE,
    PersistentResource,
    ResourcePool,
    describe_pool,
    fit_problems,
)

NAME = "projects/p/locations/us-central1/persistentResources/team-h100"
H100 = {"machineType": "a3-highgpu-8g", "acceleratorType": "NVIDIA_H100_80GB", "acceleratorCount": 8}
ANSWER = {
    "name": NAME,
    "displayName": "team",
    "state": "RUNNING",
    "resourcePools": [
        {
            "id": "pool-0",
            "machineSpec": H100,
            "diskSpec": {"bootDiskType": "pd-balanced", "bootDiskSizeGb": 200},
            "replicaCount": "2",  # int64: a string in REST JSON
        },
        {
            "id": "pool-1",
            "machineSpec": {"machineType": "n2-standard-8"},
            "replicaCount": "1",
            "autoscalingSpec": {"minReplicaCount": "1", "maxReplicaCount": "4"},
        },
    ],
}


def test_an_answer_parsed_once_into_the_record():
    r = PersistentResource.of(ANSWER)
    assert (r.name, r.region, r.state, r.id, r.running) == (NAME, "us-central1", "RUNNING", "team-h100", True)
    gpu, cpu = r.pools
    assert gpu == ResourcePool("pool-0", "a3-highgpu-8g", "NVIDIA_H100_80GB", 8, "", "pd-balanced", 200, 2)
    assert (cpu.machine_type, cpu.accelerator_count, cpu.replica_count, cpu.max_replica_count) == (
        "n2-standard-8",
        0,
        1,
        4,
    )
    assert cpu.replicas == 4 and cpu.boot_disk_type == "pd-ssd" and cpu.boot_disk_size_gb == 100  # defaults
    assert gpu.describe() == "a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-balanced 200 GB, 2 replicas"
    assert describe_pool(ANSWER["resourcePools"][1]) == "n2-standard-8, pd-ssd 100 GB, 4 replicas"
    assert r.data is ANSWER


def test_an_answer_without_fields_parses_to_clear_values():
    r = PersistentResource.of({})
    assert (r.name, r.region, r.state, r.pools) == ("", None, "STATE_UNSPECIFIED", ())
    assert fit_problems(r, []) == (
        "is STATE_UNSPECIFIED, not RUNNING (a job runs only on a RUNNING persistent resource)"
    )


def test_the_fit_check_reads_the_record():
    r = PersistentResource.of(ANSWER)
    job = {"machineSpec": H100, "diskSpec": {"bootDiskType": "pd-balanced", "bootDiskSizeGb": 200}}
    assert fit_problems(r, [{**job, "replicaCount": 2}]) is None
    assert fit_problems(r, [{**job, "replicaCount": 3}]) == (
        "pool pool-0 (a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-balanced 200 GB) holds 2 replicas, "
        "the job needs 3"
    )
    other_disk = {**job, "diskSpec": {}, "replicaCount": 1}  # pd-ssd 100 GB: no such pool
    problem = fit_problems(r, [other_disk]) or ""
    assert "has no pool of a3-highgpu-8g (8 x NVIDIA_H100_80GB), pd-ssd 100 GB" in problem
    assert fit_problems(r, [{"machineSpec": {"machineType": "n2-standard-8"}, "replicaCount": 4}]) is None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _field_at(message, path):
    """The proto field that the REST JSON path (camelCase) names, walking nested messages."""
    field = None
    for part in path:
        fields = message.meta.fields
        assert _snake(part) in fields, f"{message.__name__} has no field {part!r} ({sorted(fields)})"
        field = fields[_snake(part)]
        message = field.message
    return field


def test_the_fields_read_are_the_apis_own():
    from google.cloud import aiplatform_v1

    for attr, path in WIRE.items():
        assert _field_at(aiplatform_v1.PersistentResource, path) is not None, attr
    pools = aiplatform_v1.PersistentResource.meta.fields["resource_pools"]
    assert pools.message is aiplatform_v1.ResourcePool and pools.repeated
    for attr, path in POOL_WIRE.items():
        assert _field_at(aiplatform_v1.ResourcePool, path) is not None, attr
    # the state the fit check asks for is one of the API's
    assert "RUNNING" in aiplatform_v1.PersistentResource.State.__members__
    # and the record holds a field for each entry of the wire tables
    assert set(WIRE) <= set(PersistentResource.__dataclass_fields__)
    assert set(POOL_WIRE) == set(ResourcePool.__dataclass_fields__)
