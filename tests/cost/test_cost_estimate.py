"""`vertex-trainer cost` (docs/contract.md section 12): hourly list prices, the worst case, the
expected cost from a throughput, and the prices that are not known (null with the reason)."""

from __future__ import annotations

import json

import pytest

from tests.cost.conftest import spec_data
from vertex_trainer import api, pricing
from vertex_trainer.cost import estimate as cost
from vertex_trainer.spec import build_spec

# Figures checked by hand against public pages (docs/cost.md "The figures checked"):
# cloud.google.com/vertex-ai/pricing, custom training, us-central1 (read 2026-10-07).
VERTEX_H100_GPU_HOUR = 9.79655057  # NVIDIA_H100_80GB accelerator, per hour
VERTEX_N1_STANDARD_4_HOUR = 0.21849885  # n1-standard-4 machine, per hour
# Compute Engine list prices, us-central1 (Cloud Billing Catalog, via Cyclenerd's pricing.yml and
# SkyPilot's catalog), and the Vertex AI training markup the n1-standard-4 figure confirms.
CE_A2_HIGHGPU_8G_HOUR = 8 * 3.673385  # machine and its 8 A100s
CE_A3_HIGHGPU_8G_MACHINE_HOUR = 8 * 1.18251  # vCPUs and memory only
MARKUP = 1.15


def estimate(**changes) -> cost.Estimate:
    return cost.estimate(build_spec(spec_data(**changes)), pricing.load_snapshot())


def hourly(preset: str, strategy: str = "standard", region: str = "us-central1") -> float:
    return (
        estimate(hardware=preset, replicas=1, region=region, scheduling={"strategy": strategy})
        .attempts[0]
        .hourly
    )


def test_a100x8_and_h100x8_in_us_central1_match_the_public_prices_within_a_few_percent():
    assert hourly("a100x8") == pytest.approx(CE_A2_HIGHGPU_8G_HOUR * MARKUP, rel=0.03)
    assert hourly("h100x8") == pytest.approx(
        8 * VERTEX_H100_GPU_HOUR + CE_A3_HIGHGPU_8G_MACHINE_HOUR * MARKUP, rel=0.03
    )
    book = pricing.load_snapshot()
    assert book.accelerator("NVIDIA_H100_80GB", "us-central1", "standard") == pytest.approx(
        VERTEX_H100_GPU_HOUR
    )
    n1 = pricing.machine_price(
        book,
        machine_type="n1-standard-4",
        accelerator_type=None,
        accelerator_count=0,
        region="us-central1",
        strategy="standard",
    )
    assert n1.hourly == pytest.approx(VERTEX_N1_STANDARD_4_HOUR, rel=1e-6)


@pytest.mark.parametrize("preset", ["a100x8", "h100x8", "a100-80gbx8"])
def test_spot_is_cheaper_than_standard(preset):
    assert 0 < hourly(preset, "spot") < hourly(preset, "standard")


def test_two_replicas_double_the_hourly_and_the_worst_case_is_hourly_times_the_timeout():
    one = estimate(replicas=1).attempts[0]
    two = estimate(replicas=2).attempts[0]
    assert two.hourly == pytest.approx(2 * one.hourly)
    assert two.max_hours == 96 and two.max_cost == pytest.approx(two.hourly * 96)


def test_the_throughput_gives_the_expected_hours_and_cost():
    spec = build_spec(spec_data())
    est = cost.estimate(spec, pricing.load_snapshot(), throughput=cost.Throughput(20_000.0, "--throughput"))
    a = est.attempts[0]
    examples = 90 * 156 * 8192
    assert a.expected_hours == pytest.approx(examples / 20_000 / 3600)
    assert a.expected_cost == pytest.approx(a.expected_hours * a.hourly)
    assert est.expected_cost == a.expected_cost and est.max_cost == a.max_cost


def test_cost_output_json_is_the_contract_object(run_cli, spec_file):
    result = run_cli("cost", spec_file(), "--output", "json", "--throughput", "20000")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {"currency", "prices_as_of", "source", "attempts", "max_cost", "expected_cost"} <= set(out)
    assert out["currency"] == "USD" and out["source"] == "snapshot"
    assert out["prices_as_of"] == pricing.load_snapshot().as_of
    (a,) = out["attempts"]
    assert set(a) == {
        "attempt",
        "region",
        "strategy",
        "hardware",
        "hourly",
        "max_hours",
        "max_cost",
        "expected_hours",
        "expected_cost",
    }
    assert (a["attempt"], a["region"], a["strategy"], a["hardware"]) == (
        1,
        "us-central1",
        "standard",
        "h100x8",
    )
    assert a["max_cost"] == pytest.approx(a["hourly"] * a["max_hours"], abs=0.01)
    assert a["expected_hours"] == pytest.approx(90 * 156 * 8192 / 20_000 / 3600, abs=0.01)
    assert out["max_cost"] == a["max_cost"] and out["expected_cost"] == a["expected_cost"]


def test_every_attempt_of_a_fallback_plan_is_priced(run_cli, spec_file):
    path = spec_file(scheduling={"strategy": "spot", "fallback": ["standard"]})
    out = json.loads(run_cli("cost", path, "-o", "json").stdout)
    spot, standard = out["attempts"]
    assert (spot["strategy"], standard["strategy"]) == ("spot", "standard")
    assert spot["hourly"] < standard["hourly"] and out["max_cost"] == standard["max_cost"]
    assert spot["expected_hours"] is None and out["expected_cost"] is None  # no throughput given


