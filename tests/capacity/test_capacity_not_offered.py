"""A region the region table says offers the accelerator, but whose service refuses the create
because it does not (the table is read from the docs on a date): the fallback records the attempt
as `skipped-not-offered` with the service's words and goes on, as for quota (docs/contract.md
section 11). Against the fake Vertex AI, through the real clients."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import REGION
from vertex_trainer import api, regions
from vertex_trainer.errors import ServiceError

pytestmark = pytest.mark.wire

TWO_REGIONS = {
    "strategy": "flex-start",
    "max_wait": "30m",
    "timeout": "2h",
    "fallback": [{"strategy": "spot", "region": "us-east5"}],
}


def regions_created(fake) -> list[str]:
    return [c.path.split("/")[5] for c in fake.calls("create")]


def test_a_region_the_service_says_does_not_offer_the_machine_moves_to_the_next_attempt(
    fake, run_cli, spec_file
):
    # The table says us-central1 offers H100 (so the pre-flight lets attempt 1 through) ...
    assert regions.offers(REGION, "NVIDIA_H100_80GB") is True
    fake.not_offered(region=REGION)  # ... the service says otherwise
    path = spec_file(scheduling=TWO_REGIONS)

    first = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "stale-table")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["state"] == "JOB_STATE_SUCCEEDED" and "/locations/us-east5/" in out["name"]
    assert regions_created(fake) == [REGION, "us-east5"]  # one create per region
    refused, ran = out["attempts"]
    assert (refused["attempt"], refused["region"], refused["reason"], refused["name"], refused["state"]) == (
        1,
        REGION,
        "skipped-not-offered",
        None,
        None,
    )
    # The service's own words, from its answer to the create.
    assert refused["message"].startswith("not offered there (400 INVALID_ARGUMENT): List of found errors")
    assert f'"NVIDIA_H100_80GB" is not supported in region {REGION}' in refused["message"]
    assert (ran["attempt"], ran["region"], ran["reason"], ran["name"]) == (2, "us-east5", None, out["name"])
    assert (
        f"attempt 1 (flex-start in {REGION}) refused: not offered there (400 INVALID_ARGUMENT)"
        in first.stderr
    )
    assert [j["name"] for j in fake.jobs.values()] == [out["name"]]

    again = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "stale-table")
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert len(fake.calls("create")) == 2 and rerun["adopted"] is True and rerun["name"] == out["name"]
    # The re-run still lists attempt 1: no job anywhere, so an earlier run's create was refused
    # (why is not stored anywhere it can read).
    before, adopted = rerun["attempts"]
    assert (before["attempt"], before["region"], before["name"], before["reason"]) == (1, REGION, None, None)
    assert before["message"].startswith("no job in any region of the plan: an earlier run's create")
    assert adopted["name"] == out["name"] and adopted["state"] == "JOB_STATE_SUCCEEDED"
    text = run_cli("submit", path, "--wait", "--no-logs", "--idempotency-key", "stale-table")
    assert (
        f"attempts flex-start in {REGION} refused in an earlier run -> spot in us-east5 SUCCEEDED"
        in text.stdout
    ), text.stdout
    assert len(fake.calls("create")) == 2


def test_the_text_summary_says_not_offered(fake, run_cli, spec_file):
    fake.not_offered(region=REGION)
    result = run_cli("submit", spec_file(scheduling=TWO_REGIONS), "--wait", "--no-logs")
    assert result.returncode == 0, result.stderr
    assert (
        f"attempts flex-start in {REGION} refused (not offered there) -> spot in us-east5 SUCCEEDED"
    ) in result.stdout


def test_a_machine_refused_in_every_region_is_not_a_place_refusal(fake, settings, spec_file):
    # "Accelerator X is not supported for machine type Y" names no place: no region serves the
    # pair, so the plan stops there (exit 3) instead of trying the next region.
    fake.on_strategy(
        region=REGION,
        refuse=400,
        message='Accelerator "NVIDIA_H100_80GB" is not supported for machine type "a3-highgpu-8g"',
    )
    spec = api.load_spec(spec_file(scheduling=TWO_REGIONS), settings=settings)
    with pytest.raises(ServiceError) as err:
        api.submit(spec, wait=True, idempotency_key="pair", settings=settings, log=lambda _: None)
    assert err.value.exit_code == 3 and "is not supported for machine type" in err.value.message
    assert regions_created(fake) == [REGION] and not fake.jobs


def test_not_offered_without_a_fallback_is_exit_3_with_the_fix(fake, settings, spec_file):
    fake.not_offered(region=REGION)
    spec = api.load_spec(spec_file(), settings=settings, set=["scheduling.fallback=null"])
    with pytest.raises(ServiceError) as err:
        api.submit(spec, idempotency_key="alone", settings=settings, log=lambda _: None)
    assert err.value.exit_code == 3 and f"is not supported in region {REGION}" in err.value.message
    assert f"does not offer this machine in {REGION}" in err.value.hint
    assert "scheduling.fallback" in err.value.hint
    assert len(fake.calls("create")) == 1 and not fake.jobs  # refused once, not retried


def test_a_fallback_region_the_table_is_unsure_of_warns_and_says_what_a_refusal_does(run_cli, spec_file):
    # TPU v5e's regions come from the Cloud TPU zone pages (low confidence): such a region is a
    # warning, not exit 2, and the service's refusal there would move the plan on.
    assert "TPU_V5_LITEPOD" in regions.UNCERTAIN and regions.offers("europe-west1", "TPU_V5_LITEPOD") is False
    plan = {
        "strategy": "standard",
        "fallback": [{"region": "europe-west1"}, {"region": "asia-east1"}, {"region": "europe-west4"}],
    }
    result = run_cli("validate", spec_file(hardware="tpu-v5e-8", region="us-west4", scheduling=plan))
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "may not offer TPU_V5_LITEPOD" in line]
    assert len(warned) == 2, result.stderr  # europe-west1 and asia-east1; europe-west4 offers it
    assert warned[0].startswith(
        "warning: scheduling.fallback[0]: attempt 2 (standard, europe-west1, "
        "tpu-v5e-8): europe-west1 may not offer"
    )
    assert warned[0].endswith("if the service refuses it there, the plan moves on to the next attempt")
    assert warned[1].startswith("warning: scheduling.fallback[1]: attempt 3")
    last = run_cli(
        "validate",
        spec_file(
            hardware="tpu-v5e-8",
            region="us-west4",
            scheduling={"strategy": "standard", "fallback": [{"region": "europe-west1"}]},
        ),
    )
    assert last.returncode == 0 and "the plan ends there (exit 3)" in last.stderr
