"""`cost --compare` answers the seed's question from the job's own facts, and `dev refresh-prices`
rebuilds the shipped snapshot from the Cloud Billing Catalog stand-in (several pages)."""

from __future__ import annotations

import json

import pytest

from tests.cli_support import cli_command
from tests.cost.conftest import spec_data
from tests.shared import FAST_RETRY as FAST
from vertex_trainer import api, pricing
from vertex_trainer.cost.billing_catalog import BillingClient
from vertex_trainer.settings import Settings
from vertex_trainer.spec import build_spec


def recommend(**changes):
    return api.cost(
        build_spec(spec_data(**changes)), compare=True, read_manifest=False, settings=Settings()
    ).recommendation


def test_the_seeds_case_recommends_flex_start_with_the_figures_behind_it(run_cli, spec_file):
    # 2 x 8 H100, 4 days, the bundled trainer, the start may wait.
    result = run_cli("cost", spec_file(), "--compare", "-o", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    rec = out["recommendation"]
    assert rec["strategy"] == "flex-start" and rec["hardware"] == "h100x8"
    assert "multi-day" in rec["reason"] and "cannot survive preemption" in rec["reason"]
    standard = next(
        r
        for r in out["alternatives"]
        if (r["hardware"], r["strategy"], r["region"]) == ("h100x8", "standard", "us-central1")
    )
    assert f"standard {standard['hourly']:,.2f} USD/h" in rec["reason"]
    assert {"h100x8", "h100-megax8"} <= {r["hardware"] for r in out["alternatives"]}  # same family and size
    assert {"standard", "spot", "flex-start"} == {r["strategy"] for r in out["alternatives"]}
    assert len({r["region"] for r in out["alternatives"]}) > 1
    text = run_cli("cost", spec_file(), "--compare")
    assert "recommendation: flex-start" in text.stdout


def test_a_job_that_survives_preemption_is_recommended_spot():
    rec = recommend(replicas=1)  # one machine, the bundled trainer's BackupAndRestore
    assert rec.strategy == "spot" and "checkpoints" in rec.reason


def test_a_start_that_cannot_wait_is_recommended_standard_or_the_reservation():
    spec = build_spec(spec_data())
    assert (
        api.cost(spec, compare=True, can_wait=False, read_manifest=False).recommendation.strategy
        == "standard"
    )
    reserved = build_spec(
        spec_data(scheduling={"reservation": "projects/p/zones/us-central1-a/reservations/h100"})
    )
    rec = api.cost(reserved, compare=True, can_wait=False, read_manifest=False).recommendation
    assert rec.strategy == "reservation" and "h100" in rec.reason


def test_a_cpu_machine_is_compared_in_the_spec_s_region_without_flex_start(run_cli, spec_file):
    # The region table lists accelerators; a CPU-only machine has none (this was a traceback).
    cpu = spec_file(hardware="cpu", replicas=1, image={"uri": "us-docker.pkg.dev/p/r/mine:v1"})
    result = run_cli("cost", cpu, "--compare", "--output", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {r["region"] for r in out["alternatives"]} == {"us-central1"}
    assert "flex-start" not in {r["strategy"] for r in out["alternatives"]}
    assert {r["quota"] for r in out["alternatives"]} == {None}
    rec = out["recommendation"]
    assert rec["strategy"] == "standard" and "on hardware Flex Start does not serve" in rec["reason"]


def test_a_custom_image_is_not_assumed_to_checkpoint():
    rec = recommend(replicas=1, image={"uri": "us-docker.pkg.dev/p/r/mine:v1"}, scheduling={"timeout": "10h"})
    assert rec.strategy == "flex-start" and "the trainer does not checkpoint" in rec.reason


def test_refresh_prices_against_the_stand_in_rebuilds_the_shipped_snapshot(billing, run_cli, tmp_path):
    out = tmp_path / "snapshot.json"
    result = run_cli("dev", "refresh-prices", "--out", out, billing=billing)
    assert result.returncode == 0, result.stderr
    rebuilt, shipped = json.loads(out.read_text()), pricing.load_snapshot().data
    for key in ("families", "accelerators", "skus_read", "skus_used", "currency"):
        assert rebuilt[key] == shipped[key], key
    sku_pages = [r for r in billing.requests if "/skus" in r]
    service_pages = [r for r in billing.requests if r.startswith("/v1/services?")]
    assert len(sku_pages) >= 3 and all("currencyCode=USD" in r for r in sku_pages)
    assert len(service_pages) >= 2  # the Vertex AI service is on a later page
    assert "prices as of" in result.stdout


def test_a_changed_price_and_a_transient_error_are_read_through(billing):
    billing.set_price("Vertex AI: Training on Nvidia H100 80GB GPU running in Americas", 10.5)
    billing.inject(503)
    book = BillingClient(settings=Settings(billing_endpoint=billing.url, retry=FAST)).price_book()
    assert book.source == "billing-api"
    assert book.accelerator("NVIDIA_H100_80GB", "us-central1", "standard") == pytest.approx(10.5)


def test_live_prices_read_the_api(billing, run_cli, spec_file):
    out = json.loads(run_cli("cost", spec_file(), "--live-prices", "-o", "json", billing=billing).stdout)
    assert out["source"] == "billing-api" and out["attempts"][0]["hourly"] > 0
    assert any("/skus" in r for r in billing.requests)


def test_compare_shows_the_quota_where_the_cloud_quotas_api_answers():
    from vertex_trainer.emulators.quotas import FakeQuotas

    with FakeQuotas() as quotas:
        quotas.set("aiplatform.googleapis.com/custom_model_training_nvidia_h100_gpus", "us-central1", 16)
        quotas.set("aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100_gpus", None, 64)
        c = api.cost(
            build_spec(spec_data()),
            compare=True,
            read_manifest=False,
            settings=Settings(quotas_endpoint=quotas.url, retry=FAST),
        )
    row = {(r.hardware, r.strategy, r.region): r.quota for r in c.rows}
    assert row[("h100x8", "standard", "us-central1")] == 16
    assert row[("h100x8", "spot", "us-east4")] == 64  # the default for regions without their own


@pytest.mark.wire
def test_the_sandbox_has_a_billing_stand_in(run_cli_process, spec_file):
    # A process: the sandbox's child writes to the stdout it inherits (a file descriptor).
    result = run_cli_process(
        "dev",
        "sandbox",
        "--",
        *cli_command(),
        "cost",
        spec_file(),
        "--live-prices",
        "-o",
        "json",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["source"] == "billing-api"


def test_an_api_key_is_sent_instead_of_credentials(billing):
    BillingClient(
        settings=Settings(billing_endpoint=billing.url, billing_api_key="k-123", retry=FAST)
    ).price_book()
    assert billing.requests and all("key=k-123" in r for r in billing.requests)
