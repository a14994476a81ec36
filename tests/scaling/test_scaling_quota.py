"""Issue 35: a Reduction Server job's reducers need CPU quota, and the pre-flight reads it beside
the accelerator quota (validate --check-quota, submit, check), against the fake Cloud Quotas API:
N x n1-highcpu-16 count against custom_model_training_cpus, or its preemptible variant for Spot
and Flex Start. A plan whose every attempt is short of either quota is exit 2, nothing created."""

from __future__ import annotations

import pytest
import yaml

from tests.shared import FAST_RETRY, cli_runner, write_spec
from vertex_trainer import api
from vertex_trainer.capacity import availability as capacity
from vertex_trainer.emulators.iam import FakeIam
from vertex_trainer.emulators.quotas import FakeQuotas
from vertex_trainer.emulators.serviceusage import FakeServiceUsage
from vertex_trainer.errors import UserError
from vertex_trainer.settings import Settings
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.attempts import attempts

from .conftest import scale_data

pytestmark = pytest.mark.wire
A100 = "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"
A100_SPOT = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus"
CPUS = "aiplatform.googleapis.com/custom_model_training_cpus"
CPUS_SPOT = "aiplatform.googleapis.com/custom_model_training_preemptible_cpus"
# 4 x a2-highgpu-8g (100 Gbps each) with reduction_server: auto: ceil(400 / 32) = 13 reducers of
# n1-highcpu-16 (tests/scaling/test_scaling.py), 13 x 16 = 208 vCPUs.
REDUCERS = "208 vCPUs for 13 reducer(s) (n1-highcpu-16)"


def check_quota(spec, **kw):
    """The quota pre-flight of `spec`'s own plan (the submit passes its SubmitPlan's attempts)."""
    return capacity.check_quota(spec, attempts(spec), **kw)


def data(**over) -> dict:
    """The scaled job with a prebuilt image and a standard strategy (no build, one attempt)."""
    base = {
        "scheduling": {"strategy": "standard"},
        "image": {"uri": "us-docker.pkg.dev/my-project/training/trainer:v1"},
    }
    return scale_data(**{**base, **over})


@pytest.fixture
def quotas():
    with FakeQuotas() as q:
        q.set(A100, None, 64)
        q.set(A100_SPOT, None, 64)
        yield q


def settings_for(quotas: FakeQuotas, **more) -> Settings:
    return Settings(
        vertex_endpoint="http://127.0.0.1:9", quotas_endpoint=quotas.url, retry=FAST_RETRY, **more
    )


def test_the_reducers_cpu_quota_is_read_beside_the_accelerators(quotas):
    quotas.set(CPUS, "us-central1", 500)
    checks = check_quota(build_spec(data()), settings=settings_for(quotas), log=lambda _: None)
    by_metric = {c.metric: c for c in checks}
    assert by_metric[A100].needed == 32 and not by_metric[A100].short
    cpus = by_metric[CPUS]
    assert (cpus.needed, cpus.limit, cpus.region, cpus.attempts, cpus.short) == (
        208,
        500,
        "us-central1",
        (1,),
        False,
    )
    assert cpus.describe("NVIDIA_TESLA_A100") == (
        f"standard: needs {REDUCERS}, quota 500 in us-central1 (custom_model_training_cpus)"
    )
    without = check_quota(build_spec(data(scaling=None)), settings=settings_for(quotas), log=lambda _: None)
    assert [c.metric for c in without] == [A100]  # no reducers, no CPU quota read


def test_reducers_short_of_cpu_quota_stop_the_submit_before_anything_is_created(quotas):
    quotas.set(CPUS, "us-central1", 100)  # the accelerators fit (32 of 64); the reducers do not
    with pytest.raises(UserError) as err:
        check_quota(build_spec(data()), settings=settings_for(quotas), log=lambda _: None)
    assert err.value.message == (
        f"quota: needs {REDUCERS}, quota 100 in us-central1 (custom_model_training_cpus); nothing was created"
    )
    assert "iam-admin/quotas" in (err.value.hint or "")


def test_spot_reducers_count_against_the_preemptible_cpus_and_a_short_attempt_is_skipped(quotas):
    quotas.set(CPUS, "us-central1", 500)
    quotas.set(CPUS_SPOT, "us-central1", 64)  # spot's reducers are short; standard's are not
    spec = build_spec(data(scheduling={"strategy": "spot", "fallback": ["standard"]}))
    lines: list[str] = []
    checks = check_quota(spec, settings=settings_for(quotas), log=lines.append)
    spot = next(c for c in checks if c.metric == CPUS_SPOT)
    assert (spot.needed, spot.limit, spot.attempts, spot.short) == (208, 64, (1,), True)
    assert capacity.skipped_attempts(checks) == {
        1: "quota custom_model_training_preemptible_cpus in us-central1 is 64, the job needs 208"
    }
    [line] = lines  # attempt 2 (standard) fits both quotas: a warning, not exit 2
    assert line.startswith(
        f"warning: quota: spot: needs {REDUCERS}, quota 64 in us-central1 "
        "(custom_model_training_preemptible_cpus); ask for more: "
        "https://console.cloud.google.com/iam-admin/quotas?project=my-project"
    )


def test_validate_check_quota_prints_the_reducers_line(quotas, fake, tmp_path):
    from tests.cli_support import edge_env

    path = write_spec(tmp_path, yaml.safe_dump(data()))
    run = cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url))
    result = run("validate", path, "--check-quota", env={"VERTEX_TRAINER_QUOTAS_ENDPOINT": quotas.url})
    assert result.returncode == 0, result.stderr
    assert "needs 32 NVIDIA_TESLA_A100, quota 64 in us-central1" in result.stdout
    assert (
        f"standard: needs {REDUCERS}, quota 2200 in us-central1 (custom_model_training_cpus)" in result.stdout
    )
    quotas.set(CPUS, "us-central1", 16)
    short = run("validate", path, "--check-quota", env={"VERTEX_TRAINER_QUOTAS_ENDPOINT": quotas.url})
    assert short.returncode == 2 and f"needs {REDUCERS}, quota 16 in us-central1" in short.stderr


def test_check_lists_the_reducers_cpu_quota(quotas, fake, tmp_path):
    quotas.set(CPUS, "us-central1", 16)
    path = write_spec(tmp_path, yaml.safe_dump(data(project="my-proj")))
    with FakeServiceUsage() as usage, FakeIam() as iam:
        settings = Settings(
            vertex_endpoint=fake.url,
            serviceusage_endpoint=usage.url,
            iam_endpoint=iam.url,
            quotas_endpoint=quotas.url,
            retry=FAST_RETRY,
            project="my-proj",
        )
        spec = api.load_spec(path, settings=settings)
        result = api.project_check(spec, settings=settings)
    by_name = {i.name: i for i in result.items}
    cpus = by_name["custom_model_training_cpus in us-central1"]
    assert cpus.status == "FAIL" and f"needs {REDUCERS}, quota 16" in cpus.detail
    assert by_name["custom_model_training_nvidia_a100_gpus in us-central1"].status == "OK"
