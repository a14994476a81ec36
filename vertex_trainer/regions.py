"""Where Vertex AI training offers each accelerator, and the quota metric each one counts against.

Plain data and pure functions (the hardware layer, beside hardware.py): no I/O, no imports.

Source of the region table (read 2026-11-30, the stored copy of the page):
- Vertex AI quotas and limits, "Custom-trained model quotas > Training": one table per
  accelerator with a value per region, or "Not available" where training does not offer it.
  https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/quotas
  (formerly https://cloud.google.com/vertex-ai/docs/quotas; the locations page,
  https://cloud.google.com/vertex-ai/docs/general/locations#accelerators, says the same per region
  but could not be read whole; its 2024 US rows agree except for T4, which the newer quota table
  no longer lists in us-east4, us-west2 and us-west4).
- TPU v5e has no training row in that table: its regions are those of the Cloud TPU v5e zones
  (https://cloud.google.com/tpu/docs/regions-zones) that Vertex also serves v5e in (the table's
  "v5e TPU chips for serving" row). Lower confidence, so its warning says "may not".

Quota metrics (aiplatform.googleapis.com/...): `custom_model_training_<gpu>_gpus` for standard
jobs and `custom_model_training_preemptible_<gpu>_gpus` for Spot and for Flex Start (Dynamic
Workload Scheduler jobs count against the preemptible quota, billed at on-demand prices:
https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws#quota). The names were read
from Google's vertex-ai-samples quota helper and from the services' own refusals
("The following quota metrics exceed quota limits: aiplatform.googleapis.com/
custom_model_training_nvidia_l4_gpus"). TPU v2/v3 count cores, TPU v5e chips.
"""

from __future__ import annotations

READ = "2026-11-30"
SOURCE = "https://cloud.google.com/vertex-ai/docs/quotas (custom training, per region)"
LOCATIONS_URL = "https://cloud.google.com/vertex-ai/docs/general/locations#accelerators"

# Every region of the table (Vertex AI training regions), in the page's order.
REGIONS: tuple[str, ...] = (
    "us-west1", "us-west2", "us-west3", "us-west4", "us-central1", "us-east1", "us-east4", "us-east5",
    "us-south1", "northamerica-northeast1", "northamerica-northeast2", "southamerica-east1",
    "southamerica-west1", "europe-west2", "europe-west1", "europe-west4", "europe-west6", "europe-west3",
    "europe-north1", "europe-central2", "europe-west8", "europe-west9", "europe-southwest1", "asia-south1",
    "asia-south2", "asia-southeast1", "asia-southeast2", "asia-east2", "asia-east1", "asia-northeast1",
    "asia-northeast2", "australia-southeast1", "australia-southeast2", "asia-northeast3", "me-west1",
    "me-central1", "me-central2", "europe-west12", "africa-south1",
)

# Accelerator (AcceleratorType name) -> the regions whose training table gives it a value.
TRAINING: dict[str, tuple[str, ...]] = {
    "NVIDIA_TESLA_T4": ("us-west1", "us-central1", "us-east1", "europe-west2", "europe-west4", "europe-west3",
                        "asia-south1", "asia-southeast1", "asia-northeast1", "asia-northeast3"),
    "NVIDIA_TESLA_P4": ("us-west2", "us-central1", "us-east4", "northamerica-northeast1", "europe-west4",
                        "asia-southeast1", "australia-southeast1"),
    "NVIDIA_TESLA_P100": ("us-west1", "us-central1", "us-east1", "europe-west1", "asia-east1",
                          "australia-southeast1"),
    "NVIDIA_TESLA_V100": ("us-west1", "us-central1", "europe-west4", "asia-east1"),
    "NVIDIA_L4": ("us-west1", "us-central1", "us-east1", "us-east4", "northamerica-northeast2", "europe-west4",
                  "asia-south1", "asia-southeast1", "asia-northeast3", "me-central2"),
    "NVIDIA_TESLA_A100": ("us-central1", "europe-west4", "asia-southeast1"),
    "NVIDIA_A100_80GB": ("us-central1", "us-east4", "europe-west4", "asia-southeast1"),
    "NVIDIA_H100_80GB": ("us-west1", "us-central1", "us-east4", "us-east5", "europe-west4", "asia-southeast1",
                         "asia-northeast1"),
    "NVIDIA_H100_MEGA_80GB": ("us-west1", "us-west4", "us-central1", "us-east4", "us-east5", "europe-west1",
                              "europe-west4", "asia-southeast1", "asia-northeast1", "australia-southeast1"),
    "NVIDIA_H200_141GB": ("us-west1", "us-central1", "us-east4", "europe-west1", "asia-south2"),
    "NVIDIA_B200": ("us-west2", "us-central1", "us-east1", "us-south1"),
    "TPU_V2": ("us-central1", "europe-west4", "asia-east1"),
    "TPU_V3": ("us-central1", "europe-west4", "asia-east1"),
    "TPU_V5_LITEPOD": ("us-west1", "us-west4", "us-central1", "us-south1", "europe-west4", "asia-southeast1"),
}
UNCERTAIN = frozenset({"TPU_V5_LITEPOD"})  # not in the training table: see the module docstring

