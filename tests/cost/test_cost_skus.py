"""The SKU mapping (vertex_trainer/pricing/skus.py) on a recorded, real-shaped SKU page.

The page below was built by hand in the shape of the cloudbilling.v1 discovery document
(googleapiclient/discovery_cache/documents/cloudbilling.v1.json, revision 20260901: Sku
{name, skuId, description, category {serviceDisplayName, resourceFamily, resourceGroup,
usageType}, serviceRegions, geoTaxonomy, pricingInfo[] {pricingExpression {usageUnit,
tieredRates[] {startUsageAmount, unitPrice {currencyCode, units, nanos}}}}, serviceProviderName});
it is not a recording of the live API.
"""

from __future__ import annotations

import pytest

from vertex_trainer.pricing import skus


def sku(
    description: str,
    usage: str = "OnDemand",
    unit: str = "h",
    units: str = "9",
    nanos: int = 796550570,
    regions=("us-central1",),
    group: str = "GPU",
) -> dict:
    return {
        "name": "services/C7E2-9256-1C43/skus/0A1B-2C3D-4E5F",
        "skuId": "0A1B-2C3D-4E5F",
        "description": description,
        "category": {
            "serviceDisplayName": "Vertex AI",
            "resourceFamily": "Compute",
            "resourceGroup": group,
            "usageType": usage,
        },
        "serviceRegions": list(regions),
        "geoTaxonomy": {"type": "REGIONAL", "regions": list(regions)},
        "pricingInfo": [
            {
                "summary": "",
                "effectiveTime": "2026-11-30T08:00:00.000Z",
                "pricingExpression": {
                    "usageUnit": unit,
                    "usageUnitDescription": "hour",
                    "displayQuantity": 1,
                    "tieredRates": [
                        {
                            "startUsageAmount": 0,
                            "unitPrice": {"currencyCode": "USD", "units": units, "nanos": nanos},
                        }
                    ],
                },
                "currencyConversionRate": 1,
            }
        ],
        "serviceProviderName": "Google",
    }


PAGE = [
    sku("Vertex AI: Training on Nvidia H100 80GB GPU running in Americas"),
    sku(
        "Vertex AI: Training on Spot Preemptible Nvidia H100 80GB GPU running in Americas",
        "Preemptible",
        units="3",
        nanos=918000000,
    ),
    sku(
        "Vertex AI: Training on Nvidia H100 80GB Mega GPU running in Americas",
        regions=("us-east4", "us-east5"),
    ),
    sku("Vertex AI: Training on Nvidia Tesla A100 80GB GPU running in Americas", units="4", nanos=0),
    sku("Vertex AI: Training on Nvidia Tesla A100 GPU running in Americas", units="3", nanos=374000000),
    sku(
        "Vertex AI: Training on A3 High Instance Core running in Americas",
        units="0",
        nanos=58000000,
        group="CPU",
    ),
    sku(
        "Vertex AI: Training on A3 High Instance Ram running in Americas",
        unit="GiBy.h",
        units="0",
        nanos=7800000,
        group="RAM",
    ),
    sku(
        "Vertex AI: Training on A2 Instance Core running in Americas", units="0", nanos=36352650, group="CPU"
    ),
    # noise a real page carries
    sku("Vertex AI: Online/Batch Prediction on Nvidia H100 80GB GPU running in Americas"),
    sku("Vertex AI: Training on Commitment v1: A3 High Instance Core in Americas for 1 Year", "Commit1Yr"),
    sku("Gemini 2.5 Pro Input Text Tokens", unit="count"),
    sku("Vertex AI: Training on Nvidia H100 80GB GPU running in Americas (per minute)", unit="min"),
    sku("Vertex AI: Training on Quantum Widget running in Americas"),
]


def test_accelerators_spot_and_families_are_classified_from_the_description_and_usage_type():
    got = [skus.classify(s) for s in PAGE]
    gpu, spot, mega, a100_80, a100, core, ram, a2_core = got[:8]
    assert (gpu.kind, gpu.name, gpu.usage, gpu.regions) == (
        "accelerator",
        "NVIDIA_H100_80GB",
        "standard",
        ("us-central1",),
    )
    assert gpu.price == pytest.approx(9.79655057)
    assert (spot.name, spot.usage) == ("NVIDIA_H100_80GB", "spot") and spot.price == pytest.approx(3.918)
    assert mega.name == "NVIDIA_H100_MEGA_80GB" and mega.regions == ("us-east4", "us-east5")
    assert (a100_80.name, a100.name) == ("NVIDIA_A100_80GB", "NVIDIA_TESLA_A100")  # longest phrase wins
    assert (core.kind, core.name, ram.kind, ram.name) == ("core", "a3-high", "ram", "a3-high")
    assert a2_core.name == "a2"


def test_prediction_commitments_other_products_other_units_and_unknown_resources_are_skipped():
    assert [skus.classify(s) for s in PAGE[8:]] == [None] * 5


def test_flex_start_skus_are_told_apart_by_their_description():
    flex = skus.classify(
        sku("Vertex AI: Training on DWS Flex Start Nvidia H100 80GB GPU running in Americas", "Preemptible")
    )
    assert (flex.name, flex.usage) == ("NVIDIA_H100_80GB", "flex-start")


def test_the_snapshot_keeps_a_family_only_where_both_its_core_and_ram_prices_are_known():
    snap = skus.snapshot(PAGE, as_of="2026-12-01", source="test page")
    assert snap["skus_read"] == len(PAGE) and snap["skus_used"] == 8
    assert snap["families"]["a3-high"]["us-central1"]["standard"] == pytest.approx(
        {"core": 0.058, "ram": 0.0078}
    )
    assert snap["families"]["a2"]["us-central1"] == {}  # a core price without a RAM price
    assert snap["accelerators"]["NVIDIA_H100_80GB"]["us-central1"] == pytest.approx(
        {"standard": 9.79655057, "spot": 3.918}
    )
    assert set(snap["accelerators"]["NVIDIA_H100_MEGA_80GB"]) == {"us-east4", "us-east5"}


@pytest.mark.parametrize(
    "machine_type, family",
    [
        ("a2-highgpu-8g", "a2"),
        ("a2-ultragpu-8g", "a2"),
        ("a3-highgpu-8g", "a3-high"),
        ("a3-megagpu-8g", "a3-mega"),
        ("a3-ultragpu-8g", "a3-ultra"),
        ("n1-standard-8", "n1"),
        ("g2-standard-8", "g2"),
    ],
)
def test_machine_types_map_to_the_sku_families(machine_type, family):
    assert skus.family_of(machine_type) == family
