"""Attempts across regions (docs/contract.md section 11) against the fake Vertex AI, the fake Cloud
Quotas API and the GCS emulator, through the real clients: each attempt its own job under its own
region's parent, one create per region in plan order, a re-run that creates nothing, the typed
records in the JSON and text summaries, and the pre-flight that stops (exit 2) or skips an
attempt before anything is created."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import FAST_RETRY, H100, H100_SPOT, PROJECT, REGION
from tests.shared import put_object, storage_emulator
from vertex_trainer import api
from vertex_trainer.capacity.fallback import AttemptRecord, summary
from vertex_trainer.contract import ATTEMPT_LABEL, KEY_LABEL
from vertex_trainer.errors import UserError
from vertex_trainer.settings import PollPolicy, Settings

pytestmark = pytest.mark.wire

THREE_REGIONS = {
    "strategy": "flex-start",
    "max_wait": "30m",
    "timeout": "2h",
    "fallback": [
        {"strategy": "spot", "region": "us-east5"},
        {"strategy": "standard", "region": "europe-west4"},
    ],
}


def regions_created(fake) -> list[str]:
    """The region of every create the fake received, in order."""
    return [c.path.split("/")[5] for c in fake.calls("create")]


def test_three_regions_end_in_europe_after_one_create_per_region_and_a_rerun_creates_nothing(
    fake, run_cli, spec_file
):
    fake.no_capacity(region="us-central1")  # every job there ends FAILED, code 8
    fake.no_quota(region="us-east5")  # every create there answers 429
    path = spec_file(scheduling=THREE_REGIONS)

    first = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "three-regions")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["state"] == "JOB_STATE_SUCCEEDED" and "/locations/europe-west4/" in out["name"]
    assert regions_created(fake) == ["us-central1", "us-east5", "europe-west4"]
    assert [(a["attempt"], a["region"], a["strategy"], a["reason"]) for a in out["attempts"]] == [
        (1, "us-central1", "flex-start", "no-capacity"),
        (2, "us-east5", "spot", "quota"),
        (3, "europe-west4", "standard", None),
    ]
    assert {a["hardware"] for a in out["attempts"]} == {"h100x8"}
    assert out["attempts"][1]["name"] is None and out["attempts"][2]["name"] == out["name"]
    # Each job lives under its own region's parent, with the one key and its attempt number.
    jobs = {name.split("/")[3]: job for name, job in fake.jobs.items()}
    assert set(jobs) == {"us-central1", "europe-west4"}
    assert {j["labels"][KEY_LABEL] for j in jobs.values()} == {"three-regions"}
    assert [jobs[r]["labels"][ATTEMPT_LABEL] for r in ("us-central1", "europe-west4")] == ["1", "3"]
    assert "attempt 2 (spot in us-east5) refused: quota refused (429" in first.stderr

    again = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "three-regions")
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert len(fake.calls("create")) == 3 and rerun["adopted"] is True and rerun["name"] == out["name"]
    # The re-run looked for the key in every region of the plan.
    looked = {c.path.split("/")[5] for c in fake.calls("list")}
    assert looked >= {"us-central1", "us-east5", "europe-west4"}


def test_the_text_summary_names_each_attempts_region(fake, run_cli, spec_file):
    fake.no_capacity(region="us-central1")
    fake.no_quota(region="us-east5")
    result = run_cli("submit", spec_file(scheduling=THREE_REGIONS), "--wait", "--no-logs")
    assert result.returncode == 0, result.stderr
    assert (
        "attempts flex-start in us-central1 FAILED (no capacity) -> spot in us-east5 refused "
        "(quota) -> standard in europe-west4 SUCCEEDED"
    ) in result.stdout


def test_a_summary_prints_from_the_typed_record_not_its_message():
    # The message says "quota", the record says no capacity: the record wins.
    record = AttemptRecord(
        1,
        REGION,
        "spot",
        "h100x8",
        "n",
        "JOB_STATE_FAILED",
        "no-capacity",
        message="quota refused (429): misleading words",
    )
    assert summary([record]) == "spot FAILED (no capacity)"
    skipped = AttemptRecord(2, "us-east5", "spot", "h100x8", reason="skipped-quota")
    assert summary([record, skipped]).endswith("spot in us-east5 skipped (quota)")
    assert AttemptRecord.from_dict(skipped.to_dict()) == skipped


def test_a_short_quota_skips_that_attempt_without_a_create(fake, quotas, run_cli, spec_file):
    quotas.set(H100, None, 16)
    quotas.set(H100_SPOT, None, 16)
    quotas.set(H100_SPOT, "us-east5", 0)  # spot in us-east5: clearly too small
    fake.no_capacity(region="us-central1")
    path = spec_file(scheduling=THREE_REGIONS)
    result = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "short", quotas=quotas)
    assert result.returncode == 0, result.stderr
    assert regions_created(fake) == ["us-central1", "europe-west4"]  # none in us-east5
    out = json.loads(result.stdout)
    assert [a["reason"] for a in out["attempts"]] == ["no-capacity", "skipped-quota", None]
    skipped = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert skipped == [
        "attempt 2 (spot in us-east5) skipped: quota custom_model_training_preemptible_"
        "nvidia_h100_gpus in us-east5 is 0, the job needs 8"
    ]
    # A re-run with the key adopts attempt 3, creates nothing, and still says why attempt 2 had no job.
    again = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "short", quotas=quotas)
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert rerun["adopted"] is True and len(fake.calls("create")) == 2
    assert [a["reason"] for a in rerun["attempts"]] == ["no-capacity", "skipped-quota", None]


def test_a_fallback_region_without_the_accelerator_is_exit_2_naming_where_it_is(fake, run_cli, spec_file):
    plan = {**THREE_REGIONS, "fallback": [{"strategy": "spot", "region": "us-west2"}]}
    result = run_cli("submit", spec_file(scheduling=plan), "-o", "json")
    assert result.returncode == 2, result.stderr
    assert (
        "scheduling.fallback[0]: attempt 2 (spot, us-west2, h100x8): us-west2 does not offer "
        "NVIDIA_H100_80GB for Vertex AI training; regions that do: us-west1, us-central1" in result.stderr
    )
    assert not fake.calls("create") and not fake.calls("list")


@pytest.fixture
def storage():
    """The GCS emulator in-process (it puts every bucket in the US multi-region)."""
    with storage_emulator("test-bucket") as url:
        put_object(url, "gs://test-bucket/data/train-00000")  # the data is there (submit checks it)
        yield url


def test_remote_data_is_exit_2_unless_allow_remote_data(fake, storage, spec_file):
    settings = Settings(
        vertex_endpoint=fake.url, storage_emulator=storage, retry=FAST_RETRY, poll=PollPolicy.parse("0.02")
    )
    spec = api.load_spec(spec_file(scheduling=THREE_REGIONS), settings=settings)
    with pytest.raises(UserError) as err:
        api.submit(spec, settings=settings, log=lambda _: None)
    assert err.value.exit_code == 2
    assert "scheduling.fallback[1]: attempt 3 (standard, europe-west4, h100x8)" in err.value.message
    assert "gs://test-bucket is in the US multi-region, the attempt runs in europe-west4" in err.value.message
    assert "allow_remote_data: true" in err.value.hint
    assert not fake.calls("create") and not fake.calls("list")
    # us-east5 is in the US multi-region: only europe-west4 needed the switch.
    allowed = api.load_spec(
        spec_file(scheduling={**THREE_REGIONS, "allow_remote_data": True}), settings=settings
    )
    job = api.submit(allowed, settings=settings, log=lambda _: None)
    assert job.name.split("/")[3] == REGION and job.client.project == PROJECT


def test_validate_answers_what_submit_answers_for_each_attempt(run_cli, spec_file):
    plan = {**THREE_REGIONS, "fallback": [{"strategy": "spot", "region": "us-west2"}]}
    result = run_cli("validate", spec_file(scheduling=plan))
    assert result.returncode == 2 and "regions that do: us-west1, us-central1" in result.stderr
    # A fallback on other hardware must split the global batch over its own replicas too.
    wide = {**THREE_REGIONS, "fallback": [{"strategy": "standard", "hardware": "a100x16"}]}
    split = run_cli("validate", spec_file(scheduling=wide), "--set", "trainer.batch_size=24")
    assert split.returncode == 2
    assert (
        "scheduling.fallback[0].hardware: a100x16 has 16 GPUs (one data-parallel replica each), and the "
        "global batch 24" in split.stderr
    )
    fits = run_cli("validate", spec_file(scheduling=wide), "--set", "trainer.batch_size=32")
    assert fits.returncode == 0, fits.stderr
    assert "then standard on a100x16 if refused" in fits.stdout


def test_a_dry_run_shows_each_attempts_create_in_its_own_region(fake, run_cli, spec_file):
    path = spec_file(scheduling=THREE_REGIONS)
    result = run_cli("submit", path, "--dry-run", "-o", "json", "--idempotency-key", "dry")
    assert result.returncode == 0, result.stderr
    attempts = json.loads(result.stdout)["attempts"]
    assert [(a["attempt"], a["region"], a["strategy"]) for a in attempts] == [
        (1, "us-central1", "flex-start"),
        (2, "us-east5", "spot"),
        (3, "europe-west4", "standard"),
    ]
    for a in attempts:
        create = a["requests"][1]  # (the look for the key, the create, the look after it)
        assert create["url"].endswith(f"/v1/projects/{PROJECT}/locations/{a['region']}/customJobs")
        assert create["body"]["labels"][ATTEMPT_LABEL] == str(a["attempt"])
    assert fake.requests == []  # nothing sent
    text = run_cli("submit", path, "--dry-run").stdout
    # Said once: when the next attempt is sent, and that a capacity refusal needs --wait.
    assert text.count("only if the one before it is refused") == 1
    assert "its job for capacity (code 8: seen with --wait)" in text
    assert "# attempt 3 (standard in europe-west4 on h100x8), its own job" in text
    helped = " ".join(run_cli("submit", "--help").stdout.split())
    assert (
        "with scheduling.fallback: a job refused for capacity moves on to the next attempt only "
        "when followed" in helped
    )


def test_a_fallback_region_without_the_accelerator_hints_the_nearest_region_that_has_it(run_cli, spec_file):
    plan = {**THREE_REGIONS, "fallback": [{"strategy": "standard", "region": "europe-west1"}]}
    result = run_cli("validate", spec_file(scheduling=plan))
    assert result.returncode == 2
    assert "europe-west1 does not offer NVIDIA_H100_80GB" in result.stderr
    assert "hint: give the entry a region that does (region: europe-west4)" in result.stderr
