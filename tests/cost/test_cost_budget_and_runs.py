"""The price where decisions are made (docs/contract.md section 12): a budget below the worst case
is refused before anything reaches the fake Vertex AI; an ended job's status and the submit --wait
summary say what it cost."""

from __future__ import annotations

import json

import pytest

from tests.cost.conftest import PROJECT, REGION, spec_data
from vertex_trainer import pricing
from vertex_trainer.cost import estimate as cost
from vertex_trainer.spec import build_spec

pytestmark = pytest.mark.wire

IMAGE = {"uri": "us-docker.pkg.dev/test-project/training/trainer:v1"}


def worst_case(**changes) -> float:
    return cost.estimate(build_spec(spec_data(**changes)), pricing.load_snapshot()).max_cost


def test_max_cost_below_the_worst_case_is_exit_2_with_both_figures_and_nothing_sent(fake, run_cli, spec_file):
    path = spec_file(image=IMAGE, scheduling={"max_cost": 500})
    result = run_cli("submit", path, "--wait", vertex=fake)
    assert result.returncode == 2, result.stderr
    worst = worst_case(image=IMAGE)
    assert "scheduling.max_cost" in result.stderr and "500.00 USD" in result.stderr
    assert f"{worst:,.2f} USD" in result.stderr and "Traceback" not in result.stderr
    assert fake.requests == []  # no create, no lookup: nothing reached the fake


def test_submit_max_cost_wins_over_the_spec_and_a_sufficient_budget_submits(fake, run_cli, spec_file):
    worst = worst_case(image=IMAGE)
    path = spec_file(image=IMAGE, scheduling={"max_cost": worst * 2})
    refused = run_cli("submit", path, "--max-cost", f"{worst / 2:.2f}", vertex=fake)
    assert refused.returncode == 2 and "--max-cost" in refused.stderr and fake.calls("create") == []
    accepted = run_cli("submit", path, "--max-cost", f"{worst + 1:.2f}", "-o", "json", vertex=fake)
    assert accepted.returncode == 0, accepted.stderr
    assert len(fake.calls("create")) == 1  # the budget let it through, and submit creates once


def test_validate_and_dry_run_print_the_hourly_price_and_the_worst_case(run_cli, spec_file):
    path = spec_file(image=IMAGE)
    est = cost.estimate(build_spec(spec_data(image=IMAGE)), pricing.load_snapshot())
    a = est.attempts[0]
    figures = f"{a.hourly:,.2f} USD/h, worst case {a.max_cost:,.2f} USD"
    validate = run_cli("validate", path)
    assert validate.returncode == 0, validate.stderr
    assert "price" in validate.stdout and figures in validate.stdout
    dry = run_cli("submit", path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [line for line in dry.stdout.splitlines() if line.startswith("# price:") and figures in line]
    over = run_cli("validate", spec_file(image=IMAGE, scheduling={"max_cost": 10}))
    assert over.returncode == 2 and "10.00 USD" in over.stderr


def _ended(fake, hours: float) -> str:
    body = {
        "displayName": "ended",
        "labels": {},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "a3-highgpu-8g",
                        "acceleratorType": "NVIDIA_H100_80GB",
                        "acceleratorCount": 8,
                    },
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": IMAGE["uri"]},
                },
                {
                    "machineSpec": {
                        "machineType": "a3-highgpu-8g",
                        "acceleratorType": "NVIDIA_H100_80GB",
                        "acceleratorCount": 8,
                    },
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": IMAGE["uri"]},
                },
            ],
            "scheduling": {"strategy": "SPOT"},
        },
    }
    job = fake.add_job(body, project=PROJECT, location=REGION, state="JOB_STATE_SUCCEEDED")
    whole, part = divmod(int(hours * 3600), 3600)
    job["startTime"] = "2026-11-30T08:00:00.123456Z"
    job["endTime"] = f"2026-11-30T{8 + whole:02d}:{part // 60:02d}:{part % 60:02d}.123456Z"
    return job["name"]


def test_status_of_an_ended_job_prints_what_it_cost(fake, run_cli):
    name = _ended(fake, 2.5)
    spot = (
        pricing.machine_price(
            pricing.load_snapshot(),
            machine_type="a3-highgpu-8g",
            accelerator_type="NVIDIA_H100_80GB",
            accelerator_count=8,
            region=REGION,
            strategy="spot",
        ).hourly
        * 2
    )
    text = run_cli("status", name, vertex=fake)
    assert text.returncode == 0, text.stderr
    assert f"{spot * 2.5:,.2f} USD" in text.stdout and "estimate" in text.stdout
    out = json.loads(run_cli("status", name, "-o", "json", vertex=fake).stdout)
    assert out["cost"]["estimate"] is True and out["cost"]["strategy"] == "spot"
    assert out["cost"]["hours"] == 2.5 and out["cost"]["usd"] == pytest.approx(spot * 2.5, abs=0.01)


def test_a_job_that_has_not_run_has_no_cost(fake, run_cli):
    name = _ended(fake, 1.0)
    fake.set_state(name, "JOB_STATE_QUEUED")
    fake.jobs[name].pop("startTime"), fake.jobs[name].pop("endTime")
    out = json.loads(run_cli("status", name, "-o", "json", vertex=fake).stdout)
    assert "cost" not in out


def test_the_submit_wait_summary_says_what_the_run_cost(fake, run_cli, spec_file):
    result = run_cli("submit", spec_file(image=IMAGE), "--wait", "--no-logs", "-o", "json", vertex=fake)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["state"] == "JOB_STATE_SUCCEEDED"
    hourly = cost.estimate(build_spec(spec_data(image=IMAGE)), pricing.load_snapshot()).attempts[0].hourly
    assert out["cost"]["hourly"] == pytest.approx(hourly, abs=1e-4) and out["cost"]["usd"] is not None
    text = run_cli("submit", spec_file(image=IMAGE), "--wait", "--no-logs", vertex=fake)
    assert "cost " in text.stdout and "list price" in text.stdout
