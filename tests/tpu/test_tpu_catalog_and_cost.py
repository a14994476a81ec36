"""TPUs in the catalog and the prices (issue 35 item 4), and a multi-host slice with the bundled
trainer through the CLI (item 3): `validate` and `render` of a v5e-16 slice, `cost` of it (chips
x the chip-hour price), `hardware` listing v5p and v6e with their sources."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.shared import write_spec
from vertex_trainer import hardware as hw
from vertex_trainer import pricing
from vertex_trainer.errors import SpecError
from vertex_trainer.pricing import skus

# The snapshot's TPU prices (vertex_trainer/catalog/sources.csv, tpu-pricing): Cloud TPU's on-demand
# per chip-hour list prices in US regions x 1.15, the Vertex AI training markup of the GPU prices.
CHIP_HOUR = {"TPU_V5_LITEPOD": 1.20, "TPU_V5P": 4.20, "TPU_V6E": 2.70, "TPU_V4_POD": 3.22}
MARKUP = 1.15
# Cloud TPU's Spot prices per chip-hour and the regions priced above the US list price (same source).
SPOT_CHIP_HOUR = {("TPU_V5_LITEPOD", "us-central1"): 0.24493, ("TPU_V6E", "us-east5"): 1.215}


def slice_spec(hardware: str = "tpu-v5e-16", **changes) -> dict:
    """A job of the bundled trainer (image.repository: built from the bundled trainer) on a slice."""
    return {
        "name": "resnet-slice",
        "project": "test-project",
        "region": "us-central1",
        "hardware": hardware,
        "image": {"repository": "us-central1-docker.pkg.dev/test-project/training/trainer"},
        "output_dir": "gs://test-bucket/runs/slice",
        "scheduling": {"timeout": "10h"},
        "trainer": {
            "model": "resnet50",
            "train_data": "gs://test-bucket/imagenet/train-*",
            "num_classes": 1000,
            "batch_size": 1024,
            "epochs": 1,
        },
        **changes,
    }


def test_a_v5e_16_slice_with_the_bundled_trainer_validates_and_renders(run_cli, tmp_path):
    path = write_spec(tmp_path, yaml.safe_dump(slice_spec()))
    validated = run_cli("validate", path)
    assert validated.returncode == 0, validated.stderr
    rendered = run_cli("render", path, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    pools = json.loads(rendered.stdout)["jobSpec"]["workerPoolSpecs"]
    # One replica; Vertex AI provisions the topology's 4 hosts and starts the container on each.
    assert len(pools) == 1 and pools[0]["replicaCount"] == "1"
    assert pools[0]["machineSpec"] == {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}
    assert pools[0]["containerSpec"]["args"]  # the bundled trainer's flags, as on one host


def test_cost_prices_a_v5e_16_slice_by_its_chips(run_cli, tmp_path):
    path = write_spec(tmp_path, yaml.safe_dump(slice_spec()))
    done = run_cli("cost", path, "--output", "json")
    assert done.returncode == 0, done.stderr
    attempt = json.loads(done.stdout)["attempts"][0]
    assert attempt["hourly"] == pytest.approx(16 * CHIP_HOUR["TPU_V5_LITEPOD"] * MARKUP)  # 22.08
    assert json.loads(done.stdout)["max_cost"] == pytest.approx(10 * 16 * 1.38)  # 10 h timeout


@pytest.mark.parametrize(
    ("preset", "accelerator", "chips", "region"),
    [
        ("tpu-v5e-1", "TPU_V5_LITEPOD", 1, "us-central1"),
        ("tpu-v5e-256", "TPU_V5_LITEPOD", 256, "us-west4"),
        ("tpu-v5p-16", "TPU_V5P", 8, "us-east5"),  # v5p names TensorCores: 2 per chip
        ("tpu-v6e-8", "TPU_V6E", 8, "us-east1"),  # one 8-chip host (ct6e-standard-8t)
        ("tpu-v6e-32", "TPU_V6E", 32, "us-central1"),  # 8 hosts of 4
    ],
)
def test_every_slice_is_its_chips_times_the_chip_hour_price(preset, accelerator, chips, region):
    p = hw.PRESETS[preset]
    price = pricing.machine_price(
        pricing.load_snapshot(),
        machine_type=p.machine_type,
        accelerator_type=None,
        accelerator_count=0,
        region=region,
        strategy="standard",
        tpu_topology=p.tpu_topology,
    )
    assert price.hourly == pytest.approx(chips * CHIP_HOUR[accelerator] * MARKUP)


def test_a_spot_slice_is_its_chips_times_the_spot_chip_hour_price_and_regions_differ():
    book = pricing.load_snapshot()
    spot = pricing.machine_price(
        book,
        machine_type="ct5lp-hightpu-4t",
        accelerator_type=None,
        accelerator_count=0,
        region="us-central1",
        strategy="spot",
        tpu_topology="4x4",
    )
    assert spot.hourly == pytest.approx(16 * SPOT_CHIP_HOUR[("TPU_V5_LITEPOD", "us-central1")] * MARKUP)
    assert book.accelerator("TPU_V6E", "us-east5", "spot") == pytest.approx(1.215 * MARKUP)
    # Cloud TPU lists v5e at 1.416 per chip-hour in us-south1 and 1.56 in europe-west4, not 1.20.
    assert book.accelerator("TPU_V5_LITEPOD", "us-south1", "standard") == pytest.approx(1.416 * MARKUP)
    assert book.accelerator("TPU_V5_LITEPOD", "europe-west4", "standard") == pytest.approx(1.56 * MARKUP)
    for name, regions in book.data["accelerators"].items():
        if name.startswith("TPU_"):
            for region, usages in regions.items():
                assert usages["spot"] < usages["standard"], (name, region)


def test_a_tpu_price_the_snapshot_lacks_is_none_with_the_reason():
    book = pricing.load_snapshot()
    v2 = pricing.machine_price(
        book,
        machine_type="cloud-tpu",
        accelerator_type="TPU_V2",
        accelerator_count=8,
        region="us-central1",
        strategy="spot",
    )
    assert v2.hourly is None and v2.reason == (
        f"no spot price for TPU v2 in us-central1 in the price snapshot (as of {book.as_of})"
    )
    # TPU v4: Cloud TPU serves it in us-central2 only, not a Vertex AI training region.
    assert book.accelerator("TPU_V4_POD", "us-central2", "standard") == pytest.approx(3.22 * MARKUP)
    v4 = pricing.machine_price(
        book,
        machine_type="ct4p-hightpu-4t",
        accelerator_type=None,
        accelerator_count=0,
        region="us-central1",
        strategy="standard",
        tpu_topology="2x2x1",
    )
    assert v4.hourly is None and "TPU v4 in us-central1" in (v4.reason or "")


def test_tpu_skus_are_classified_per_chip_hour_and_prediction_skus_skipped():
    def sku(description: str, usage: str = "OnDemand") -> dict:
        return {
            "skuId": "X",
            "description": description,
            "category": {"usageType": usage},
            "serviceRegions": ["us-central1"],
            "pricingInfo": [
                {
                    "pricingExpression": {
                        "usageUnit": "h",
                        "tieredRates": [{"unitPrice": {"units": "1", "nanos": 380000000}}],
                    }
                }
            ],
        }

    for text, name in [
        ("Vertex AI: Training on TPU v5e running in Americas", "TPU_V5_LITEPOD"),
        ("Vertex AI: Training on TPU v5 Lite running in Americas", "TPU_V5_LITEPOD"),
        ("Vertex AI: Training on TPU v5p running in Americas", "TPU_V5P"),
        ("Vertex AI: Training on TPU v6e running in Americas", "TPU_V6E"),
        ("Vertex AI: Training on TPU v4 running in Americas", "TPU_V4_POD"),
    ]:
        priced = skus.classify(sku(text))
        assert priced is not None and (priced.kind, priced.name, priced.price) == ("accelerator", name, 1.38)
    spot = skus.classify(
        sku("Vertex AI: Training on Spot Preemptible TPU v6e running in EMEA", "Preemptible")
    )
    assert spot is not None and spot.usage == "spot"
    assert skus.classify(sku("Vertex AI: Online/Batch Prediction on TPU v5e running in Americas")) is None


def test_hardware_lists_v5p_and_v6e_with_their_sources(run_cli):
    done = run_cli("hardware", "--output", "json")
    assert done.returncode == 0, done.stderr
    rows = {r["preset"]: r for r in json.loads(done.stdout)}
    for name, chips, hosts, machine in [
        ("tpu-v5p-8", 4, 1, "ct5p-hightpu-4t"),
        ("tpu-v5p-256", 128, 32, "ct5p-hightpu-4t"),
        ("tpu-v6e-8", 8, 1, "ct6e-standard-8t"),
        ("tpu-v6e-256", 256, 64, "ct6e-standard-4t"),
    ]:
        row = rows[name]
        assert (row["machine_type"], row["accelerator_count"], row["hosts"]) == (machine, chips, hosts), name
        assert row["read"] == "2026-12-02" and row["regions"]["confidence"] == "low", row
        assert any("cloud.google.com/tpu/docs/v" in u for u in row["sources"]), row
    assert rows["tpu-v5p-8"]["training"] == "unconfirmed" and rows["tpu-v6e-8"]["training"] == "offered"
    text = run_cli("hardware").stdout
    assert "tpu-v5p-8" in text and "tpu-v6e-256" in text


def test_v5p_and_v6e_are_machine_types_not_accelerator_types():
    # The v1 API has no AcceleratorType for them: the machine type (with a topology) says it.
    with pytest.raises(SpecError) as e:
        hw.check_hardware("hardware", "ct6e-standard-4t", "TPU_V6E", 4, "2x2")
    assert "TPU_V6E is not an AcceleratorType of the v1 API" in str(e.value)
    assert "ct6e-standard-1t, ct6e-standard-4t, ct6e-standard-8t" in str(e.value)
    hw.check_hardware("hardware", "ct6e-standard-4t", None, 0, "4x4")  # the API's way: no raise
    assert hw.machines_per_replica("ct6e-standard-4t", "4x4") == 4
    with pytest.raises(SpecError) as e:
        hw.check_hardware("hardware", "ct5p-hightpu-4t", None, 0, "4x4")
    assert "'4x4' does not match ct5p-hightpu-4t" in str(e.value)


@pytest.mark.parametrize(
    ("hardware", "line"),
    [
        (
            "tpu-v5e-16",
            "tpu-v5e-16: 4 machines of ct5lp-hightpu-4t in one TPU slice (topology 4x4) "
            "with 4 x TPU_V5_LITEPOD each = 16 TPU chips",
        ),
        (
            "tpu-v5e-4",
            "tpu-v5e-4: 1 machine of ct5lp-hightpu-4t with 4 x TPU_V5_LITEPOD (topology 2x2) = 4 TPU chips",
        ),
        (
            "tpu-v5p-32",
            "tpu-v5p-32: 4 machines of ct5p-hightpu-4t in one TPU slice (topology 2x2x4) "
            "with 4 x TPU v5p each = 16 TPU chips",
        ),
    ],
)
def test_validate_s_plan_names_a_slice_s_hosts(run_cli, tmp_path, hardware, line):
    region = "us-east5" if "v5p" in hardware else "us-central1"
    path = write_spec(tmp_path, yaml.safe_dump(slice_spec(hardware, region=region)))
    validated = run_cli("validate", path)
    assert validated.returncode == 0, validated.stderr
    hardware_line = next(x for x in validated.stdout.splitlines() if x.lstrip().startswith("hardware"))
    assert hardware_line.split(None, 1)[1] == line


def test_the_bundled_trainer_on_v6e_is_refused_and_a_script_job_is_not(run_cli, tmp_path):
    """Vertex AI does not train TensorFlow on TPU v6e (catalog source tpu-vm): the bundled trainer
    there is exit 2 naming hardware; a script job (JAX, PyTorch) on v6e validates."""
    path = write_spec(tmp_path, yaml.safe_dump(slice_spec("tpu-v6e-8", region="us-east5")))
    refused = run_cli("validate", path)
    assert refused.returncode == 2
    assert "hardware: TPU v6e: Vertex AI does not train TensorFlow on TPU v6e" in refused.stderr
    assert "(got 'tpu-v6e-8')" in refused.stderr and "tpu-v5e-*" in refused.stderr
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('jax or torch here')\n")
    script = {k: v for k, v in slice_spec("tpu-v6e-8", region="us-east5").items() if k != "trainer"}
    jax = "us-docker.pkg.dev/test-project/training/jax-tpu:v1"  # a script job names its own base
    script["image"] = {**script["image"], "code": str(code), "script": "train.py", "base_image": jax}
    accepted = run_cli("validate", write_spec(tmp_path, yaml.safe_dump(script), "script.yaml"))
    assert accepted.returncode == 0, accepted.stderr
