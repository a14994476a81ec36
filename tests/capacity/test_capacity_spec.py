"""scheduling.fallback in the spec and the rendered jobs, the region table, and the pieces that
tell a quota refusal from a rate limit. No network."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import SPEC
from vertex_trainer import regions, render
from vertex_trainer.capacity.fallback import refusal
from vertex_trainer.contract import ATTEMPT_LABEL
from vertex_trainer.errors import SpecError
from vertex_trainer.gcp.http import ApiError, quota_metrics
from vertex_trainer.spec import build_spec
from vertex_trainer.vertex.custom_jobs import capacity_quota
from vertex_trainer.vertex.quotas import _value_for


def spec(**scheduling):
    data = json.loads(json.dumps(SPEC))
    data["scheduling"].update(scheduling)
    return data


@pytest.mark.parametrize(
    "data,field,fragment",
    [
        (spec(fallback=["spot", "spot"]), "scheduling.fallback[1]", "listed twice"),
        (spec(fallback=["flex-start", "spot"]), "scheduling.fallback[0]", "already scheduling.strategy"),
        (spec(fallback=["spott"]), "scheduling.fallback[0]", "did you mean 'spot'"),
        (
            spec(strategy="spot", max_wait=None, fallback=["standard", "flex-start"], timeout="8d"),
            "scheduling.fallback[1]",
            "at most 7 days",
        ),
        (
            {**spec(strategy="spot", max_wait=None, fallback=["flex-start"]), "hardware": "t4x1"},
            "scheduling.fallback[0]",
            "does not serve NVIDIA_TESLA_T4",
        ),
        (
            {**spec(strategy="spot", max_wait=None, fallback=["standard"]), "hardware": "h100x4"},
            "scheduling.fallback[0]",
            "only as Spot or Flex Start",
        ),
    ],
)
def test_bad_fallback_values_name_the_dotted_field(data, field, fragment):
    with pytest.raises(SpecError) as err:
        build_spec(data)
    assert err.value.field == field and fragment in str(err.value)


def test_bad_fallback_is_exit_2_on_the_command_line(run_cli, spec_file):
    result = run_cli("validate", spec_file(), "--set", "scheduling.fallback=[spot,standard,spot]")
    assert result.returncode == 2
    assert "scheduling.fallback[2]: 'spot' is listed twice" in result.stderr


def test_max_wait_with_a_flex_start_fallback_only_and_labels_leave_room_for_the_attempt():
    ok = build_spec(spec(strategy="spot", fallback=["flex-start"]))
    assert ok.scheduling.max_wait == 1800
    assert build_spec(spec(fallback=[])).scheduling.fallback is None  # [] is no fallback
    assert build_spec(spec(fallback="spot")).scheduling.fallback == ("spot",)
    labels = {f"l{i}": "x" for i in range(62)}
    with pytest.raises(SpecError, match="at most 61"):
        build_spec({**spec(), "labels": labels})
    with pytest.raises(SpecError, match="reserved"):
        build_spec({**spec(), "labels": {ATTEMPT_LABEL: "2"}})


def test_each_attempt_is_rendered_with_its_strategy_and_label():
    job = build_spec(spec())
    first, second, third = (render.custom_job(job, idempotency_key="k", attempt=n) for n in (1, 2, 3))
    assert first == render.custom_job(job, idempotency_key="k")  # render/submit show attempt 1
    assert [j["jobSpec"]["scheduling"]["strategy"] for j in (first, second, third)] == [
        "FLEX_START",
        "SPOT",
        "STANDARD",
    ]
    assert first["jobSpec"]["scheduling"]["maxWaitDuration"] == "1800s"
    assert "maxWaitDuration" not in second["jobSpec"]["scheduling"]
    assert [j["labels"][ATTEMPT_LABEL] for j in (first, second, third)] == ["1", "2", "3"]
    assert len({j["labels"]["vertex-trainer-spec"] for j in (first, second, third)}) == 1
    with pytest.raises(ValueError):
        render.custom_job(job, attempt=4)
    plain = build_spec(spec(fallback=None))
    assert ATTEMPT_LABEL not in render.custom_job(plain)["labels"]


def test_a_spec_without_fallback_keeps_its_hash():
    from vertex_trainer.spec import spec_hash

    data = spec()
    del data["scheduling"]["fallback"]
    assert spec_hash(build_spec(data)) == spec_hash(build_spec(spec(fallback=[])))


def test_region_table():
    assert regions.offers("us-central1", "NVIDIA_H100_80GB") is True
    assert regions.offers("us-west2", "NVIDIA_H100_80GB") is False
    assert regions.offers("mars-north1", "NVIDIA_H100_80GB") is None
    assert "NVIDIA_B200" in regions.offered_in("us-south1")
    assert set(regions.TRAINING) <= set(regions._METRIC) and all(
        r in regions.REGIONS for rs in regions.TRAINING.values() for r in rs
    )
    warning = regions.availability_warning("us-west2", "NVIDIA_H100_80GB")
    assert "us-west2 does not offer NVIDIA_H100_80GB" in warning and "us-central1, us-east4" in warning
    assert regions.availability_warning("us-central1", "NVIDIA_H100_80GB") is None
    assert regions.availability_warning("us-central1", None) is None
    assert regions.quota_metric("NVIDIA_H100_80GB", "flex-start").endswith("preemptible_nvidia_h100_gpus")
    assert regions.quota_metric("TPU_V3", "standard").endswith("custom_model_training_tpu_v3")


def test_validate_warns_with_the_regions_that_offer_it(run_cli, spec_file):
    far = run_cli("validate", spec_file(region="us-west2"))
    assert far.returncode == 0, far.stderr
    assert (
        "warning: region: us-west2 does not offer NVIDIA_H100_80GB for Vertex AI training; "
        "regions that do: us-west1, us-central1" in far.stderr
    )
    near = run_cli("validate", spec_file())
    assert near.returncode == 0 and "warning" not in near.stderr
    assert (
        "schedule  flex-start, max wait 30m, timeout 2h; then spot, then standard if refused" in near.stdout
    )


def test_hardware_region_lists_what_the_region_offers(run_cli):
    result = run_cli("hardware", "--region", "europe-west4", "-o", "json")
    assert result.returncode == 0, result.stderr
    presets = {r["preset"] for r in json.loads(result.stdout)}
    assert {"cpu", "h100x8", "a100x8", "tpu-v3-8"} <= presets and not {"h200x8", "b200x8"} & presets
    text = run_cli("hardware", "--region", "us-south1")
    assert "# us-south1: Vertex AI training offers NVIDIA_B200" in text.stdout and "b200x8" in text.stdout
    bad = run_cli("hardware", "--region", "us-centrall")
    assert bad.returncode == 2 and "did you mean 'us-central1'" in bad.stderr


def test_a_quota_refusal_is_told_apart_from_a_rate_limit():
    quota = ApiError(
        429,
        "RESOURCE_EXHAUSTED",
        "The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",
    )
    rate = ApiError(
        429, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/custom_job_requests."
    )
    detailed = ApiError(
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded.",
        (
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "RATE_LIMIT_EXCEEDED",
                "metadata": {"quota_metric": "aiplatform.googleapis.com/custom_model_training_tpu_v3"},
            },
        ),
    )
    assert capacity_quota(quota) == "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"
    assert capacity_quota(rate) is None and quota_metrics(rate) == (
        "aiplatform.googleapis.com/custom_job_requests",
    )
    assert capacity_quota(detailed).endswith("custom_model_training_tpu_v3")
    assert capacity_quota(ApiError(503, "UNAVAILABLE", quota.message)) is None


def test_a_capacity_refusal_is_code_8_on_a_job_that_ended():
    failed = {"state": "JOB_STATE_FAILED", "error": {"code": 8, "message": "Resources are insufficient"}}
    assert refusal(failed).startswith("no capacity")
    assert refusal({**failed, "state": "JOB_STATE_CANCELLED"}) is None
    assert refusal({"state": "JOB_STATE_FAILED", "error": {"code": 3, "message": "exit 1"}}) is None
    assert refusal({"state": "JOB_STATE_RUNNING"}) is None


def test_quota_value_for_a_region_and_the_default():
    infos = [
        {"dimensions": {}, "details": {"value": "4"}},
        {"dimensions": {"region": "us-central1"}, "details": {}},  # 0, left out
        {"dimensions": {"region": "europe-west4"}, "details": {"value": "-1"}},
    ]
    assert _value_for(infos, "us-central1") == 0
    assert _value_for(infos, "asia-east1") == 4
    assert _value_for(infos, "europe-west4") is None  # unlimited
