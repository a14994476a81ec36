"""The quota pre-flight (validate --check-quota, and before a real submit) against the fake Cloud
Quotas API: clearly short is exit 2 naming the numbers and the page to ask for more; unreadable is
a warning; offline it is skipped."""

from __future__ import annotations

import json

import pytest

from tests.capacity.conftest import H100, H100_SPOT, PROJECT, REGION
from vertex_trainer.capacity import availability as capacity
from vertex_trainer.errors import UserError
from vertex_trainer.settings import Settings
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.attempts import attempts

pytestmark = pytest.mark.wire
STANDARD = {"scheduling": {"strategy": "standard"}}


def check_quota(spec, **kw):
    """The quota pre-flight of `spec`'s own plan (the submit passes its SubmitPlan's attempts)."""
    return capacity.check_quota(spec, attempts(spec), **kw)


def test_validate_check_quota_short_is_exit_2_with_the_numbers_and_the_link(quotas, run_cli, spec_file):
    quotas.set(H100, REGION, 0)
    result = run_cli("validate", spec_file(**STANDARD), "--check-quota", quotas=quotas)
    assert result.returncode == 2, result.stderr
    assert "needs 8 NVIDIA_H100_80GB, quota 0 in us-central1" in result.stderr
    assert f"console.cloud.google.com/iam-admin/quotas?project={PROJECT}" in result.stderr
    assert "custom_model_training_nvidia_h100_gpus" in result.stderr
    assert "Traceback" not in result.stderr
    assert any("pageToken" in r for r in quotas.requests)  # the fake pages by 2: the list was followed


def test_validate_check_quota_ok_prints_each_strategy(quotas, run_cli, spec_file):
    quotas.set(H100, None, 16)  # the default for every region
    quotas.set(H100_SPOT, REGION, 8)
    result = run_cli("validate", spec_file(replicas=2), "--check-quota", quotas=quotas)
    assert result.returncode == 0, result.stderr
    # flex-start and spot count against the preemptible quota, standard against the on-demand one.
    assert "quota     flex-start, spot: needs 16 NVIDIA_H100_80GB, quota 8 in us-central1" in result.stdout
    assert "quota     standard: needs 16 NVIDIA_H100_80GB, quota 16 in us-central1" in result.stdout
    assert "ask for more" in result.stdout  # short for the first two, but standard is not: exit 0


def test_submit_stops_before_any_create_when_short_and_no_quota_check_skips(fake, quotas, run_cli, spec_file):
    quotas.set(H100, REGION, 4)
    path = spec_file(**STANDARD)
    result = run_cli("submit", path, "-o", "json", quotas=quotas)
    assert result.returncode == 2, result.stderr
    assert "needs 8 NVIDIA_H100_80GB, quota 4 in us-central1" in result.stderr and not fake.calls("create")
    skipped = run_cli("submit", path, "-o", "json", "--no-quota-check", quotas=quotas)
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads(skipped.stdout)["name"] in fake.jobs


def test_unreadable_quota_is_a_warning_never_a_failure(fake, quotas, run_cli, spec_file):
    quotas.set(H100, REGION, 0)
    quotas.fail(403, times=10)
    result = run_cli("submit", spec_file(**STANDARD), "-o", "json", quotas=quotas)
    assert result.returncode == 0, result.stderr
    assert (
        "warning: quota: standard: quota custom_model_training_nvidia_h100_gpus in us-central1 not checked"
        in result.stderr
        and "403" in result.stderr
    )
    assert len(fake.calls("create")) == 1


def test_offline_without_a_quota_endpoint_skips_silently(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file(**STANDARD), "-o", "json")
    assert result.returncode == 0, result.stderr
    assert "quota" not in result.stderr
    checked = run_cli("validate", spec_file(**STANDARD), "--check-quota")
    assert checked.returncode == 0 and "quota     not checked: Vertex AI is an emulator" in checked.stdout


def test_every_strategy_short_is_exit_2_listing_each(quotas, spec_file):
    quotas.set(H100, REGION, 0)
    quotas.set(H100_SPOT, REGION, 0)  # the fake leaves a 0 out, as proto3 JSON does
    spec = build_spec({**_data(spec_file), "replicas": 1})
    settings = Settings(vertex_endpoint="http://127.0.0.1:9", quotas_endpoint=quotas.url)
    with pytest.raises(UserError) as err:
        check_quota(spec, settings=settings, log=lambda _: None)
    message = err.value.message
    assert "every strategy of the plan is short of quota" in message
    for strategies in ("flex-start, spot", "standard"):
        assert f"{strategies}: needs 8 NVIDIA_H100_80GB, quota 0 in us-central1" in message


def test_unlimited_and_cpu_jobs(quotas, spec_file):
    quotas.set(H100, None, -1)
    settings = Settings(vertex_endpoint="http://127.0.0.1:9", quotas_endpoint=quotas.url)
    spec = build_spec({**_data(spec_file), "scheduling": {"strategy": "standard"}})
    [check] = check_quota(spec, settings=settings, log=lambda _: None)
    assert check.limit is None and not check.short and "quota unlimited" in check.describe("H100")
    cpu = build_spec({**_data(spec_file), "hardware": "cpu", "scheduling": {}})
    assert check_quota(cpu, settings=settings, log=lambda _: None) == []


def _data(spec_file) -> dict:
    import yaml

    return yaml.safe_load(spec_file().read_text())