def test_a_bench_result_gives_the_throughput(run_cli, spec_file, tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(
        json.dumps(
            {
                "hardware": "a3-highgpu-8g (8 x NVIDIA_H100_80GB)",
                "real_examples_per_sec": 25_000.0,
                "synthetic_examples_per_sec": 30_000.0,
            }
        )
    )
    out = json.loads(run_cli("cost", spec_file(), "-o", "json", "--bench", bench).stdout)
    assert out["attempts"][0]["expected_hours"] == pytest.approx(90 * 156 * 8192 / 25_000 / 3600, abs=0.01)
    assert any("bench.json (real data" in n for n in out["notes"])


def test_the_examples_per_epoch_come_from_the_datasets_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"splits": {"train": {"examples": 100_000}}}))
    spec = build_spec(
        spec_data(
            trainer={
                "steps_per_epoch": None,
                "train_data": str(tmp_path / "train-*"),
                "batch_size": 1024,
                "epochs": 3,
            }
        )
    )
    est = api.cost(spec, throughput=500.0)
    whole = 100_000 // 1024 * 1024  # the trainer drops the last partial global batch
    assert est.examples_per_epoch == whole
    assert est.attempts[0].expected_hours == pytest.approx(3 * whole / 500 / 3600)


def test_a_published_reference_is_used_and_marked_as_such():
    spec = build_spec(spec_data(hardware="a100x8", replicas=1, trainer={"precision": "mixed_bfloat16"}))
    rate = cost.throughput_of(spec)
    assert rate.published and rate.source.startswith("published reference")
    assert rate.examples_per_sec == 2375 * 8


def test_a_price_the_snapshot_does_not_hold_is_null_with_the_reason(run_cli, spec_file):
    out = json.loads(
        run_cli(
            "cost",
            spec_file(hardware="tpu-v3-8", replicas=1, region="europe-west4", trainer={"model": "tiny-cnn"}),
            "-o",
            "json",
        ).stdout
    )
    a = out["attempts"][0]  # the snapshot prices no TPU v2/v3 board (docs/cost.md)
    assert a["hourly"] is None and a["max_cost"] is None and out["max_cost"] is None
    assert any(
        "no standard price for TPU v3 in europe-west4 in the price snapshot" in n for n in out["notes"]
    )
    est = estimate(region="southamerica-east1", hardware="a100x8", replicas=1)
    assert est.attempts[0].hourly is None and "southamerica-east1" in est.attempts[0].reason


def test_flex_start_is_priced_at_the_standard_price_as_a_ceiling():
    flex = estimate(scheduling={"strategy": "flex-start"}).attempts[0]
    standard = estimate().attempts[0]
    assert flex.upper_bound and flex.hourly == standard.hourly and "ceiling" in flex.reason


def test_text_output_names_the_snapshot_date(run_cli, spec_file):
    result = run_cli("cost", spec_file())
    assert result.returncode == 0, result.stderr
    assert f"as of {pricing.load_snapshot().as_of}" in result.stdout and "worst case" in result.stdout


def test_bench_adds_the_cost_per_epoch_of_the_measured_throughput():
    from vertex_trainer.performance.bench_text import bench_text

    spec = build_spec(spec_data())
    book = pricing.load_snapshot()
    per_epoch = cost.cost_per_epoch(spec, book, 20_000.0)
    hourly = cost.estimate(spec, book).attempts[0].hourly
    assert per_epoch["examples"] == 156 * 8192
    assert per_epoch["usd"] == pytest.approx(156 * 8192 / 20_000 / 3600 * hourly, abs=0.01)
    a100 = cost.cost_per_epoch(build_spec(spec_data(hardware="a100x8")), book, 10_000.0)
    assert a100["usd"] != per_epoch["usd"]  # two hardware choices compare in dollars
    result = {
        "spec": "s",
        "hardware": "h",
        "model": "resnet50",
        "image_size": 224,
        "global_batch_size": 8192,
        "precision": "mixed_bfloat16",
        "steps": 400,
        "steps_per_execution": 200,
        "synthetic_examples_per_sec": 21_000.0,
        "real_examples_per_sec": 20_000.0,
        "real_vs_synthetic": 0.95,
        "input_wait_fraction": None,
        "bound": None,
        "per_device_examples_per_sec": {"synthetic": 1312.5, "real": 1250.0},
        "reference": None,
        "notes": [],
        "cost_per_epoch": per_epoch,
    }
    assert f"{per_epoch['usd']:,.2f} USD per epoch" in bench_text(result)


def test_bench_result_carries_the_cost_per_epoch_or_per_million_examples(tmp_path):
    from vertex_trainer.api.bench import _cost_per_epoch
    from vertex_trainer.settings import Settings

    spec = build_spec(spec_data())
    found = _cost_per_epoch(spec, {"real_examples_per_sec": 20_000.0}, local=False, settings=Settings())
    assert found["examples"] == 156 * 8192 and found["usd"] is not None and "note" not in found
    assert found["usd_per_million_examples"] == pytest.approx(found["hourly"] * 1e6 / 20_000 / 3600, abs=1e-3)
    unsized = build_spec(
        spec_data(trainer={"steps_per_epoch": None, "train_data": str(tmp_path / "train-*")})
    )
    local = _cost_per_epoch(unsized, {"synthetic_examples_per_sec": 100.0}, local=True, settings=Settings())
    assert local["usd"] is None and local["usd_per_million_examples"] > 0 and "this machine" in local["note"]
