"""scheduling.fallback over the wire (docs/contract.md section 8): the fake Vertex refuses Flex Start for
capacity (the job ends FAILED with code 8) and Spot for quota (the create answers 429
RESOURCE_EXHAUSTED); each next strategy is its own job under the same idempotency key."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import FAST_RETRY, PROJECT, REGION, strategies
from vertex_trainer import api
from vertex_trainer.contract import ATTEMPT_LABEL, KEY_LABEL
from vertex_trainer.errors import JobFailed, ServiceError
from vertex_trainer.settings import Settings
from vertex_trainer.vertex.custom_jobs import JobsClient

pytestmark = pytest.mark.wire


def test_flex_no_capacity_and_spot_no_quota_end_on_standard_after_three_creates(fake, run_cli, spec_file):
    fake.no_capacity("FLEX_START")
    fake.no_quota("SPOT")
    path = spec_file()

    first = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "ci-42")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["state"] == "JOB_STATE_SUCCEEDED" and out["adopted"] is False
    assert strategies(fake) == ["FLEX_START", "SPOT", "STANDARD"]  # exactly those three creates
    assert len(fake.jobs) == 2  # the 429 stored nothing
    flex, spot, standard = out["attempts"]
    assert flex["strategy"] == "flex-start" and flex["state"] == "JOB_STATE_FAILED"
    # reason is the typed code (docs/contract.md section 11), message the service's words.
    assert flex["reason"] == "no-capacity" and "Resources are insufficient" in flex["message"]
    assert spot == {
        "attempt": 2,
        "region": REGION,
        "strategy": "spot",
        "hardware": "h100x8",
        "name": None,
        "state": None,
        "reason": "quota",
        "message": spot["message"],
    }
    assert "429 RESOURCE_EXHAUSTED" in spot["message"] and "preemptible_nvidia_h100_gpus" in spot["message"]
    assert standard["name"] == out["name"] and standard["state"] == "JOB_STATE_SUCCEEDED"
    assert standard["reason"] is None
    # Every attempt carries the key; the attempt label tells them apart.
    labels = {fake.jobs[a["name"]]["labels"][ATTEMPT_LABEL] for a in (flex, standard)}
    assert labels == {"1", "3"}
    assert {j["labels"][KEY_LABEL] for j in fake.jobs.values()} == {"ci-42"}
    # max_wait went only to the Flex Start attempt.
    bodies = [c.body["jobSpec"]["scheduling"] for c in fake.calls("create")]
    assert bodies[0]["maxWaitDuration"] == "1800s" and "maxWaitDuration" not in bodies[2]

    again = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "ci-42")
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert len(fake.calls("create")) == 3  # a re-run creates nothing
    assert rerun["name"] == out["name"] and rerun["adopted"] is True
    # Attempt 2 made no job (its create was refused): the re-run lists it without a reason.
    assert [(a["attempt"], a["reason"]) for a in rerun["attempts"]] == [
        (1, "no-capacity"),
        (2, None),
        (3, None),
    ]
    assert rerun["attempts"][1]["name"] is None and "earlier run" in rerun["attempts"][1]["message"]


def test_text_output_says_which_attempts_happened_and_why(fake, run_cli, spec_file):
    fake.no_capacity("FLEX_START")
    fake.no_quota("SPOT")
    result = run_cli("submit", spec_file(), "--wait", "--no-logs")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("created ") == 2
    assert "final    SUCCEEDED" in result.stdout
    assert (
        "attempts flex-start FAILED (no capacity) -> spot refused (quota) -> standard SUCCEEDED"
        in result.stdout
    )
    assert "attempt 1 (flex-start) refused: no capacity" in result.stderr
    assert "attempt 2 (spot) refused: quota refused (429 RESOURCE_EXHAUSTED)" in result.stderr


def test_a_job_that_fails_on_its_own_is_not_retried(fake, run_cli, spec_file):
    fake.set_script(
        ["JOB_STATE_QUEUED", "JOB_STATE_RUNNING", "JOB_STATE_FAILED"],
        error_message="The replica workerpool0-0 exited with a non-zero status of 1.",
    )
    result = run_cli("submit", spec_file(), "--wait", "-o", "json", "--idempotency-key", "own-fail")
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    assert strategies(fake) == ["FLEX_START"]
    assert out["state"] == "JOB_STATE_FAILED"
    assert [a["strategy"] for a in out["attempts"]] == ["flex-start"]
    assert out["attempts"][0]["reason"] is None  # not a capacity refusal: final
    assert "non-zero status" in out["attempts"][0]["message"]


def test_without_wait_one_create_and_a_rerun_with_wait_goes_on(fake, run_cli, spec_file):
    fake.no_capacity("FLEX_START")
    path = spec_file()
    first = run_cli("submit", path, "-o", "json", "--idempotency-key", "later")
    assert first.returncode == 0, first.stderr
    assert strategies(fake) == ["FLEX_START"] and json.loads(first.stdout)["state"] == "JOB_STATE_QUEUED"
    assert "--wait" in first.stderr  # a refusal after the create is seen only by following it

    second = run_cli("submit", path, "--wait", "-o", "json", "--idempotency-key", "later")
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout)
    assert strategies(fake) == ["FLEX_START", "SPOT"]  # the Flex Start job was adopted, then refused
    assert [a["state"] for a in out["attempts"]] == ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"]


def test_capacity_refused_everywhere_ends_failed_with_every_attempt(fake, settings, spec_file):
    for strategy in ("FLEX_START", "SPOT", "STANDARD"):
        fake.no_capacity(strategy)
    spec = api.load_spec(spec_file(), settings=settings)
    with pytest.raises(JobFailed) as err:
        api.submit(spec, wait=True, idempotency_key="nowhere", settings=settings, log=lambda _: None)
    assert "flex-start FAILED (no capacity) -> spot FAILED (no capacity) -> standard FAILED" in str(err.value)
    assert strategies(fake) == ["FLEX_START", "SPOT", "STANDARD"]


def test_last_create_refused_for_quota_is_exit_3_naming_every_attempt(fake, settings, spec_file):
    fake.no_quota("SPOT")
    fake.no_quota("STANDARD")
    spec = api.load_spec(
        spec_file(),
        settings=settings,
        set=["scheduling.strategy=spot", "scheduling.fallback=[standard]", "scheduling.max_wait=null"],
    )
    with pytest.raises(ServiceError) as err:
        api.submit(spec, idempotency_key="no-quota", settings=settings, log=lambda _: None)
    assert err.value.exit_code == 3
    assert (
        "every attempt of the plan was refused: spot refused (quota) -> standard refused (quota)"
        in err.value.message
    )
    assert "console.cloud.google.com/iam-admin/quotas" in err.value.hint
    assert len(fake.calls("create")) == 2 and not fake.jobs


def test_api_follow_hook_sees_each_attempt_and_wait_returns_the_last(fake, settings, spec_file):
    fake.no_capacity("FLEX_START")
    spec = api.load_spec(spec_file(), settings=settings)
    followed = []
    job = api.submit(
        spec,
        wait=True,
        idempotency_key="hook",
        settings=settings,
        log=lambda _: None,
        options=api.SubmitOptions(
            follow=lambda j, timeout: (followed.append(j.labels[ATTEMPT_LABEL]), j.wait(timeout, check=False))
        ),
    )
    assert followed == ["1", "2"]
    assert isinstance(job, api.Job) and job.spec is spec and job.succeeded
    assert [a["strategy"] for a in job.attempts] == ["flex-start", "spot"]


def test_quota_429_without_fallback_is_final_and_a_rate_limit_429_is_retried(fake, settings, spec_file):
    spec = api.load_spec(spec_file(), settings=settings, set=["scheduling.fallback=null"])
    client = JobsClient(PROJECT, REGION, settings=Settings(vertex_endpoint=fake.url, retry=FAST_RETRY))
    fake.fail("create", 429)  # "Quota exceeded for aiplatform.googleapis.com/custom_job_requests."
    job = api.submit(spec, idempotency_key="rate", client=client, log=lambda _: None)
    assert job.labels.get(ATTEMPT_LABEL) is None  # no fallback, no attempt label
    assert len(fake.calls("create")) == 2 and len(fake.jobs) == 1

    fake.no_quota("FLEX_START")
    with pytest.raises(ServiceError) as err:
        api.submit(spec, idempotency_key="quota", client=client, log=lambda _: None)
    assert "custom_model_training_preemptible_nvidia_h100_gpus" in err.value.message
    assert "scheduling.fallback" in err.value.hint
    assert len(fake.calls("create")) == 3  # the refused create was not retried


def test_unscript_forgets_every_scripted_outcome(fake):
    """What a shared sandbox calls after each test (tests/sandbox/conftest.py): the next test's
    creates are answered as if nothing had been scripted."""
    spot = {"name": f"projects/{PROJECT}/locations/{REGION}/customJobs/1"}
    spot["jobSpec"] = {"scheduling": {"strategy": "SPOT"}}
    fake.no_quota("SPOT")
    fake.no_capacity(region=REGION)
    assert fake.outcome_of(spot).refuse == 429
    assert fake.outcome_of({**spot, "jobSpec": {}}).script is not None  # STANDARD, in the region
    fake.unscript()
    after = fake.outcome_of(spot)
    assert (after.refuse, after.script) == (0, None)
    assert fake.outcome_of({**spot, "jobSpec": {}}).script is None  # the region's script too
