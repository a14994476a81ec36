"""A misspelt region, strategy or hardware anywhere in the capacity plan (docs/contract.md section
11) is one message naming the field, the value and the nearest valid choice, exit 2, before
anything is sent: the spec's region, each fallback entry's, a reservation's zone, a persistent
resource's region; through the CLI (validate, submit --dry-run) and the API."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import SPEC
from vertex_trainer import api, regions
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec
from vertex_trainer.suggest import nearest

RESERVATION = "projects/test-project/zones/{zone}/reservations/h100-pool"


def with_scheduling(**scheduling) -> dict:
    data = json.loads(json.dumps(SPEC))
    data["scheduling"].update(scheduling)
    return data


def entry(**fields) -> dict:
    """A spec whose plan is flex-start -> spot -> this mapping entry."""
    return with_scheduling(fallback=["spot", {"strategy": "standard", **fields}])


ON_RESOURCE = {**json.loads(json.dumps(SPEC)), "scheduling": {"strategy": "standard"}}


# (spec, field, value, the one suggestion)
CASES = {
    "fallback-region": (
        entry(region="us-centrl1"),
        "scheduling.fallback[1].region",
        "us-centrl1",
        "us-central1",
    ),
    "fallback-region-digit": (
        entry(region="europe-west9x"),
        "scheduling.fallback[1].region",
        "europe-west9x",
        "europe-west9",
    ),
    "fallback-region-malformed": (
        entry(region="uscentral1"),
        "scheduling.fallback[1].region",
        "uscentral1",
        "us-central1",
    ),
    "spec-region": ({**SPEC, "region": "us-cnetral1"}, "region", "us-cnetral1", "us-central1"),
    "spec-region-malformed": ({**SPEC, "region": "US-Central1"}, "region", "US-Central1", "us-central1"),
    "fallback-reservation-zone": (
        entry(region="europe-west4", reservation=RESERVATION.format(zone="europe-wst4-b")),
        "scheduling.fallback[1].reservation",
        "europe-wst4-b",
        "europe-west4-b",
    ),
    "persistent-resource-region": (
        {
            **ON_RESOURCE,
            "persistent_resource": "projects/test-project/locations/us-centrl1/persistentResources/team-h100",
        },
        "persistent_resource",
        "us-centrl1",
        "us-central1",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_every_region_field_names_itself_the_value_and_the_nearest_region(case):
    data, field, value, near = CASES[case]
    with pytest.raises(SpecError) as err:
        build_spec(data)
    problem = err.value
    # One problem: a typo in a reservation's zone or a resource's region is not also reported as
    # "outside the attempt's region".
    assert problem.problems == (problem,), problem.message
    assert problem.field == field and problem.exit_code == 2
    assert repr(value) in problem.message and "Vertex AI training region" in problem.message
    assert problem.hint.startswith(f"did you mean {near!r}? "), problem.hint


def test_a_digit_off_keeps_every_near_region_and_a_letter_off_offers_one():
    # us-central9: the user may mean any of the numbered regions; us-centrl1 can only be one.
    assert len(nearest("us-central9", regions.REGIONS, n=3)) == 3
    assert nearest("us-centrl1", regions.REGIONS, n=3) == ["us-central1"]
    assert nearest("us-cnetral1", regions.REGIONS, n=3) == ["us-central1"]
    assert nearest("US_CENTRAL1", regions.REGIONS, n=3) == ["us-central1"]


@pytest.mark.parametrize(
    "fields,field,near",
    [
        ({"strategy": "standrd", "region": "us-east5"}, "scheduling.fallback[1].strategy", "standard"),
        ({"hardware": "h100x9"}, "scheduling.fallback[1].hardware", "h100x8"),
        ({"regoin": "us-east5"}, "scheduling.fallback[1].regoin", "region"),
        ({"hardwre": "a100-80gbx8"}, "scheduling.fallback[1].hardwre", "hardware"),
    ],
)
def test_a_misspelt_strategy_hardware_or_key_in_an_entry_names_the_nearest(fields, field, near):
    with pytest.raises(SpecError) as err:
        build_spec(with_scheduling(fallback=["spot", fields]))
    assert err.value.field == field
    assert f"did you mean {near!r}?" in str(err.value)


@pytest.mark.parametrize("command", [("validate",), ("submit", "--dry-run", "-o", "json")])
def test_a_misspelt_fallback_region_is_exit_2_on_the_command_line_and_sends_nothing(
    command, fake, run_cli, spec_file
):
    path = spec_file(
        scheduling={
            **SPEC["scheduling"],
            "fallback": ["spot", {"strategy": "standard", "region": "us-centrl1"}],
        }
    )
    result = run_cli(command[0], path, *command[1:])
    assert result.returncode == 2, result.stderr
    # (-o json: stdout is the one object, the error's)
    assert (
        result.stdout == ""
        if "json" not in command
        else json.loads(result.stdout)["error"]["kind"] == "invalid"
    )
    assert result.stderr.splitlines()[:2] == [
        f"error: scheduling.fallback[1].region: 'us-centrl1' is not a Vertex AI training region "
        f"(the table of {regions.READ})",
        "  hint: did you mean 'us-central1'? `vertex-trainer hardware --region R` lists what a region offers",
    ]
    assert fake.requests == []


def test_the_api_refuses_the_misspelt_region_before_a_submit(fake, spec_file, settings):
    path = spec_file(scheduling={**SPEC["scheduling"], "fallback": [{"region": "europe-wset4"}]})
    with pytest.raises(SpecError) as err:
        api.load_spec(path, settings=settings)
    assert err.value.field == "scheduling.fallback[0].region" and err.value.exit_code == 2
    assert "did you mean 'europe-west4'?" in err.value.hint
    assert fake.requests == []
