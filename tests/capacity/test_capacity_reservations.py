"""Reservations, persistent resources and web access in the spec and the rendered job (docs/contract.md
section 11): every field checked against the real aiplatform_v1 types, and the combinations the
service refuses refused at validate time (exit 2, naming what to change)."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import SPEC
from vertex_trainer import render
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.attempts import attempts

RESERVATION = "projects/test-project/zones/us-central1-a/reservations/h100-pool"


def spec(scheduling=None, **top):
    data = json.loads(json.dumps(SPEC))
    data["scheduling"] = scheduling or {"strategy": "standard"}
    return {**data, **top}


def parsed(body: dict) -> dict:
    """The body as the service reads it: parsed strictly by aiplatform_v1.CustomJob."""
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    message = json_format.ParseDict(body, CustomJob.pb(CustomJob()))
    return json_format.MessageToDict(message)


def test_a_specific_reservation_goes_on_every_pool_and_any_too():
    job = build_spec(spec({"strategy": "standard", "reservation": RESERVATION}, replicas=2))
    body = parsed(render.custom_job(job))
    pools = body["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 2 and all(
        p["machineSpec"]["reservationAffinity"]
        == {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [RESERVATION],
        }
        for p in pools
    )
    anywhere = build_spec(spec({"strategy": "standard", "reservation": "any"}))
    affinity = parsed(render.custom_job(anywhere))["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    assert affinity["reservationAffinity"] == {"reservationAffinityType": "ANY_RESERVATION"}
    assert (
        "reservationAffinity"
        not in render.custom_job(build_spec(spec()))["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    )


def test_persistent_resource_and_web_access_reach_the_job_spec():
    job = build_spec(
        spec(
            persistent_resource="projects/test-project/locations/us-central1/persistentResources/team-h100",
            enable_web_access=True,
            enable_dashboard_access=True,
        )
    )
    body = parsed(render.custom_job(job))["jobSpec"]
    assert body["persistentResourceId"] == "team-h100"
    assert body["enableWebAccess"] is True and body["enableDashboardAccess"] is True
    plain = render.custom_job(build_spec(spec()))["jobSpec"]
    assert not {"persistentResourceId", "enableWebAccess", "enableDashboardAccess"} & set(plain)


def test_each_fallback_entry_renders_its_own_hardware_strategy_and_reservation():
    job = build_spec(
        spec(
            {
                "strategy": "standard",
                "reservation": RESERVATION,
                "fallback": [
                    {"strategy": "spot", "reservation": "none"},
                    {
                        "strategy": "standard",
                        "region": "europe-west4",
                        "hardware": "a100-80gbx8",
                        "reservation": "any",
                    },
                ],
            }
        )
    )
    plan = attempts(job)
    assert [(a.n, a.region, a.strategy, a.hardware_name, a.reservation) for a in plan] == [
        (1, "us-central1", "standard", "h100x8", RESERVATION),
        (2, "us-central1", "spot", "h100x8", None),
        (3, "europe-west4", "standard", "a100-80gbx8", "any"),
    ]
    third = parsed(render.custom_job(job, idempotency_key="k", attempt=3))["jobSpec"]
    machine = third["workerPoolSpecs"][0]["machineSpec"]
    assert machine["machineType"] == "a2-ultragpu-8g" and machine["acceleratorType"] == "NVIDIA_A100_80GB"
    assert machine["reservationAffinity"]["reservationAffinityType"] == "ANY_RESERVATION"
    second = render.custom_job(job, idempotency_key="k", attempt=2)["jobSpec"]
    assert second["scheduling"]["strategy"] == "SPOT"
    assert "reservationAffinity" not in second["workerPoolSpecs"][0]["machineSpec"]


@pytest.mark.parametrize(
    "data,field,fragment",
    [
        # Flex Start and Spot do not consume reservations (spec/rules.py cites the sources).
        (
            spec({"strategy": "flex-start", "max_wait": "1h", "reservation": RESERVATION}),
            "scheduling.reservation",
            "Flex Start (Dynamic Workload Scheduler) does not consume reservations",
        ),
        (
            spec({"strategy": "standard", "reservation": RESERVATION, "fallback": ["spot"]}),
            "scheduling.fallback[0]",
            "reservation: none",
        ),
        # The reservation's zone must lie in the attempt's region.
        (
            spec({"strategy": "standard", "reservation": "projects/p/zones/us-east5-a/reservations/r"}),
            "scheduling.reservation",
            "zone us-east5-a, outside the attempt's region us-central1",
        ),
        (
            spec(
                {
                    "strategy": "standard",
                    "reservation": RESERVATION,
                    "fallback": [{"region": "europe-west4", "hardware": "a100-80gbx8"}],
                }
            ),
            "scheduling.fallback[0]",
            "outside the attempt's region europe-west4",
        ),
        (spec({"strategy": "standard", "reservation": "h100-pool"}), "scheduling.reservation", "h100-pool"),
        (
            spec({"strategy": "standard", "reservation": RESERVATION}, persistent_resource="team-h100"),
            "scheduling.reservation",
            "persistent_resource",
        ),
        (
            spec(persistent_resource="projects/p/locations/europe-west4/persistentResources/team"),
            "persistent_resource",
            "the persistent resource is in europe-west4, the job in us-central1",
        ),
        (
            spec({"strategy": "standard", "fallback": [{"region": "us-east5"}]}, persistent_resource="team"),
            "scheduling.fallback[0]",
            "persistent_resource",
        ),
        (
            spec({"strategy": "standard", "fallback": [{"region": "us-central1"}]}),
            "scheduling.fallback[0]",
            "the same attempt as attempt 1",
        ),
    ],
)
def test_combinations_the_service_refuses_are_exit_2_first(data, field, fragment):
    with pytest.raises(SpecError) as err:
        build_spec(data)
    assert err.value.exit_code == 2
    assert err.value.field == field and fragment in str(err.value), str(err.value)


def test_render_json_shows_affinity_in_every_pool_the_resource_and_web_access(run_cli, spec_file):
    path = spec_file(
        scheduling={"strategy": "standard", "reservation": RESERVATION},
        replicas=2,
        persistent_resource="team-h100",
        enable_web_access=True,
    )
    result = run_cli("render", path, "--format", "json")
    # A reservation and a persistent resource together is refused: render the two apart.
    assert result.returncode == 2 and "persistent_resource" in result.stderr
    reserved = run_cli(
        "render",
        spec_file(
            scheduling={"strategy": "standard", "reservation": RESERVATION},
            replicas=2,
            enable_web_access=True,
        ),
        "--format",
        "json",
    )
    assert reserved.returncode == 0, reserved.stderr
    body = json.loads(reserved.stdout)
    assert [
        p["machineSpec"]["reservationAffinity"]["values"] for p in body["jobSpec"]["workerPoolSpecs"]
    ] == [[RESERVATION], [RESERVATION]]
    assert body["jobSpec"]["enableWebAccess"] is True
    on_resource = run_cli(
        "render",
        spec_file(persistent_resource="team-h100", replicas=2, scheduling={"strategy": "standard"}),
        "--format",
        "json",
    )
    assert on_resource.returncode == 0, on_resource.stderr
    assert json.loads(on_resource.stdout)["jobSpec"]["persistentResourceId"] == "team-h100"


def test_the_persistent_resource_body_is_a_real_persistent_resource():
    from google.cloud.aiplatform_v1 import PersistentResource
    from google.protobuf import json_format

    from vertex_trainer import api

    job = build_spec(
        spec({"strategy": "standard", "reservation": RESERVATION}, replicas=2, labels={"team": "vision"})
    )
    body = api.resource_request(job)
    message = json_format.ParseDict(body, PersistentResource.pb(PersistentResource()))
    (pool,) = json_format.MessageToDict(message)["resourcePools"]  # chief + worker: one shape
    assert pool["replicaCount"] == "2" and pool["machineSpec"]["machineType"] == "a3-highgpu-8g"
    assert "reservationAffinity" not in pool["machineSpec"]  # the resource holds the VMs
    assert body["labels"] == {"team": "vision"} and body["displayName"] == job.name


@pytest.mark.parametrize(
    "entry,top,fragment",
    [
        (
            {"strategy": "standard", "hardware": "b200x8"},
            {"boot_disk": {"type": "pd-ssd"}},
            "a4-highgpu-8g boots only from hyperdisk-balanced",
        ),
        (
            {"strategy": "standard", "hardware": "a100x16"},
            {"trainer": {**SPEC["trainer"], "batch_size": 24}},
            "a100x16 has 16 GPUs (one data-parallel replica each)",
        ),
    ],
)
def test_a_fallback_entrys_own_hardware_is_checked_against_the_rest_of_the_spec(entry, top, fragment):
    with pytest.raises(SpecError) as err:
        build_spec({**spec({"strategy": "standard", "fallback": [entry]}), **top})
    assert err.value.field == "scheduling.fallback[0].hardware" and fragment in str(err.value)
    # Without boot_disk.type, each attempt's machine boots from its own default disk.
    ok = build_spec(spec({"strategy": "standard", "fallback": [{"hardware": "b200x8"}]}))
    disk = render.custom_job(ok, idempotency_key="k", attempt=2)["jobSpec"]["workerPoolSpecs"][0]["diskSpec"]
    assert disk["bootDiskType"] == "hyperdisk-balanced"
