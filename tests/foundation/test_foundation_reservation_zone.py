"""The reservation zone parsed once (issue 31): spec/attempts.py reads a reservation name's zone and
a zone's region, and both the region rules and the plan's reservation rules use them."""

from __future__ import annotations

import pytest

from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.attempts import reservation_zone, zone_region
from vertex_trainer.spec.rules import region_problem

NAME = "projects/my-project/zones/{zone}/reservations/r"


@pytest.mark.parametrize(
    "reservation, zone",
    [
        (NAME.format(zone="us-central1-a"), "us-central1-a"),
        (NAME.format(zone="europe-west4-b"), "europe-west4-b"),
        ("any", None),
        (None, None),
        ("projects/p/regions/us-central1/reservations/r", None),
    ],
)
def test_reservation_zone(reservation, zone):
    assert reservation_zone(reservation) == zone


def test_zone_region():
    assert zone_region("us-central1-a") == "us-central1"
    assert zone_region("asia-northeast1-c") == "asia-northeast1"


def test_a_misspelt_zone_keeps_its_letter_in_the_suggestion():
    problem = region_problem("scheduling.reservation", "us-central9-a", kind="zone")
    assert problem is not None and "'us-central1-a'" in (problem.hint or "")
    assert region_problem("scheduling.reservation", "us-central1-a", kind="zone") is None


def _spec(reservation: str, region: str = "us-central1") -> dict:
    return {
        "name": "r",
        "project": "my-project",
        "region": region,
        "hardware": "a100x1",
        "scheduling": {"reservation": reservation},
        "trainer": {"train_data": "gs://my-bucket/train-*", "num_classes": 10},
    }


def test_a_reservation_outside_the_region_names_the_zones_region():
    build_spec(_spec(NAME.format(zone="us-central1-c")))  # in the region: accepted
    with pytest.raises(SpecError) as e:
        build_spec(_spec(NAME.format(zone="europe-west4-b")))
    assert "outside the attempt's region us-central1" in str(e.value)
    assert "run the attempt in europe-west4" in (e.value.hint or "")
