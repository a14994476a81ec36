"""A resource name's region read once (issue 31): vertex_trainer.regions.region_of, used by the spec
rules, the plan rules, `check` and the sandbox instead of a `name.split("/")[3]` in each."""

from __future__ import annotations

import pytest

from vertex_trainer.errors import SpecError
from vertex_trainer.regions import region_of, region_or_none
from vertex_trainer.spec import build_spec


@pytest.mark.parametrize(
    "name, region",
    [
        ("projects/p/locations/us-central1/customJobs/123", "us-central1"),
        ("projects/p/locations/europe-west4/persistentResources/pool-a", "europe-west4"),
        ("projects/p/locations/asia-east1/keyRings/k/cryptoKeys/c", "asia-east1"),
        ("projects/p/locations/us-east1", "us-east1"),
    ],
)
def test_the_region_of_a_resource_name(name, region):
    assert region_of(name) == region


@pytest.mark.parametrize(
    "name",
    [
        "pool-a",  # a short id
        "projects/p/zones/us-central1-a/reservations/r",  # zonal
        "projects/p/global/networks/n",  # global
        "projects/p/locations//customJobs/1",  # no region
        "locations/us-central1/customJobs/1",  # no project
        "",
    ],
)
def test_a_name_without_a_region_is_refused_naming_it_and_the_form(name):
    with pytest.raises(ValueError) as err:
        region_of(name)
    assert repr(name) in str(err.value)
    assert "projects/PROJECT/locations/REGION/..." in str(err.value)
    # Read from a service's answer (a job's cost, the advice on its error), the same name is
    # "region not known", not bad input.
    assert region_or_none(name) is None


def test_a_services_answer_gives_its_region_through_the_same_parse():
    assert region_or_none("projects/123/locations/us-central1/customJobs/456") == "us-central1"


def test_the_spec_rules_read_the_region_of_a_key_in_another_region(base_spec):
    raw = {**base_spec, "encryption_key": "projects/p/locations/europe-west4/keyRings/k/cryptoKeys/c"}
    with pytest.raises(SpecError) as err:
        build_spec(raw)
    assert "the key is in europe-west4, the job in us-central1" in str(err.value)