# Accelerator -> the part of its quota metric between custom_model_training_[preemptible_] and the end.
_METRIC = {
    "NVIDIA_TESLA_T4": "nvidia_t4_gpus", "NVIDIA_TESLA_P4": "nvidia_p4_gpus",
    "NVIDIA_TESLA_P100": "nvidia_p100_gpus", "NVIDIA_TESLA_V100": "nvidia_v100_gpus",
    "NVIDIA_L4": "nvidia_l4_gpus", "NVIDIA_TESLA_A100": "nvidia_a100_gpus",
    "NVIDIA_A100_80GB": "nvidia_a100_80gb_gpus", "NVIDIA_H100_80GB": "nvidia_h100_gpus",
    "NVIDIA_H100_MEGA_80GB": "nvidia_h100_mega_gpus", "NVIDIA_H200_141GB": "nvidia_h200_gpus",
    "NVIDIA_B200": "nvidia_b200_gpus", "TPU_V2": "tpu_v2", "TPU_V3": "tpu_v3", "TPU_V5_LITEPOD": "tpu_v5e",
}
SERVICE = "aiplatform.googleapis.com"


def known(region: str) -> bool:
    return region in REGIONS


def offers(region: str, accelerator: str) -> bool | None:
    """Does Vertex AI training offer `accelerator` in `region`? None when the table cannot say
    (an accelerator or a region it does not list)."""
    regions = TRAINING.get(accelerator)
    if regions is None or region not in REGIONS:
        return None
    return region in regions


def regions_for(accelerator: str) -> tuple[str, ...]:
    """The training regions that offer `accelerator` (empty if the table does not list it)."""
    return TRAINING.get(accelerator, ())


def offered_in(region: str) -> list[str]:
    """The accelerators Vertex AI training offers in `region`, in the table's order."""
    return [name for name, regions in TRAINING.items() if region in regions]


def availability_warning(region: str | None, accelerator: str | None) -> str | None:
    """A warning when the table says `region` does not offer `accelerator` for training (naming
    the regions that do), or does not know `region` at all; None when it offers it or cannot say."""
    if not region or not accelerator or accelerator not in TRAINING:
        return None
    where = ", ".join(regions_for(accelerator))
    source = f"(Vertex AI docs, read {READ}: {LOCATIONS_URL})"
    if region not in REGIONS:
        return (f"warning: region: {region} is not a Vertex AI training region we know of; "
                f"{accelerator} trains in {where} {source}")
    if region in TRAINING[accelerator]:
        return None
    may = "may not offer" if accelerator in UNCERTAIN else "does not offer"
    return (f"warning: region: {region} {may} {accelerator} for Vertex AI training; regions that do: "
            f"{where} {source}")


def quota_metric(accelerator: str | None, strategy: str) -> str | None:
    """The quota metric a job on `accelerator` counts against with this scheduling strategy:
    standard -> custom_model_training_<x>; spot and flex-start -> the preemptible variant."""
    suffix = _METRIC.get(accelerator or "")
    if suffix is None:
        return None
    preemptible = "preemptible_" if strategy in ("spot", "flex-start") else ""
    return f"{SERVICE}/custom_model_training_{preemptible}{suffix}"
